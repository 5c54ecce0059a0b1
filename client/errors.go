package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"time"
)

// The error codes of the service: Error.Code. The reference's "Status
// codes and error codes" says when each is given.
const (
	CodeInvalidGroupID         = "invalid_group_id"
	CodeMissingUsers           = "missing_users"
	CodeInvalidUsers           = "invalid_users"
	CodeInvalidChanges         = "invalid_changes"
	CodeInvalidChecks          = "invalid_checks"
	CodeInvalidUID             = "invalid_uid"
	CodeInvalidQuery           = "invalid_query"
	CodeInvalidHeader          = "invalid_header"
	CodeInvalidIdempotencyKey  = "invalid_idempotency_key"
	CodeInvalidBody            = "invalid_body"
	CodeMissingGroups          = "missing_groups"
	CodeInvalidGroups          = "invalid_groups"
	CodeTooManyGroups          = "too_many_groups"
	CodeCycle                  = "cycle"
	CodeTooDeep                = "too_deep"
	CodeTooManyAncestors       = "too_many_ancestors"
	CodeUnauthorized           = "unauthorized"
	CodeForbidden              = "forbidden"
	CodeNotFound               = "not_found"
	CodeNotMember              = "not_member"
	CodePreconditionFailed     = "precondition_failed"
	CodeIdempotencyKeyInFlight = "idempotency_key_in_flight"
	CodeIdempotencyKeyReused   = "idempotency_key_reused"
	CodeChangesGone            = "changes_gone"
	CodeMethodNotAllowed       = "method_not_allowed"
	CodeBodyTooLarge           = "body_too_large"
	CodeTooManyUsers           = "too_many_users"
	CodeTooManyChecks          = "too_many_checks"
	CodeTooManyChanges         = "too_many_changes"
	CodeUnsupportedMediaType   = "unsupported_media_type"
	CodeStarting               = "starting"
	CodeUnavailable            = "unavailable"
	CodeInternal               = "internal"
)

// Error is an error reply of the service: every status from 400 up, with
// the code and message of its body. Get it with errors.As, or test it
// with the Is functions (IsNotFound, IsPreconditionFailed, ...):
//
//	var e *client.Error
//	if errors.As(err, &e) && e.Code == client.CodeInvalidUsers {
//		log.Printf("element %d of users: %s", e.Index, e.Message)
//	}
//
// A reply whose body is not the service's error object (from a proxy, say)
// is an Error too, with an empty Code and the start of the body as its
// Message.
type Error struct {
	// StatusCode is the reply's HTTP status.
	StatusCode int
	// Code is the service's error code (the Code constants); empty when
	// the body had none.
	Code string
	// Message says what is wrong, for a person.
	Message string
	// Index is the index of the offending element that the message names
	// (of users, groups, changes or checks: see Element), -1 when it
	// names none.
	Index int
	// Element is what Index counts: "users", "groups", "changes" or
	// "checks"; empty when Index is -1. For an error in a user of a batch change, it is
	// "changes": the change that holds it.
	Element string
	// OldestRevision is, for changes_gone, the oldest revision the feed
	// keeps.
	OldestRevision Revision
	// ETag is the reply's ETag: for precondition_failed, the group's
	// current one.
	ETag string
	// RetryAfter is the wait the reply's Retry-After asks for; 0 without
	// one.
	RetryAfter time.Duration
	// Method and Path are the request's.
	Method, Path string
	// Header is the reply's header (X-Epoch of a /changes reply, say).
	Header http.Header
}

// Error returns "membership: METHOD PATH: STATUS CODE: MESSAGE".
func (e *Error) Error() string {
	code := e.Code
	if code == "" {
		code = "(no error code)"
	}
	return fmt.Sprintf("membership: %s %s: %d %s: %s", e.Method, e.Path, e.StatusCode, code, e.Message)
}

// maxErrorBody bounds what is read of an error reply.
const maxErrorBody = 64 << 10

// errorBody is the body of an error reply.
type errorBody struct {
	Error *struct {
		Code           string   `json:"code"`
		Message        string   `json:"message"`
		OldestRevision Revision `json:"oldest_revision"`
	} `json:"error"`
}

// elementRE finds the element an error message names first.
var elementRE = regexp.MustCompile(`^(users|groups|changes|checks) element ([0-9]+)\b`)

// newError returns the Error of a reply with status, header and body.
func newError(method, path string, status int, header http.Header, body []byte) *Error {
	e := &Error{StatusCode: status, Index: -1, Method: method, Path: path, ETag: header.Get("ETag"), Header: header,
		RetryAfter: parseRetryAfter(header.Get("Retry-After"), time.Now())}
	var b errorBody
	if err := json.Unmarshal(body, &b); err != nil || b.Error == nil || b.Error.Code == "" {
		e.Message = fmt.Sprintf("the reply is not an error of the service (%s): %.200q", http.StatusText(status), body)
		return e
	}
	e.Code, e.Message, e.OldestRevision = b.Error.Code, b.Error.Message, b.Error.OldestRevision
	if m := elementRE.FindStringSubmatch(e.Message); m != nil {
		if i, err := strconv.Atoi(m[2]); err == nil {
			e.Element, e.Index = m[1], i
		}
	}
	return e
}

// parseRetryAfter returns the wait a Retry-After value asks for: seconds,
// or an HTTP date after now; 0 when there is none or it cannot be read.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, 1<<30)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// asError returns the *Error in err's chain, or nil.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// ErrorCode returns the service's error code of err ("" when err is not
// an *Error in its chain).
func ErrorCode(err error) string {
	if e := asError(err); e != nil {
		return e.Code
	}
	return ""
}

// StatusCode returns the HTTP status of err's reply (0 when err is not an
// *Error in its chain).
func StatusCode(err error) int {
	if e := asError(err); e != nil {
		return e.StatusCode
	}
	return 0
}

// IsNotFound reports whether err is a 404: no such route (not_found), or
// a user who is not a member (not_member).
func IsNotFound(err error) bool { return StatusCode(err) == http.StatusNotFound }

// IsNotMember reports whether err is a 404 not_member.
func IsNotMember(err error) bool { return ErrorCode(err) == CodeNotMember }

// IsPreconditionFailed reports whether err is a 412 precondition_failed:
// an If-Match or If-None-Match did not hold, nothing was changed, and the
// Error's ETag is the group's current one. Read the group again, decide,
// and write again with the new ETag.
func IsPreconditionFailed(err error) bool { return ErrorCode(err) == CodePreconditionFailed }

// IsInFlight reports whether err is a 409 idempotency_key_in_flight: a
// request with the same key was still being applied. The client retries
// it by itself; it reaches the caller when the retries ran out.
func IsInFlight(err error) bool { return ErrorCode(err) == CodeIdempotencyKeyInFlight }

// IsKeyReused reports whether err is a 422 idempotency_key_reused: the
// key was used for another request; nothing was changed.
func IsKeyReused(err error) bool { return ErrorCode(err) == CodeIdempotencyKeyReused }

// IsUnauthorized reports whether err is a 401: the service has a token,
// and the request did not carry it (WithToken).
func IsUnauthorized(err error) bool { return StatusCode(err) == http.StatusUnauthorized }

// IsForbidden reports whether err is a 403 forbidden: the principal of
// the client's token lacks a right the request needs on a group (the
// message names the principal, the right and the group); nothing was
// changed.
func IsForbidden(err error) bool { return ErrorCode(err) == CodeForbidden }

// IsChangesGone reports whether err is a 410 changes_gone: the feed no
// longer holds the changes after the revision asked for, or never gave
// it out. See NeedsResync.
func IsChangesGone(err error) bool { return ErrorCode(err) == CodeChangesGone }

// IsUnavailable reports whether err is a 503 (unavailable or starting):
// the service could not serve the request now. The client retries those
// it may by itself; it reaches the caller when the retries ran out.
func IsUnavailable(err error) bool { return StatusCode(err) == http.StatusServiceUnavailable }

// IsInvalid reports whether err is a 400: the request is malformed (its
// Code says how), and sending it again changes nothing.
func IsInvalid(err error) bool { return StatusCode(err) == http.StatusBadRequest }

// IsTooLarge reports whether err is a 413: the body, its users, checks or
// changes are over the service's limits. Split the request.
func IsTooLarge(err error) bool { return StatusCode(err) == http.StatusRequestEntityTooLarge }

// IsCycle reports whether err is a 409 cycle: the nesting would make a
// group contain itself. Nothing was changed; the message names the path.
func IsCycle(err error) bool { return ErrorCode(err) == CodeCycle }

// IsTooDeep reports whether err is a 409 too_deep: the nesting would make
// a chain of nestings deeper than the service's -max-depth. Nothing was
// changed.
func IsTooDeep(err error) bool { return ErrorCode(err) == CodeTooDeep }

// IsTooManyAncestors reports whether err is a 409 too_many_ancestors: the
// nesting would put a group below more groups than the service's
// -max-ancestors. Nothing was changed; the message names the group.
func IsTooManyAncestors(err error) bool { return ErrorCode(err) == CodeTooManyAncestors }

// ErrEpochChanged is what EpochChangedError matches with errors.Is.
var ErrEpochChanged = errors.New("membership: the store's epoch changed")

// EpochChangedError is the error Follow reports when the feed's epoch
// (X-Epoch) is not the one it started from: the service restarted without
// its data, crashed, or was repaired or restored, and its revisions count
// in another history. What a copy of the groups holds is no longer known
// to match: list again, then follow from there (NeedsResync).
type EpochChangedError struct {
	// Was is the epoch followed until now, and Now the service's.
	Was, Now string
	// After is the revision Follow was to read after.
	After Revision
}

// Error says which epochs.
func (e *EpochChangedError) Error() string {
	return fmt.Sprintf("membership: the store's epoch changed from %s to %s while following the changes after %d: list again", e.Was, e.Now, e.After)
}

// Is makes errors.Is(err, ErrEpochChanged) true.
func (e *EpochChangedError) Is(target error) bool { return target == ErrEpochChanged }

// NeedsResync reports whether err says that a copy kept in sync with the
// feed can no longer be: a 410 changes_gone (the follower fell behind the
// feed's retention, or follows another history) or an epoch change. Drop
// the copy, list again, and follow from the revision the lists were at.
func NeedsResync(err error) bool { return IsChangesGone(err) || errors.Is(err, ErrEpochChanged) }

// ErrReplyTooLarge is returned, wrapped, when a reply's body is over the
// client's bound (WithMaxReplyBytes).
var ErrReplyTooLarge = errors.New("membership: the reply is larger than the client takes (WithMaxReplyBytes)")
