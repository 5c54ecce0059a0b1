package membership

import "context"

// DefaultMaxUsers is the default limit on users in one request.
const DefaultMaxUsers = 10000

// Service applies add, remove and list requests to a Store. It validates each
// request whole before any of it reaches the Store, so a bad request changes
// nothing.
type Service struct {
	store    Store
	maxUsers int
}

// NewService returns a Service over store that accepts at most maxUsers users
// per request (DefaultMaxUsers when maxUsers <= 0).
func NewService(store Store, maxUsers int) *Service {
	if maxUsers <= 0 {
		maxUsers = DefaultMaxUsers
	}
	return &Service{store: store, maxUsers: maxUsers}
}

// AddMembers adds the users named by usersJSON (see ParseUsers) to the group
// and returns how many were not members before.
//
// Errors: CodeInvalidGroupID, CodeMissingUsers, CodeInvalidUsers,
// CodeTooManyUsers, and whatever the Store returns.
func (s *Service) AddMembers(ctx context.Context, groupID, usersJSON string) (int, error) {
	users, err := s.parse(groupID, usersJSON)
	if err != nil {
		return 0, err
	}
	return s.store.AddMembers(ctx, groupID, users)
}

// RemoveMembers removes the users named by usersJSON from the group and
// returns how many were members. Nicknames in usersJSON are validated and
// otherwise ignored.
//
// Errors: as AddMembers.
func (s *Service) RemoveMembers(ctx context.Context, groupID, usersJSON string) (int, error) {
	users, err := s.parse(groupID, usersJSON)
	if err != nil {
		return 0, err
	}
	uids := make([]UID, len(users))
	for i, u := range users {
		uids[i] = u.UID
	}
	return s.store.RemoveMembers(ctx, groupID, uids)
}

// ListMembers calls list with the members of the group in ascending uid order
// and returns the revision listed; see Store.ListMembers.
//
// Errors: CodeInvalidGroupID, and whatever the Store returns.
func (s *Service) ListMembers(ctx context.Context, groupID string, list ListFunc) (Revision, error) {
	if err := ValidateGroupID(groupID); err != nil {
		return 0, err
	}
	return s.store.ListMembers(ctx, groupID, list)
}

// Revision returns the group's current revision; see Store.Revision.
//
// Errors: CodeInvalidGroupID, and whatever the Store returns.
func (s *Service) Revision(ctx context.Context, groupID string) (Revision, error) {
	if err := ValidateGroupID(groupID); err != nil {
		return 0, err
	}
	return s.store.Revision(ctx, groupID)
}

func (s *Service) parse(groupID, usersJSON string) ([]User, error) {
	if err := ValidateGroupID(groupID); err != nil {
		return nil, err
	}
	if usersJSON == "" {
		return nil, Errorf(CodeMissingUsers, "the users parameter is missing or empty: send users=[uid, ...]")
	}
	return ParseUsers(usersJSON, s.maxUsers)
}
