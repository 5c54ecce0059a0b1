package membership

import (
	"errors"
	"fmt"
)

// Code is a machine-readable error code. Clients branch on it; the HTTP layer
// maps each code to one status in one place.
type Code string

// The error codes of the domain: what a request or the store can get wrong.
// The HTTP layer adds its own (a route or method that does not exist, a
// missing token, a header or media type it cannot read, a service still
// starting); docs/reference.md's table of status and error codes lists them all.
const (
	CodeInvalidGroupID         Code = "invalid_group_id"          // the group id is empty, too long, not UTF-8 or has control characters
	CodeMissingUsers           Code = "missing_users"             // the request has no users parameter
	CodeInvalidUsers           Code = "invalid_users"             // the users value is not a JSON array of valid user elements
	CodeInvalidUID             Code = "invalid_uid"               // the acting uid parameter is not a valid uid
	CodeInvalidBody            Code = "invalid_body"              // the request body cannot be decoded
	CodeInvalidQuery           Code = "invalid_query"             // a query parameter (limit, after) is not valid
	CodeTooManyUsers           Code = "too_many_users"            // the users array has more elements than allowed
	CodeInvalidChecks          Code = "invalid_checks"            // the checks value is not a JSON array of valid checks (a group id and a uid each)
	CodeTooManyChecks          Code = "too_many_checks"           // the checks array has more elements than allowed
	CodeInvalidChanges         Code = "invalid_changes"           // a batch's changes value is not a JSON array of valid changes
	CodeTooManyChanges         Code = "too_many_changes"          // a batch has more changes than allowed
	CodeBodyTooLarge           Code = "body_too_large"            // the request body is larger than allowed
	CodeNotMember              Code = "not_member"                // the user is not a member of the group
	CodeChangesGone            Code = "changes_gone"              // the change feed no longer has the changes asked for: list again
	CodePreconditionFailed     Code = "precondition_failed"       // the group is not in the state a conditional write requires
	CodeInvalidIdempotencyKey  Code = "invalid_idempotency_key"   // the Idempotency-Key header is not 1 to 255 printable ASCII characters
	CodeIdempotencyKeyReused   Code = "idempotency_key_reused"    // the Idempotency-Key was used before for another request
	CodeIdempotencyKeyInFlight Code = "idempotency_key_in_flight" // a request with the same Idempotency-Key is still being applied
	CodeMissingGroups          Code = "missing_groups"            // a nesting write has no groups parameter
	CodeInvalidGroups          Code = "invalid_groups"            // the groups value is not a JSON array of valid group elements
	CodeTooManyGroups          Code = "too_many_groups"           // the groups array has more elements than allowed
	CodeCycle                  Code = "cycle"                     // the nesting would make a group contain itself
	CodeTooDeep                Code = "too_deep"                  // the nesting would make a chain deeper than the service's bound
	CodeTooManyAncestors       Code = "too_many_ancestors"        // the nesting would put a group below more groups than the service's bound
	CodeInvalidAttributes      Code = "invalid_attributes"        // an account's or a group's attributes are not valid
	CodeUserNameTaken          Code = "user_name_taken"           // another account has the user name (compared case-insensitively)
	CodeInactiveUser           Code = "inactive_user"             // the user's account is inactive: it cannot be added to a group
	CodeUnknownUser            Code = "unknown_user"              // the user has no account
	CodeUnknownGroup           Code = "unknown_group"             // the group does not exist: no members, subgroups or attributes
	CodeUnavailable            Code = "unavailable"               // the store cannot take changes now (its disk failed); nothing was changed
	CodeForbidden              Code = "forbidden"                 // the request's principal lacks a right it needs on a group (see Scope)
	CodeInternal               Code = "internal"                  // a fault of the service, not of the request
)

// Error is an error the service reports to its clients: a code to branch on
// and a message for people.
type Error struct {
	Code    Code
	Message string
	// OldestRevision goes with CodeChangesGone: the oldest change the feed
	// still has (the next to come, when it has none).
	OldestRevision Revision
	// Revision goes with CodePreconditionFailed: the group's current
	// revision.
	Revision Revision
	// named goes with CodeCycle and CodeTooManyAncestors: what the message
	// names, for a principal's message to name only the groups it may read
	// (hideGroups).
	named *named
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err, or CodeInternal when err is not an *Error:
// an error nobody classified is the service's fault.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the message of err for clients. Errors that are not an
// *Error may carry internal detail, so clients get a generic message instead.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
