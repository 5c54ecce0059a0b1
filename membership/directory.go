package membership

import (
	"context"
	"iter"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The directory: what an identity provider keeps of users and groups
// (SCIM's attributes), beside the memberships. A user with an Account is
// provisioned: it exists whether or not it is in a group, and keeps its
// nickname (the account's DisplayName) while in none. A group with
// GroupAttributes exists with no members or subgroups. Both change through
// Store.Write, as every other change does: one revision each, in the feed,
// in the log.
//
// An inactive account (Active false) is in no group: the set_user that
// deactivates a user removes it from every group in the same change, and
// an add or a replace that names an inactive user is refused whole
// (CodeInactiveUser), on every route.

// The ops of the directory.
const (
	// OpSetUser sets the account of its one uid (UIDs[0]) to its Account,
	// whole, creating it when the user has none, and the user's nickname
	// to the account's DisplayName. An account set inactive removes the
	// user from every group, as OpRemoveUser does, in the same change; its
	// Result counts the groups the user left. Its change lists the uid and
	// the Account as set.
	OpSetUser Op = "set_user"
	// OpDeleteUser removes the account of its one uid and the user from
	// every group, nickname forgotten; its Result counts the groups left.
	// Its change lists the uid.
	OpDeleteUser Op = "delete_user"
	// OpSetGroup sets the attributes of its group to its Group, whole,
	// creating the group when it does not exist: it exists from then on,
	// with or without members, until OpDeleteGroup. Its change lists the
	// group and the attributes as set.
	OpSetGroup Op = "set_group"
)

// IsDirectoryOp reports whether op is one of the directory's.
func IsDirectoryOp(op Op) bool {
	return op == OpSetUser || op == OpDeleteUser || op == OpSetGroup
}

// MaxAttributeBytes is the longest attribute of an account or a group
// (user name, external id, names, email, a group's display name), in
// bytes of UTF-8. An account's display name is its nickname, bounded by
// MaxNicknameBytes.
const MaxAttributeBytes = 256

// Account is what an identity provider keeps of a user. A user is in the
// directory (provisioned) while it has one.
type Account struct {
	// UserName is unique among accounts, compared case-insensitively
	// (FoldUserName); never empty.
	UserName   string
	ExternalID string
	// DisplayName is the user's nickname, everywhere else: setting one
	// sets the other.
	DisplayName string
	GivenName   string
	FamilyName  string
	// Email is the primary work address.
	Email string
	// Active false deactivates the user: see the directory's rules above.
	Active bool
}

// GroupAttributes are what an identity provider keeps of a group besides
// its members.
type GroupAttributes struct {
	// DisplayName is the group's name; never empty. A group without
	// attributes has its id for one. It need not be unique, and renaming
	// changes neither the group's id nor its members.
	DisplayName string
	ExternalID  string
}

// UserRecord is a provisioned user as the directory reads it.
type UserRecord struct {
	UID     UID
	Account Account
	// Created is when the account was set first, and Modified when it, or
	// the user's nickname, last changed: the times of those changes.
	Created, Modified time.Time
	// Revision is that of the last change of the account or the
	// nickname: the user's version.
	Revision Revision
}

// GroupRecord is a group as the directory reads it.
type GroupRecord struct {
	ID string
	// Attributes are the group's; a group without them (HasAttributes
	// false) has its id for display name.
	Attributes    GroupAttributes
	HasAttributes bool
	// Created and Modified are when the attributes were set first and
	// last; zero without attributes.
	Created, Modified time.Time
	// Revision is the group's, as Store.Revision gives it: it moves with
	// its members, its subgroups and its attributes.
	Revision  Revision
	Members   int
	Subgroups int
}

// UserQuery selects accounts, in ascending uid order: those whose user name
// is UserName (compared case-insensitively), or whose external id is
// ExternalID (exactly), or all when both are empty; of those, Limit from
// the Offset-th (0 the first). The Service takes a Limit of 0 as
// MaxPageSize: a page is bounded.
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

// UsersFunc receives what Directory.Users selects: how many accounts the
// query matches in all, and those of the page. It runs under the rules of
// a ListFunc.
type UsersFunc func(total int, users iter.Seq[UserRecord])

// GroupRecordsFunc receives what Directory.GroupRecords selects, as
// UsersFunc does.
type GroupRecordsFunc func(total int, groups iter.Seq[GroupRecord])

// Directory is the part of Store about the directory: its reads; its
// writes (OpSetUser, OpDeleteUser, OpSetGroup) go through Store.Write. A Write of
// a directory op on a user takes its precondition of the user, not of a
// group: Revisions hold the user's Revision, Exists requires an account,
// and Empty requires the uid to be free (no account, in no group).
type Directory interface {
	// User returns uid's account, false when it has none.
	User(ctx context.Context, uid UID) (UserRecord, bool, error)
	// Users calls list with the accounts q selects.
	Users(ctx context.Context, q UserQuery, list UsersFunc) error
	// FreeUID returns one more than the largest uid in use, by an
	// account or a membership: a uid no user has. Two callers may get the
	// same: a write that creates an account with it requires it free
	// (Precondition.Empty).
	FreeUID(ctx context.Context) (UID, error)
	// Group returns the group's record, false when it does not exist
	// (no members, subgroups or attributes). members, when not nil, is
	// called with its direct members while the store holds the group,
	// so that they are of the record's revision.
	Group(ctx context.Context, groupID string, members ListFunc) (GroupRecord, bool, error)
	// GroupRecords calls list with the groups q selects.
	GroupRecords(ctx context.Context, q GroupQuery, list GroupRecordsFunc) error
}

// FoldUserName returns name as user names are compared: two names are the
// same when their folds are equal. Each letter is the smallest of the
// letters Unicode's simple case folding makes equal to it, so that
// FoldUserName(a) == FoldUserName(b) exactly when strings.EqualFold(a, b).
func FoldUserName(name string) string {
	var b strings.Builder
	for _, r := range name {
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

// foldRune returns the smallest rune of r's simple folding orbit.
func foldRune(r rune) rune {
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return least
}

// validateAttribute returns a CodeInvalidAttributes error unless s is at
// most MaxAttributeBytes bytes of valid UTF-8 without control characters,
// and, when required, not empty.
func validateAttribute(name, s string, required bool) error {
	switch {
	case s == "" && required:
		return Errorf(CodeInvalidAttributes, "%s is empty", name)
	case len(s) > MaxAttributeBytes:
		return Errorf(CodeInvalidAttributes, "%s is %d bytes, longer than %d", name, len(s), MaxAttributeBytes)
	case !utf8.ValidString(s):
		return Errorf(CodeInvalidAttributes, "%s is not valid UTF-8", name)
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return Errorf(CodeInvalidAttributes, "%s has control character %U at byte %d", name, r, i)
		}
	}
	return nil
}

// ValidateAccount returns a CodeInvalidAttributes error unless a's
// attributes are valid: a user name, and every attribute within its bound.
func ValidateAccount(a Account) error {
	for _, f := range []struct {
		name, value string
		required    bool
	}{
		{"userName", a.UserName, true},
		{"externalId", a.ExternalID, false},
		{"name.givenName", a.GivenName, false},
		{"name.familyName", a.FamilyName, false},
		{"emails value", a.Email, false},
	} {
		if err := validateAttribute(f.name, f.value, f.required); err != nil {
			return err
		}
	}
	if err := ValidateUser(User{UID: 1, Nickname: a.DisplayName}); err != nil {
		return Errorf(CodeInvalidAttributes, "displayName: %s", ErrorMessage(err))
	}
	return nil
}

// ValidateGroupAttributes returns a CodeInvalidAttributes error unless a's
// attributes are valid: a display name, and both within their bound.
func ValidateGroupAttributes(a GroupAttributes) error {
	if err := validateAttribute("displayName", a.DisplayName, true); err != nil {
		return err
	}
	return validateAttribute("externalId", a.ExternalID, false)
}

// validateDirectoryWrite checks a write of a directory op.
func validateDirectoryWrite(w Write) error {
	if len(w.Users) > 0 || len(w.Subgroups) > 0 {
		return Errorf(CodeInternal, "a %s write names users or groups", w.Op)
	}
	if w.Op == OpSetGroup {
		if err := ValidateGroupID(w.GroupID); err != nil {
			return err
		}
		if w.Group == nil || len(w.UIDs) > 0 {
			return Errorf(CodeInternal, "a set_group write without attributes, or with uids")
		}
		return ValidateGroupAttributes(*w.Group)
	}
	if w.GroupID != "" || len(w.UIDs) != 1 || !ValidUID(w.UIDs[0]) {
		return Errorf(CodeInvalidUID, "the user of a %s write is not one uid, %s", w.Op, UIDRange)
	}
	if w.Op == OpDeleteUser {
		if w.Account != nil {
			return Errorf(CodeInternal, "a delete_user write with an account")
		}
		return nil
	}
	if w.Account == nil {
		return Errorf(CodeInternal, "a set_user write without an account")
	}
	return ValidateAccount(*w.Account)
}

// User returns uid's account.
//
// Errors: CodeInvalidUID, CodeUnknownUser, and whatever the Store returns.
func (s *Service) User(ctx context.Context, uid UID) (UserRecord, error) {
	if !ValidUID(uid) {
		return UserRecord{}, Errorf(CodeInvalidUID, "uid %d is not %s", uid, UIDRange)
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
func UnknownUser(uid UID) *Error {
	return Errorf(CodeUnknownUser, "user %d has no account", uid)
}

// UnknownGroup returns the CodeUnknownGroup error of groupID.
func UnknownGroup(groupID string) *Error {
	return Errorf(CodeUnknownGroup, "group %q does not exist: it has no members, subgroups or attributes", groupID)
}

// Users calls list with the accounts q selects; see Directory.Users.
//
// Errors: CodeInvalidQuery, and whatever the Store returns.
func (s *Service) Users(ctx context.Context, q UserQuery, list UsersFunc) error {
	if err := checkPage(q.Offset, q.Limit); err != nil {
		return err
	}
	if q.Limit == 0 {
		q.Limit = MaxPageSize
	}
	if q.UserName != "" && q.ExternalID != "" {
		return Errorf(CodeInvalidQuery, "a query of users selects by userName or by externalId, not both")
	}
	return s.store.Users(ctx, q, list)
}

// checkPage returns a CodeInvalidQuery error unless offset is not negative
// and limit is a page's (CheckLimit).
func checkPage(offset, limit int) error {
	if offset < 0 {
		return Errorf(CodeInvalidQuery, "offset %d is negative", offset)
	}
	return CheckLimit(limit, MaxPageSize)
}

// FreeUID returns a uid no user has; see Directory.FreeUID.
//
// Errors: whatever the Store returns.
func (s *Service) FreeUID(ctx context.Context) (UID, error) {
	return s.store.FreeUID(ctx)
}

// Group returns the group's record, and calls members, when not nil, with
// its direct members; see Directory.Group.
//
// Errors: CodeInvalidGroupID, CodeUnknownGroup, and whatever the Store
// returns.
func (s *Service) Group(ctx context.Context, groupID string, members ListFunc) (GroupRecord, error) {
	if err := ValidateGroupID(groupID); err != nil {
		return GroupRecord{}, err
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
// Directory.GroupRecords.
//
// Errors: CodeInvalidQuery, and whatever the Store returns.
func (s *Service) GroupRecords(ctx context.Context, q GroupQuery, list GroupRecordsFunc) error {
	if err := checkPage(q.Offset, q.Limit); err != nil {
		return err
	}
	if q.Limit == 0 {
		q.Limit = MaxPageSize
	}
	if q.DisplayName != "" && q.ExternalID != "" {
		return Errorf(CodeInvalidQuery, "a query of groups selects by displayName or by externalId, not both")
	}
	return s.store.GroupRecords(ctx, q, list)
}
