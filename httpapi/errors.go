package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"example.com/groupmembership/membership"
)

// statusOf maps each error code to its HTTP status. It is the one place that
// does; a code missing here is a bug and is answered 500.
var statusOf = map[membership.Code]int{
	membership.CodeInvalidGroupID:       http.StatusBadRequest,
	membership.CodeMissingUsers:         http.StatusBadRequest,
	membership.CodeInvalidUsers:         http.StatusBadRequest,
	membership.CodeInvalidUID:           http.StatusBadRequest,
	membership.CodeInvalidBody:          http.StatusBadRequest,
	membership.CodeInvalidQuery:         http.StatusBadRequest,
	membership.CodeInvalidHeader:        http.StatusBadRequest,
	membership.CodeTooManyUsers:         http.StatusRequestEntityTooLarge,
	membership.CodeBodyTooLarge:         http.StatusRequestEntityTooLarge,
	membership.CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	membership.CodeUnauthorized:         http.StatusUnauthorized,
	membership.CodeNotFound:             http.StatusNotFound,
	membership.CodeNotMember:            http.StatusNotFound,
	membership.CodeMethodNotAllowed:     http.StatusMethodNotAllowed,
	membership.CodeChangesGone:          http.StatusGone,
	membership.CodeUnavailable:          http.StatusServiceUnavailable,
	membership.CodeStarting:             http.StatusServiceUnavailable,
	membership.CodeInternal:             http.StatusInternalServerError,
}

// retryAfter is the Retry-After of every 503: the states that cause one
// (a spent budget, a stuck disk, a start or a stop) last seconds.
var retryAfter = []string{"1"}

// statusClientClosed is what the access log and the metrics count for a
// request whose client went away before its reply (nginx's convention). It
// is never sent: there is nobody to send it to.
const statusClientClosed = 499

// writeError answers err as {"error":{"code":…,"message":…}} with the status
// of its code; changes_gone adds "oldest_revision". Internal errors are
// recorded for the access log, which logs them with their detail; the
// client gets a generic message. An error that only says that the client
// went away (its context is cancelled) is not the service's fault: nothing
// is written, and the request counts as statusClientClosed.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		markClientClosed(w)
		return
	}
	code := membership.ErrorCode(err)
	status, ok := statusOf[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if status == http.StatusInternalServerError {
		recordInternalError(w, err)
	}
	if status == http.StatusServiceUnavailable {
		w.Header()["Retry-After"] = retryAfter
	}
	b := append([]byte(`{"error":{"code":`), appendJSONString(nil, string(code))...)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, membership.ErrorMessage(err))
	if e := (*membership.Error)(nil); code == membership.CodeChangesGone && errors.As(err, &e) {
		b = append(b, `,"oldest_revision":`...)
		b = strconv.AppendUint(b, uint64(e.OldestRevision), 10)
	}
	writeJSON(w, status, append(b, "}}"...))
}
