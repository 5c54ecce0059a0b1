package membership

import (
	"context"

	"example.com/groupmembership/membership/scope"
)

// DefaultMaxChecks is the default limit on the checks of one CheckMembers.
const DefaultMaxChecks = 1000

// Check asks whether UID is a member of the group GroupID: one pair of
// CheckMembers.
type Check struct {
	GroupID string
	UID     UID
}

// MaxChecks returns the most checks one CheckMembers may ask.
func (s *Service) MaxChecks() int { return s.maxChecks }

// CheckMembers answers every check, in order, at one revision, which it
// returns: found[i] says whether checks[i].UID is a member of
// checks[i].GroupID in the state at that revision. See Store.CheckMembers.
//
// Errors: CodeTooManyChecks, CodeInvalidChecks naming the first check with a
// group id or uid that is not valid, and whatever the Store returns.
func (s *Service) CheckMembers(ctx context.Context, checks []Check) (found []bool, rev Revision, err error) {
	if err := s.ValidateChecks(checks); err != nil {
		return nil, 0, err
	}
	if err := authorizeChecks(scope.Of(ctx), checks); err != nil {
		return nil, 0, err
	}
	return s.store.CheckMembers(ctx, checks)
}

// ValidateChecks returns the error CheckMembers returns for checks before
// it reads them: CodeTooManyChecks, or CodeInvalidChecks naming the first
// check with a group id or uid that is not valid.
func (s *Service) ValidateChecks(checks []Check) error {
	if len(checks) > s.maxChecks {
		return Errorf(CodeTooManyChecks, "checks has more than %d elements", s.maxChecks)
	}
	for i, c := range checks {
		if err := ValidateGroupID(c.GroupID); err != nil {
			return Errorf(CodeInvalidChecks, "checks element %d: %s", i, ErrorMessage(err))
		}
		if !ValidUID(c.UID) {
			return Errorf(CodeInvalidChecks, "checks element %d: uid %d is not %s", i, c.UID, UIDRange)
		}
	}
	return nil
}
