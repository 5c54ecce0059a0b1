package membership

import (
	"iter"
	"math"
	"slices"
	"time"

	"example.com/groupmembership/membership/account"
	"example.com/groupmembership/membership/groupids"
)

// The ops of the change feed beyond add and remove: each is one change
// with one revision, whatever its size.
const (
	// OpReplace makes the group exactly its change's UIDs, which list the
	// whole new membership (ascending). Nicknames are as on an add: those of
	// the users it brought in who have one, and those it changed.
	OpReplace Op = "replace"
	// OpDeleteGroup removes every member of the group; its change names no
	// uid.
	OpDeleteGroup Op = "delete_group"
	// OpRemoveUser removes the one user of its change's UIDs from every
	// group; its GroupID is "".
	OpRemoveUser Op = "remove_user"
	// The directory's ops: package membership/directory says what each does.
	OpSetUser    Op = "set_user"
	OpDeleteUser Op = "delete_user"
	OpSetGroup   Op = "set_group"
)

// A user that a change leaves in no group is forgotten, nickname included.
// An add or a remove lists the nicknames it clears so (""), a replace, a
// group deletion and a user removed everywhere do not (they may clear
// millions): a follower of the feed forgets, after each of those, every
// user it knows who is in none of its groups.

// Write is one change to one group (or, for OpRemoveUser, to one user
// everywhere), with what it requires of the group's state to be applied.
type Write struct {
	Op      Op
	GroupID string // "" for OpRemoveUser
	Users   []User // OpAdd, OpReplace
	UIDs    []UID  // OpRemove; OpRemoveUser: exactly one
	// Subgroups are the groups of a nesting write (OpAddGroups,
	// OpRemoveGroups, OpReplaceGroups, OpExpireGroups).
	Subgroups []Subgroup
	// Account and Group are what an OpSetUser and an OpSetGroup set.
	Account *account.Account
	Group   *account.GroupAttributes
	// MaxDepth bounds the chains of nestings a nesting write may make
	// (CodeTooDeep), and MaxAncestors the groups it may put a group below
	// (CodeTooManyAncestors); the Service sets them. 0: no bound, as when
	// a log of a version that had none is replayed.
	MaxDepth     int
	MaxAncestors int
	If           Precondition
	// Actor is the user on whose behalf the write is made (a request's
	// uid), 0 for none: the service's own changes name none. It plays no
	// part in the result; the change carries it.
	Actor UID
	// Principal is who makes the write, as the service authenticated it
	// (see ValidatePrincipal), "" for none. It plays no part in the
	// result; the change carries it, and a keyed write's key is its own
	// (see Idempotency).
	Principal string
	// Time is when the write was committed, as its change will carry it
	// (to the millisecond, in UTC). Zero means now: the store stamps it.
	// The stores that keep a log (durable, PostgreSQL) stamp it themselves
	// as they commit the write, whatever the caller gave, keep it in the
	// log, and apply the log to memory with it, so that a replay, or
	// another instance, gives the change the time it had. A batch of
	// writes in one revision will carry one Actor, one Principal and one
	// Time.
	Time time.Time
	// Idem, when its Key is set, makes the write one a retry cannot apply
	// twice; see Idempotency. A batch's writes carry none of their own.
	Idem Idempotency
	// AsOf goes with OpExpire: its UIDs whose expiry is at or before it
	// are removed. It is the expirer's clock when it found them due, kept
	// with the write, so that every replay and every instance decides
	// alike, whatever its own clock.
	AsOf time.Time
	// Conditions are the request's conditions as it sent them (its
	// If-Match and If-None-Match, or a batch change's if_match), "" for
	// none given so: the fingerprint of a keyed request takes them rather
	// than If, which depends on the store's epoch, so that a retry sent
	// after the epoch changed (a restore) is still the same request.
	Conditions string
}

// Precondition is what a conditional write requires of its group when it is
// applied (its user, for a user's: package membership/directory). The zero
// value requires nothing; each part set must hold.
type Precondition struct {
	// Revisions, when not empty, must hold the group's current revision
	// (Store.Revision): If-Match with entity tags.
	Revisions []Revision
	// Exists requires a member, a subgroup or attributes: If-Match: *.
	Exists bool
	// Empty requires the group to have none: If-None-Match: *.
	Empty bool
}

// MaxPreconditionRevisions is the most revisions a precondition may name:
// the entity tags one If-Match may carry. A client names the revision it
// read; a few more cover retries.
const MaxPreconditionRevisions = 64

// NeverHolds returns p as a precondition no group's state meets: of a
// write whose If-Match names only entity tags of no state of the store (of
// another epoch, or not of the form the service gives). It requires a
// revision no group reaches.
func NeverHolds(p Precondition) Precondition {
	p.Revisions = []Revision{math.MaxUint64}
	return p
}

// neverHolds reports whether p is one NeverHolds returned.
func (p Precondition) neverHolds() bool {
	return len(p.Revisions) == 1 && p.Revisions[0] == math.MaxUint64
}

// IsZero reports whether p requires nothing.
func (p Precondition) IsZero() bool { return len(p.Revisions) == 0 && !p.Exists && !p.Empty }

// Holds reports whether p holds for a group of size members and
// subgroups (its attributes counting as one) at revision.
func (p Precondition) Holds(size int, revision Revision) bool {
	switch {
	case p.Exists && size == 0, p.Empty && size > 0:
		return false
	case len(p.Revisions) > 0:
		return slices.Contains(p.Revisions, revision)
	}
	return true
}

// PreconditionFailed returns the CodePreconditionFailed error of a write
// whose precondition does not hold for its group at revision.
func PreconditionFailed(revision Revision) *Error {
	err := Errorf(CodePreconditionFailed, "the group is not in the state the request requires "+
		"(If-Match, If-None-Match): nothing was changed; read it again for its current ETag")
	err.Revision = revision
	return err
}

// GroupsOptions select a page of the groups that have members or
// subgroups, by group
// id in byte order: those with the prefix Prefix, after After ("" for the
// first), at most Limit of them (0: no limit).
type GroupsOptions struct {
	Prefix string
	After  string
	Limit  int
	// Within, when not nil, selects only the groups it holds, and the total
	// counts only those: the Service sets it to what the request's Scope
	// may read.
	Within *groupids.Set
}

// GroupSize is one group as Store.Groups lists it.
type GroupSize struct {
	ID      string
	Members int
	// Subgroups is how many groups are nested directly in it.
	Subgroups int
}

// GroupsFunc receives the groups from Store.Groups: how many groups have the
// prefix in all, and an iterator over those asked for, in byte order of
// their ids.
type GroupsFunc func(total int, groups iter.Seq[GroupSize])
