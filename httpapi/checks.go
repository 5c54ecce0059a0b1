package httpapi

import (
	"mime"
	"net/http"
	"unsafe"

	"example.com/groupmembership/httpapi/decode"
	"example.com/groupmembership/httpapi/encode"
	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/membership"
)

// handleCheck serves POST /check: many membership checks in one request,
// {"checks":[{"group":"g","uid":1},...]}, validated whole before any is
// answered; with "transitive":true beside "checks", every check counts the
// members of the group's subgroups at any depth too. The reply,
// {"results":[true,false,...]}, answers each check in order, all at the one
// revision X-Revision gives. It is a read: it changes nothing, takes
// X-Min-Revision, and needs the token only when reads do.
func handleCheck(svc *membership.Service, maxBodyBytes int64, bodies *budget.Bytes) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, lease, err := readChecks(r, svc.MaxChecks(), maxBodyBytes, bodies)
		defer lease.Release()
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		var found []bool
		var rev membership.Revision
		if req.Transitive {
			found, rev, err = svc.CheckTransitive(r.Context(), req.Checks)
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

// readChecks reads and decodes the body of POST /check. The body's memory,
// and that of the decoded checks, are taken from bodies: the caller
// releases the lease once done with the checks, error or not.
//
// Errors: middleware.CodeUnsupportedMediaType, CodeBodyTooLarge, CodeInvalidBody,
// CodeInvalidChecks, CodeTooManyChecks, CodeUnavailable (bodies is spent).
func readChecks(r *http.Request, maxChecks int, maxBodyBytes int64, bodies *budget.Bytes) (decode.CheckRequest, budget.Lease, error) {
	if ct := middleware.HeaderValue(r, "Content-Type"); ct != "" {
		if mediaType, _, err := mime.ParseMediaType(ct); err != nil || mediaType != jsonMediaType {
			return decode.CheckRequest{}, budget.Lease{}, membership.Errorf(middleware.CodeUnsupportedMediaType,
				"Content-Type %q is not supported: POST /check takes %s", ct, jsonMediaType)
		}
	}
	body, lease, err := readBody(r, maxBodyBytes, bodies)
	if err != nil {
		return decode.CheckRequest{}, lease, err
	}
	// The body is never written again: the group ids may point into it.
	req, err := decode.ParseChecks(unsafe.String(unsafe.SliceData(body), len(body)), maxChecks)
	if err != nil {
		return decode.CheckRequest{}, lease, err
	}
	checks := req.Checks
	// The checks take memory of their own, and so does a group id with an
	// escape in it, decoded into a copy: taken with the body's at once, so
	// that a request alone is served whatever its size.
	size := int64(cap(checks)) * int64(unsafe.Sizeof(membership.Check{}))
	for _, c := range checks {
		if !within(body, c.GroupID) {
			size += int64(len(c.GroupID))
		}
	}
	if !lease.Resize(lease.Held() + size) {
		return decode.CheckRequest{}, lease, bodiesBusy()
	}
	return req, lease, nil
}
