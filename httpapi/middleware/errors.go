package middleware

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"example.com/groupmembership/httpapi/encode"
	"example.com/groupmembership/membership"
)

// The error codes of HTTP itself, beside the domain's (membership.Code):
// clients branch on them as on those.
const (
	CodeInvalidHeader        membership.Code = "invalid_header"         // a header the service reads (X-Min-Revision, If-Match, If-None-Match) has a value it cannot take
	CodeUnsupportedMediaType membership.Code = "unsupported_media_type" // the body's Content-Type is not one the service reads
	CodeUnauthorized         membership.Code = "unauthorized"           // the route needs the bearer token, and the request has not got it
	CodeNotFound             membership.Code = "not_found"              // no such route
	CodeMethodNotAllowed     membership.Code = "method_not_allowed"     // the route exists, the method does not
	CodeStarting             membership.Code = "starting"               // the service is loading its data: try again in a moment
)

// StatusOf maps each error code to its HTTP status. It is the one place that
// does; a code missing here is a bug and is answered 500.
var StatusOf = map[membership.Code]int{
	membership.CodeInvalidGroupID:         http.StatusBadRequest,
	membership.CodeMissingUsers:           http.StatusBadRequest,
	membership.CodeInvalidUsers:           http.StatusBadRequest,
	membership.CodeInvalidUID:             http.StatusBadRequest,
	membership.CodeInvalidBody:            http.StatusBadRequest,
	membership.CodeInvalidQuery:           http.StatusBadRequest,
	membership.CodeInvalidChecks:          http.StatusBadRequest,
	membership.CodeMissingGroups:          http.StatusBadRequest,
	membership.CodeInvalidGroups:          http.StatusBadRequest,
	CodeInvalidHeader:                     http.StatusBadRequest,
	membership.CodeTooManyUsers:           http.StatusRequestEntityTooLarge,
	membership.CodeTooManyChecks:          http.StatusRequestEntityTooLarge,
	membership.CodeTooManyGroups:          http.StatusRequestEntityTooLarge,
	membership.CodeInvalidChanges:         http.StatusBadRequest,
	membership.CodeTooManyChanges:         http.StatusRequestEntityTooLarge,
	membership.CodeBodyTooLarge:           http.StatusRequestEntityTooLarge,
	CodeUnsupportedMediaType:              http.StatusUnsupportedMediaType,
	CodeUnauthorized:                      http.StatusUnauthorized,
	membership.CodeForbidden:              http.StatusForbidden,
	CodeNotFound:                          http.StatusNotFound,
	membership.CodeNotMember:              http.StatusNotFound,
	CodeMethodNotAllowed:                  http.StatusMethodNotAllowed,
	membership.CodeChangesGone:            http.StatusGone,
	membership.CodePreconditionFailed:     http.StatusPreconditionFailed,
	membership.CodeInvalidIdempotencyKey:  http.StatusBadRequest,
	membership.CodeIdempotencyKeyReused:   http.StatusUnprocessableEntity,
	membership.CodeIdempotencyKeyInFlight: http.StatusConflict,
	membership.CodeInvalidAttributes:      http.StatusBadRequest,
	membership.CodeUserNameTaken:          http.StatusConflict,
	membership.CodeInactiveUser:           http.StatusConflict,
	membership.CodeUnknownUser:            http.StatusNotFound,
	membership.CodeUnknownGroup:           http.StatusNotFound,
	membership.CodeCycle:                  http.StatusConflict,
	membership.CodeTooDeep:                http.StatusConflict,
	membership.CodeTooManyAncestors:       http.StatusConflict,
	membership.CodeUnavailable:            http.StatusServiceUnavailable,
	CodeStarting:                          http.StatusServiceUnavailable,
	membership.CodeInternal:               http.StatusInternalServerError,
}

// RetryAfter is the Retry-After of every 503: the states that cause one
// (a spent budget, a stuck disk, a start or a stop) last seconds.
var RetryAfter = []string{"1"}

// statusClientClosed is what the access log and the metrics count for a
// request whose client went away before its reply (nginx's convention). It
// is never sent: there is nobody to send it to.
const statusClientClosed = 499

// WriteError answers err as {"error":{"code":…,"message":…}} with the status
// of its code; changes_gone adds "oldest_revision". Internal errors are
// recorded for the access log, which logs them with their detail; the
// client gets a generic message. An error that only says that the client
// went away (its context is cancelled) is not the service's fault: nothing
// is written, and the request counts as statusClientClosed.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		MarkClientClosed(w)
		return
	}
	code := membership.ErrorCode(err)
	status, ok := StatusOf[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if status == http.StatusInternalServerError {
		RecordInternalError(w, err)
	}
	if status == http.StatusServiceUnavailable {
		w.Header()["Retry-After"] = RetryAfter
	}
	b := append([]byte(`{"error":{"code":`), encode.AppendJSONString(nil, string(code))...)
	b = append(b, `,"message":`...)
	b = encode.AppendJSONString(b, membership.ErrorMessage(err))
	if e := (*membership.Error)(nil); code == membership.CodeChangesGone && errors.As(err, &e) {
		b = append(b, `,"oldest_revision":`...)
		b = strconv.AppendUint(b, uint64(e.OldestRevision), 10)
	}
	WriteJSON(w, status, append(b, "}}"...))
}
