package httpapi

import (
	"errors"
	"net/http"

	"example.com/groupmembership/httpapi/decode"
	"example.com/groupmembership/httpapi/encode"
	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/membership"
)

// handleBatch serves POST /batch: writes to many groups in one request,
// {"changes":[{"op":"add","group":"g","users":[...]},...],"uid":...}, each
// change with an optional "if_match" (the group's ETag, or *). The whole
// body is validated before any of it is applied; then the store applies it
// all or nothing, as one change with one revision. The reply gives each
// change's counts in order, {"results":[{"added":2},{"removed":1},...]},
// and X-Revision.
func handleBatch(svc *membership.Service, maxBodyBytes int64, bodies *budget.Bytes) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := decode.IdempotencyKey(r)
		if err == nil {
			err = decode.RefuseConditions(r, `a batch's conditions are its changes' own: give each its "if_match"`)
		}
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		req, lease, err := decode.ReadBatch(r, svc, maxBodyBytes, bodies)
		defer lease.Release()
		if err == nil && req.ActingUID != 0 {
			middleware.SetActingUID(w, req.ActingUID)
		}
		req.Batch.Idem.Key, req.Batch.Principal = key, middleware.PrincipalName(r.Context())
		if err != nil {
			writeChangeError(w, r, svc, err)
			return
		}
		res, err := svc.Batch(r.Context(), req.Batch)
		if err != nil {
			writeChangeError(w, r, svc, err)
			return
		}
		writeWritten(w, res.Revision, res.Replayed)
		middleware.WriteJSON(w, http.StatusOK, encode.AppendBatchResults(nil, req.Batch.Writes, res.Results))
	})
}

// writeChangeError answers err of a write or a batch: as
// middleware.WriteError, with the current ETag of the group whose
// precondition failed.
func writeChangeError(w http.ResponseWriter, r *http.Request, svc *membership.Service, err error) {
	var e *membership.Error
	if errors.As(err, &e) && e.Code == membership.CodePreconditionFailed {
		w.Header()["Etag"] = encode.ETag(svc.Epoch(), e.Revision)
	}
	middleware.WriteError(w, r, err)
}
