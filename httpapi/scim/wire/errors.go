package wire

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/membership"
)

// Error is a SCIM error (RFC 7644 3.12): an HTTP status, a scimType for
// the kinds of 400 and 409 the RFC names, and a detail for people.
type Error struct {
	Status   int
	ScimType string
	Detail   string
}

func (e *Error) Error() string { return e.Detail }

// The scimTypes of RFC 7644 3.12 the service answers.
const (
	InvalidFilter = "invalidFilter"
	TooMany       = "tooMany"
	Uniqueness    = "uniqueness"
	Mutability    = "mutability"
	InvalidSyntax = "invalidSyntax"
	InvalidPath   = "invalidPath"
	NoTarget      = "noTarget"
	InvalidValue  = "invalidValue"
)

// Errorf returns an *Error of status and scimType ("" for none).
func Errorf(status int, scimType, format string, args ...any) *Error {
	return &Error{Status: status, ScimType: scimType, Detail: fmt.Sprintf(format, args...)}
}

// BadRequest returns a 400 *Error of scimType.
func BadRequest(scimType, format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, scimType, format, args...)
}

// statusOf maps the domain's and HTTP's codes that SCIM requests can meet
// to a status and a scimType. A code not here is the service's fault: 500.
var statusOf = map[membership.Code]struct {
	status   int
	scimType string
}{
	membership.CodeInvalidAttributes:      {http.StatusBadRequest, InvalidValue},
	membership.CodeInvalidGroupID:         {http.StatusBadRequest, InvalidValue},
	membership.CodeInvalidUsers:           {http.StatusBadRequest, InvalidValue},
	membership.CodeInvalidUID:             {http.StatusBadRequest, InvalidValue},
	membership.CodeInvalidQuery:           {http.StatusBadRequest, InvalidValue},
	membership.CodeInactiveUser:           {http.StatusBadRequest, InvalidValue},
	membership.CodeInvalidBody:            {http.StatusBadRequest, InvalidSyntax},
	middleware.CodeInvalidHeader:          {http.StatusBadRequest, InvalidSyntax},
	membership.CodeInvalidIdempotencyKey:  {http.StatusBadRequest, InvalidValue},
	membership.CodeUserNameTaken:          {http.StatusConflict, Uniqueness},
	membership.CodeIdempotencyKeyInFlight: {http.StatusConflict, ""},
	membership.CodeIdempotencyKeyReused:   {http.StatusUnprocessableEntity, ""},
	membership.CodeForbidden:              {http.StatusForbidden, ""},
	membership.CodeUnknownUser:            {http.StatusNotFound, ""},
	membership.CodeUnknownGroup:           {http.StatusNotFound, ""},
	membership.CodePreconditionFailed:     {http.StatusPreconditionFailed, ""},
	membership.CodeTooManyUsers:           {http.StatusRequestEntityTooLarge, ""},
	membership.CodeTooManyChanges:         {http.StatusRequestEntityTooLarge, ""},
	membership.CodeBodyTooLarge:           {http.StatusRequestEntityTooLarge, ""},
	middleware.CodeUnsupportedMediaType:   {http.StatusUnsupportedMediaType, ""},
	membership.CodeUnavailable:            {http.StatusServiceUnavailable, ""},
	middleware.CodeUnauthorized:           {http.StatusUnauthorized, ""},
	middleware.CodeStarting:               {http.StatusServiceUnavailable, ""},
}

// ErrorOf returns err as a SCIM error: its own, or a domain error's code
// mapped by statusOf; any other is a 500 with a generic detail.
func ErrorOf(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	s, ok := statusOf[membership.ErrorCode(err)]
	if !ok {
		return &Error{Status: http.StatusInternalServerError, Detail: "internal error"}
	}
	return &Error{Status: s.status, ScimType: s.scimType, Detail: membership.ErrorMessage(err)}
}

// ErrorSchema is the schema of SCIM's error responses.
const ErrorSchema = "urn:ietf:params:scim:api:messages:2.0:Error"

// WriteError answers err with SCIM's error schema: {"schemas":[…],
// "status":"400","scimType":…,"detail":…}, the status a string as RFC
// 7644 writes it. An internal error is recorded for the access log, which
// logs its detail; the client gets a generic one. An error that only says
// that the client went away writes nothing.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		middleware.MarkClientClosed(w)
		return
	}
	e := ErrorOf(err)
	if e.Status == http.StatusInternalServerError {
		middleware.RecordInternalError(w, err)
	}
	if e.Status == http.StatusServiceUnavailable {
		w.Header()["Retry-After"] = middleware.RetryAfter
	}
	body := Object{{"schemas", []string{ErrorSchema}}, {"status", strconv.Itoa(e.Status)}}
	if e.ScimType != "" {
		body = append(body, Member{"scimType", e.ScimType})
	}
	body = append(body, Member{"detail", e.Detail})
	WriteJSON(w, e.Status, body)
}
