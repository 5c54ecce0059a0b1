// Package directory is what an identity provider keeps beside the
// memberships (SCIM's users and groups): the accounts of users and the
// attributes of groups (package membership/account), as a store reads
// them (Reader), and Service, which validates those reads and holds them to
// the request's scope.
//
// A user with an account is provisioned: it exists whether or not it is in
// a group, and keeps its nickname (the account's DisplayName) while in
// none. A group with attributes exists with no members or subgroups. Both
// change through membership.Store.Write, as every other change does, by
// the ops membership.OpSetUser, OpDeleteUser and OpSetGroup: one revision
// each, in the feed, in the log. A write of OpSetUser or OpDeleteUser takes
// its precondition of the user, not of a group: Revisions hold the user's
// Revision, Exists requires an account, and Empty requires the uid to be
// free (no account, in no group).
//
// An inactive account (Active false) is in no group: the set_user that
// deactivates a user removes it from every group in the same change, and
// an add or a replace that names an inactive user is refused whole
// (membership.CodeInactiveUser), on every route.
package directory

import (
	"context"
	"iter"
	"time"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
	"example.com/groupmembership/membership/scope"
)

// IsOp reports whether op is one of the directory's.
func IsOp(op membership.Op) bool {
	return op == membership.OpSetUser || op == membership.OpDeleteUser || op == membership.OpSetGroup
}

// UserRecord is a provisioned user as the directory reads it.
type UserRecord struct {
	UID     membership.UID
	Account account.Account
	// Created is when the account was set first, and Modified when it, or
	// the user's nickname, last changed: the times of those changes.
	Created, Modified time.Time
	// Revision is that of the last change of the account or the
	// nickname: the user's version.
	Revision membership.Revision
}

// GroupRecord is a group as the directory reads it.
type GroupRecord struct {
	ID string
	// Attributes are the group's; a group without them (HasAttributes
	// false) has its id for display name.
	Attributes    account.GroupAttributes
	HasAttributes bool
	// Created and Modified are when the attributes were set first and
	// last; zero without attributes.
	Created, Modified time.Time
	// Revision is the group's, as membership.Store.Revision gives it: it
	// moves with its members, its subgroups and its attributes.
	Revision  membership.Revision
	Members   int
	Subgroups int
}

// UserQuery selects accounts, in ascending uid order: those whose user name
// is UserName (compared case-insensitively), or whose external id is
// ExternalID (exactly), or all when both are empty; of those, Limit from
// the Offset-th (0 the first). The Service takes a Limit of 0 as
// membership.MaxPageSize: a page is bounded.
type UserQuery struct {
	UserName   string
	ExternalID string
	Offset     int
	Limit      int
}

// GroupQuery selects groups, in byte order of their ids: those whose
// display name is DisplayName, or whose external id is ExternalID (both
// exactly), or all when both are empty; of those, Limit from the
// Offset-th (0 the first), as UserQuery's.
type GroupQuery struct {
	DisplayName string
	ExternalID  string
	Offset      int
	Limit       int
}

// UsersFunc receives what Reader.Users selects: how many accounts the
// query matches in all, and those of the page. It runs under the rules of
// a membership.ListFunc.
type UsersFunc func(total int, users iter.Seq[UserRecord])

// GroupRecordsFunc receives what Reader.GroupRecords selects, as UsersFunc
// does.
type GroupRecordsFunc func(total int, groups iter.Seq[GroupRecord])

// Reader is the reads of the directory of a store (every store of this
// service keeps one); its writes go through membership.Store.Write.
type Reader interface {
	// User returns uid's account, false when it has none.
	User(ctx context.Context, uid membership.UID) (UserRecord, bool, error)
	// Users calls list with the accounts q selects.
	Users(ctx context.Context, q UserQuery, list UsersFunc) error
	// FreeUID returns one more than the largest uid in use, by an
	// account or a membership: a uid no user has. Two callers may get the
	// same: a write that creates an account with it requires it free
	// (Precondition.Empty).
	FreeUID(ctx context.Context) (membership.UID, error)
	// Group returns the group's record, false when it does not exist
	// (no members, subgroups or attributes). members, when not nil, is
	// called with its direct members while the store holds the group,
	// so that they are of the record's revision.
	Group(ctx context.Context, groupID string, members membership.ListFunc) (GroupRecord, bool, error)
	// GroupRecords calls list with the groups q selects.
	GroupRecords(ctx context.Context, q GroupQuery, list GroupRecordsFunc) error
}

// Service answers the reads of a store's directory, validated whole first
// and held to the scope of the request's context (scope.Of): an account is
// of no group, so reading one, or a list of groups, needs read on every
// group; a group's record, read on it. Writes go through
// membership.Service.Write, which holds a write of a user to write on
// every group, and of a group's attributes to write on the group.
type Service struct{ store Reader }

// NewService returns the Service of store.
func NewService(store Reader) *Service { return &Service{store: store} }

// needAll returns the CodeForbidden error of what needs right on every
// group when ctx's scope lacks it; why says why it does.
func needAll(ctx context.Context, right scope.Right, why string) error {
	if sc := scope.Of(ctx); !sc.AllowsAll(right) {
		e := membership.Forbidden(sc, right, "")
		e.Message += ": " + why
		return e
	}
	return nil
}

// User returns uid's account.
//
// Errors: CodeInvalidUID, CodeForbidden, CodeUnknownUser, and whatever the
// Reader returns.
func (s *Service) User(ctx context.Context, uid membership.UID) (UserRecord, error) {
	if !membership.ValidUID(uid) {
		return UserRecord{}, membership.Errorf(membership.CodeInvalidUID, "uid %d is not %s", uid, membership.UIDRange)
	}
	if err := needAll(ctx, scope.Read, "an account is of no group"); err != nil {
		return UserRecord{}, err
	}
	rec, ok, err := s.store.User(ctx, uid)
	if err != nil {
		return UserRecord{}, err
	}
	if !ok {
		return UserRecord{}, UnknownUser(uid)
	}
	return rec, nil
}

// UnknownUser returns the CodeUnknownUser error of uid.
func UnknownUser(uid membership.UID) *membership.Error {
	return membership.Errorf(membership.CodeUnknownUser, "user %d has no account", uid)
}

// UnknownGroup returns the CodeUnknownGroup error of groupID.
func UnknownGroup(groupID string) *membership.Error {
	return membership.Errorf(membership.CodeUnknownGroup, "group %q does not exist: it has no members, subgroups or attributes", groupID)
}

// Users calls list with the accounts q selects; see Reader.Users.
//
// Errors: CodeInvalidQuery, CodeForbidden, and whatever the Reader returns.
func (s *Service) Users(ctx context.Context, q UserQuery, list UsersFunc) error {
	if err := checkPage(q.Offset, q.Limit); err != nil {
		return err
	}
	if q.Limit == 0 {
		q.Limit = membership.MaxPageSize
	}
	if q.UserName != "" && q.ExternalID != "" {
		return membership.Errorf(membership.CodeInvalidQuery, "a query of users selects by userName or by externalId, not both")
	}
	if err := needAll(ctx, scope.Read, "accounts are of no group"); err != nil {
		return err
	}
	return s.store.Users(ctx, q, list)
}

// checkPage returns a CodeInvalidQuery error unless offset is not negative
// and limit is a page's (membership.CheckLimit).
func checkPage(offset, limit int) error {
	if offset < 0 {
		return membership.Errorf(membership.CodeInvalidQuery, "offset %d is negative", offset)
	}
	return membership.CheckLimit(limit, membership.MaxPageSize)
}

// FreeUID returns a uid no user has, for a new account; see
// Reader.FreeUID. It needs what writing an account needs.
//
// Errors: CodeForbidden, and whatever the Reader returns.
func (s *Service) FreeUID(ctx context.Context) (membership.UID, error) {
	if err := needAll(ctx, scope.Write, "an account is of no group, and a write of one may take its user out of every group"); err != nil {
		return 0, err
	}
	return s.store.FreeUID(ctx)
}

// Group returns the group's record, and calls members, when not nil, with
// its direct members; see Reader.Group.
//
// Errors: CodeInvalidGroupID, CodeForbidden, CodeUnknownGroup, and
// whatever the Reader returns.
func (s *Service) Group(ctx context.Context, groupID string, members membership.ListFunc) (GroupRecord, error) {
	if err := membership.ValidateGroupID(groupID); err != nil {
		return GroupRecord{}, err
	}
	if sc := scope.Of(ctx); !sc.Allows(scope.Read, groupID) {
		return GroupRecord{}, membership.Forbidden(sc, scope.Read, groupID)
	}
	rec, ok, err := s.store.Group(ctx, groupID, members)
	if err != nil {
		return GroupRecord{}, err
	}
	if !ok {
		return GroupRecord{}, UnknownGroup(groupID)
	}
	return rec, nil
}

// GroupRecords calls list with the groups q selects; see
// Reader.GroupRecords.
//
// Errors: CodeInvalidQuery, CodeForbidden, and whatever the Reader returns.
func (s *Service) GroupRecords(ctx context.Context, q GroupQuery, list GroupRecordsFunc) error {
	if err := checkPage(q.Offset, q.Limit); err != nil {
		return err
	}
	if q.Limit == 0 {
		q.Limit = membership.MaxPageSize
	}
	if q.DisplayName != "" && q.ExternalID != "" {
		return membership.Errorf(membership.CodeInvalidQuery, "a query of groups selects by displayName or by externalId, not both")
	}
	if err := needAll(ctx, scope.Read, "a list of groups by their attributes may name any group"); err != nil {
		return err
	}
	return s.store.GroupRecords(ctx, q, list)
}
