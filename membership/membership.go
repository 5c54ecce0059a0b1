// Package membership is the domain of the group membership service: which users
// belong to which group. It holds the types and their validation, the Service
// that applies requests (the reads of groups in groups are package
// nestreads's), and the Store interface the Service keeps its state in. It
// knows nothing of HTTP or of any wire format (httpapi decodes those), and
// imports only its own parts (groupids, scope, account) of this module.
package membership

import (
	"context"
	"iter"
	"time"
	"unicode"
	"unicode/utf8"

	"example.com/groupmembership/membership/account"
	"example.com/groupmembership/membership/groupids"
)

// UID identifies a user. Valid uids run from 1 to math.MaxInt64 (UIDRange).
type UID int64

// maxUIDText is math.MaxInt64, the largest uid, in decimal.
const maxUIDText = "9223372036854775807"

// UIDRange says which uids are valid, for messages.
const UIDRange = "an integer from 1 to " + maxUIDText

// ValidUID reports whether uid is a valid uid: positive.
func ValidUID(uid UID) bool { return uid >= 1 }

// MaxGroupIDBytes is the longest group id accepted, in bytes.
const MaxGroupIDBytes = 256

// MaxNicknameBytes is the longest nickname accepted, in bytes of UTF-8.
const MaxNicknameBytes = 256

// User is one element of an add or remove request.
type User struct {
	UID      UID
	Nickname string
	// HasNickname says whether the request gave a nickname. A user added
	// without one keeps the nickname they already have.
	HasNickname bool
	// Expiry is the membership's end, when the request names one (see
	// OpExpire).
	Expiry Expiry
}

// Member is one member of a group as the list operation returns it. A user who
// was never given a nickname has the nickname "".
type Member struct {
	UID      UID
	Nickname string
	// Expires is when the membership ends (OpExpire); zero for a
	// permanent one.
	Expires time.Time
}

// Revision numbers the changes of a Store. Every call that alters the store
// takes the next revision of one store-wide sequence, 1, 2, 3, …; a call that
// alters nothing takes none. A group's revision is that of the last change
// that altered what ListMembers lists for it (see Store.Revision).
type Revision uint64

// Result is what a change reports: how many users it added or removed (or,
// for OpRemoveUser, how many groups it left), and the revision that
// reflects it: the change's own revision, or, when it altered nothing, the
// group's current revision (for OpRemoveUser, the store's latest).
type Result struct {
	// Count is the users added (OpAdd, OpReplace), removed (OpRemove,
	// OpDeleteGroup), or the groups left (OpRemoveUser, OpDeleteUser, OpSetUser).
	Count int
	// Removed is the users an OpReplace removed.
	Removed  int
	Revision Revision
	// Replayed says the write repeats one applied before with its
	// Idempotency-Key: this is that write's Result, and nothing was
	// applied.
	Replayed bool
}

// Op says what a Change did.
type Op string

// The ops of the change feed.
const (
	OpAdd    Op = "add"
	OpRemove Op = "remove"
)

// Change is one change of the store as the change feed reports it.
type Change struct {
	Revision Revision
	Op       Op
	// Time is when the change was committed, in UTC, to the millisecond:
	// the store's, the same on every replay and every instance. It is zero
	// only for a change a store logged before changes had times.
	Time time.Time
	// Actor is the user on whose behalf the change was made (the request's
	// uid), 0 when the request named none or the service made it itself.
	Actor UID
	// Principal is who made the change, as the service authenticated it
	// (Write.Principal), "" when the request presented no credential or
	// the service made it itself.
	Principal string
	GroupID   string
	// UIDs are the users whose membership of the group the change altered,
	// in ascending order. An add that only changed nicknames has none.
	UIDs []UID
	// Nicknames are, in ascending uid order ("" clears one): on an add, the
	// nickname of each user it brought into the group who has one, and each
	// nickname it changed, so that a follower knows the nickname of every
	// member it lists; on a remove, "" for each user it left in no group who
	// had a nickname (a user in no group is forgotten). Nicknames belong to
	// users, so each applies in every group the user is in.
	Nicknames []Member
	// Expiries are, on an add or a replace, the expiries it set or
	// changed, in ascending uid order, a zero At for a membership it made
	// permanent; a new member without one has none. A remove, a group
	// deletion, a user removed everywhere and an expiry end the expiries
	// of the memberships they end.
	Expiries []MemberExpiry
	// Groups are, for a nesting change (OpAddGroups, OpRemoveGroups,
	// OpReplaceGroups, OpExpireGroups), the subgroups of GroupID it
	// altered, in byte order of ids: on an add, each it added or whose
	// expiry it changed, with its expiry now (zero: none); on a replace,
	// the whole new set with their expiries; on a remove or an expiry,
	// those it removed.
	Groups []Nested
	// Account and GroupAttributes are what an OpSetUser (DisplayName the
	// user's nickname) or an OpSetGroup set.
	Account         *account.Account
	GroupAttributes *account.GroupAttributes
	// Changes are, for an OpBatch, the changes of its writes, in order:
	// each as the write would report it alone, but for a remove, which
	// lists no nickname it cleared (a follower forgets, after a batch, every
	// user in none of its groups).
	Changes []Change
}

// DefaultChangesKeep is how many of the latest changes a store keeps for the
// change feed unless told otherwise.
const DefaultChangesKeep = 100000

// ChangeOptions select changes from the feed: those after After, at most
// Limit of them (0: no limit). With Wait, when none follow After yet,
// Store.Changes waits for one until its context is done.
type ChangeOptions struct {
	After Revision
	Limit int
	Wait  bool
}

// ListFunc receives a group's members from Store.ListMembers: how many the
// group has in all, and an iterator over those asked for, in ascending uid
// order.
type ListFunc func(total int, members iter.Seq[Member])

// MaxPageSize is the largest page a client may ask for. ListMembers and
// UserGroups take one more: a caller asks for one more than its page to know
// whether another follows.
const MaxPageSize = 10000

// ListOptions select a page of a group's members by uid (keyset paging): the
// members with uids above After, at most Limit of them. The zero value
// selects the whole group.
type ListOptions struct {
	After UID // 0: from the first member
	Limit int // 0: no limit
}

// Validate returns the CodeInvalidQuery error of a page o cannot select.
func (o ListOptions) Validate() error {
	if err := CheckLimit(o.Limit, MaxPageSize+1); err != nil {
		return err
	}
	if o.After < 0 {
		return Errorf(CodeInvalidQuery, "after %d is not a uid (%s)", o.After, UIDRange)
	}
	return nil
}

// GroupListOptions select a page of a user's groups by group id: the groups
// after After in byte order ("" for the first), at most Limit of them (0: no
// limit).
type GroupListOptions struct {
	After string
	Limit int
	// Within, when not nil, selects only the groups it holds, and the total
	// counts only those, as GroupsOptions.Within does.
	Within *groupids.Set
}

// Validate returns the CodeInvalidQuery error of a page o cannot select.
func (o GroupListOptions) Validate() error {
	if err := CheckLimit(o.Limit, MaxPageSize+1); err != nil {
		return err
	}
	if o.After != "" {
		if err := ValidateGroupID(o.After); err != nil {
			return Errorf(CodeInvalidQuery, "after is not a group id: %v", err)
		}
	}
	return nil
}

// GroupListFunc receives a user's groups from Store.UserGroups: how many the
// user is in, and an iterator over the ids of those asked for, in byte order.
type GroupListFunc func(total int, groupIDs iter.Seq[string])

// Store keeps groups, their members and the users' nicknames. Implementations
// must be safe for concurrent use, and must apply each call atomically: a call
// either changes all it is asked to or, when it returns an error, nothing.
//
// Callers pass only validated group ids and users. Errors other than *Error
// are reported to clients as CodeInternal.
type Store interface {
	// Nesting is groups in groups: the transitive reads, and what the
	// nesting ops of Write and Batch must keep.
	Nesting

	// Write applies w: any op, with its precondition checked against the
	// group in the same step that applies it, so that two writes racing
	// with the same If-Match cannot both succeed. A precondition that does
	// not hold is a CodePreconditionFailed error (PreconditionFailed) and
	// changes nothing.
	//
	// OpAdd creates the group if needed and records the nicknames given
	// (the last one wins when a user appears twice); its Result counts the
	// users who were not members before. OpRemove's Result counts those
	// that were members. Nicknames belong to the user, not the group: they
	// are kept while the user is in another group; a user left in no group
	// is forgotten, nickname included (the change lists the nicknames it
	// cleared), and an add without a nickname then gives none. OpReplace's
	// Result counts the users it added and those it Removed; OpDeleteGroup's
	// the members it removed, whatever the group's size, in memory bounded
	// by the store's budgets, not by the group; OpRemoveUser's the groups
	// the user left, nickname forgotten. The change carries w's Actor,
	// its Principal and the time it was committed (see Write.Time). A
	// keyed w comes validated, with its fingerprint
	// (Idempotency.Fingerprint), and its key is w.Principal's own.
	Write(ctx context.Context, w Write) (Result, error)

	// Batch applies b's writes, all or nothing, as one change with one
	// revision; see Batch. Its BatchResult gives each write's Result.
	Batch(ctx context.Context, b Batch) (BatchResult, error)

	// Groups calls list once with the groups that have members, as opts
	// selects, and returns the revision of the state it listed. A page
	// costs O(log n + page) for n groups; the total too. list runs under
	// the same rules as for ListMembers.
	Groups(ctx context.Context, opts GroupsOptions, list GroupsFunc) (Revision, error)

	// ListMembers calls list once with the group's size and the members opts
	// selects, and returns the revision of the state it listed. Finding the
	// page costs O(log n), however deep it is. An unknown group has no
	// members: list gets 0 and an empty iterator, and that is not an error.
	// list runs while the store holds the group still, so it must not block or
	// call the store, and the iterator is valid only until list returns.
	ListMembers(ctx context.Context, groupID string, opts ListOptions, list ListFunc) (Revision, error)

	// Member returns the member uid of the group, and false when uid is not a
	// member.
	Member(ctx context.Context, groupID string, uid UID) (Member, bool, error)

	// CheckMembers answers every check, in order, at one revision, which it
	// returns: found[i] says whether checks[i].UID is a member of
	// checks[i].GroupID in the state at that revision, the state after every
	// change up to it and none after. An unknown group has no members.
	// It costs O(log n) per check for groups of n members.
	CheckMembers(ctx context.Context, checks []Check) (found []bool, rev Revision, err error)

	// UserGroups calls list once with the groups uid is in, as opts selects.
	// The index it reads changes with the groups' members, atomically: it
	// never disagrees with ListMembers. list runs under the same rules as for
	// ListMembers.
	UserGroups(ctx context.Context, uid UID, opts GroupListOptions, list GroupListFunc) error

	// Epoch names the history the store's revisions count in: one epoch
	// and one revision are one state, for as long as the service runs and
	// across restarts. It changes whenever revisions could be given out
	// again for other states: each new in-memory store draws one at random,
	// and a data directory keeps its own, drawing a new one when a repair
	// drops changes. It never changes while the store is open.
	Epoch() uint64

	// Revision returns the group's current revision, without listing it. It
	// changes whenever what ListMembers lists for the group changes, and may
	// change more often (a store may count a nickname change as a change of
	// every group).
	Revision(ctx context.Context, groupID string) (Revision, error)

	// Changes returns the changes opts selects, in revision order, and the
	// store's latest revision. Every change that altered the store is listed
	// once, under its revision, and no change is listed before every change
	// with a lower revision is. The store keeps only its latest changes:
	// asking for older ones, or for revisions it never gave out, is a
	// CodeChangesGone error whose OldestRevision is the oldest kept.
	Changes(ctx context.Context, opts ChangeOptions) ([]Change, Revision, error)
}

// ValidateGroupID returns a CodeInvalidGroupID error unless id is 1 to
// MaxGroupIDBytes bytes of valid UTF-8 without control characters.
func ValidateGroupID(id string) error {
	switch {
	case id == "":
		return Errorf(CodeInvalidGroupID, "group id is empty")
	case len(id) > MaxGroupIDBytes:
		return Errorf(CodeInvalidGroupID, "group id is %d bytes, longer than %d", len(id), MaxGroupIDBytes)
	case !utf8.ValidString(id):
		return Errorf(CodeInvalidGroupID, "group id is not valid UTF-8")
	}
	for i, r := range id {
		if unicode.IsControl(r) {
			return Errorf(CodeInvalidGroupID, "group id has control character %U at byte %d", r, i)
		}
	}
	return nil
}

// ValidateUser returns a CodeInvalidUsers error unless u has a valid uid and,
// when it gives one, a valid nickname: at most MaxNicknameBytes bytes of
// valid UTF-8.
func ValidateUser(u User) error {
	switch {
	case !ValidUID(u.UID):
		return Errorf(CodeInvalidUsers, "uid %d is not %s", u.UID, UIDRange)
	case len(u.Nickname) > MaxNicknameBytes:
		return Errorf(CodeInvalidUsers, "the nickname is %d bytes, longer than %d", len(u.Nickname), MaxNicknameBytes)
	case !utf8.ValidString(u.Nickname):
		return Errorf(CodeInvalidUsers, "the nickname is not valid UTF-8")
	}
	return nil
}
