package membership

import (
	"example.com/groupmembership/membership/groupids"
	"example.com/groupmembership/membership/scope"
)

// Who may do what: a request's context may carry the scope of the
// principal it acts for (package scope), which the Service holds it to
// (authorize.go). Here, what the domain adds: the checks of a set of
// groups, and the error of a right lacking.

// NewGroupSet returns the set of the ids exact and of every id that starts
// with one of prefixes ("" starts every id).
//
// Errors: CodeInvalidGroupID, naming the id or the prefix (with its *)
// that cannot start a group id.
func NewGroupSet(exact, prefixes []string) (groupids.Set, error) {
	for _, id := range exact {
		if err := ValidateGroupID(id); err != nil {
			return groupids.Set{}, Errorf(CodeInvalidGroupID, "group %q: %s", id, ErrorMessage(err))
		}
	}
	for _, p := range prefixes {
		if err := ValidateGroupID(p); p != "" && err != nil {
			return groupids.Set{}, Errorf(CodeInvalidGroupID, "group prefix %q: %s", p+"*", ErrorMessage(err))
		}
	}
	return groupids.New(exact, prefixes), nil
}

// Forbidden returns the CodeForbidden error of s lacking right on groupID
// ("" for every group); admin is of no group.
func Forbidden(s *scope.Scope, right scope.Right, groupID string) *Error {
	if right == scope.Admin {
		return Errorf(CodeForbidden, "principal %q lacks %s", s.Principal(), right)
	}
	if groupID == "" {
		return Errorf(CodeForbidden, "principal %q lacks %s on every group (*)", s.Principal(), right)
	}
	return Errorf(CodeForbidden, "principal %q lacks %s on group %q", s.Principal(), right, groupID)
}
