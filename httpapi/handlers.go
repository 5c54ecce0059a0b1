package httpapi

import (
	"context"
	"iter"
	"net/http"
	"strconv"

	"example.com/groupmembership/membership"
)

// handleChangeMembers serves POST and DELETE: change is svc.AddMembers or
// svc.RemoveMembers. The reply is the count change returns, as a bare JSON
// number.
func handleChangeMembers(change func(ctx context.Context, groupID, usersJSON string) (int, error), maxBodyBytes int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := readChangeRequest(w, r, maxBodyBytes)
		if err != nil {
			writeError(w, r, err)
			return
		}
		n, err := change(r.Context(), r.PathValue("groupID"), req.users)
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, strconv.AppendInt(nil, int64(n), 10))
	})
}

// handleListMembers serves GET and HEAD: the group's members as a JSON array
// of {"uid":…,"nickname":…} objects in ascending uid order. An unchanged
// group is answered from cache.
func handleListMembers(svc *membership.Service, cache *listCache) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		groupID := r.PathValue("groupID")
		revision, err := svc.Revision(r.Context(), groupID)
		if err != nil {
			writeError(w, r, err)
			return
		}
		if body, ok := cache.get(groupID, revision); ok {
			writeJSON(w, http.StatusOK, body)
			return
		}
		var body []byte
		revision, err = svc.ListMembers(r.Context(), groupID, func(count int, members iter.Seq[membership.Member]) {
			body = encodeMembers(count, members)
		})
		if err != nil {
			writeError(w, r, err)
			return
		}
		cache.put(groupID, revision, body)
		writeJSON(w, http.StatusOK, body)
	})
}

func handleHealthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
	})
}

// handleMethodNotAllowed answers 405 with the Allow header set to allow.
func handleMethodNotAllowed(allow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, r, membership.Errorf(membership.CodeMethodNotAllowed,
			"method %s is not allowed on %s; allowed: %s", r.Method, r.URL.EscapedPath(), allow))
	})
}

func handleNotFound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, membership.Errorf(membership.CodeNotFound, "no route for %s %s", r.Method, r.URL.EscapedPath()))
	})
}

// Header values every reply shares. Assigning them directly skips the key
// canonicalisation and the slice allocation of Header.Set on every reply; the
// slices are never changed, and Header.Add on them would copy.
var (
	jsonContentType = []string{"application/json"}
	noSniff         = []string{"nosniff"}
)

// writeJSON writes body, which must be JSON, with the given status.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["X-Content-Type-Options"] = noSniff
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body) // a failed write means the client went away: nothing to tell it
}
