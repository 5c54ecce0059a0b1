package httpapi

import (
	"net/http"

	"example.com/groupmembership/httpapi/decode"
	"example.com/groupmembership/httpapi/encode"
	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/nestreads"
)

// handleCheck serves POST /check: many membership checks in one request,
// {"checks":[{"group":"g","uid":1},...]}, validated whole before any is
// answered; with "transitive":true beside "checks", every check counts the
// members of the group's subgroups at any depth too. The reply,
// {"results":[true,false,...]}, answers each check in order, all at the one
// revision X-Revision gives. It is a read: it changes nothing, takes
// X-Min-Revision, and needs the token only when reads do.
func handleCheck(svc *membership.Service, nest *nestreads.Service, maxBodyBytes int64, bodies *budget.Bytes) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, lease, err := decode.ReadChecks(r, svc.MaxChecks(), maxBodyBytes, bodies)
		defer lease.Release()
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		var found []bool
		var rev membership.Revision
		if req.Transitive {
			found, rev, err = nest.CheckTransitive(r.Context(), req.Checks)
		} else {
			found, rev, err = svc.CheckMembers(r.Context(), req.Checks)
		}
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		writeRevision(w, rev)
		// The reply, at most 6 bytes a check, is smaller than the body that
		// asked, whose lease holds until it is sent: it needs no budget of
		// its own.
		middleware.WriteJSON(w, http.StatusOK, encode.AppendResults(make([]byte, 0, len(`{"results":[]}`)+6*len(found)), found))
	})
}
