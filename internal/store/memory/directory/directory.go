// Package directory is the in-memory store's directory (package
// membership/directory): the accounts of users and the attributes of
// groups, their writes applied with every lock they need, and their
// reads; and the removal of a user from every group, which deleting or
// deactivating an account shares with remove_user. It reads and changes
// the store through Store, which takes the store's locks in its one order
// (package memory's doc), and the parts it is given.
//
// The accounts are kept in the nickname directory's tables (package
// nicknames, package accounts), under its lock, since an account's display
// name is its user's nickname; a group's attributes in its shard's table
// of groups (group.Tables.Attrs), under its shard's lock, and their index
// in the nickname directory's tables too.
package directory

import (
	"sync/atomic"

	"example.com/groupmembership/internal/store/memory/expiry"
	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/nicknames"
	"example.com/groupmembership/internal/store/memory/reverse"
	"example.com/groupmembership/membership"
	domain "example.com/groupmembership/membership/directory"
)

// Store is what the directory needs of the in-memory store, beside the
// parts Directory is given. Each method takes the locks it names in the
// store's order.
type Store interface {
	// LockAll locks every shard, in index order, and returns the func that
	// unlocks them.
	LockAll() func()
	// GroupsOf returns the groups uid is in. The caller holds every shard
	// and uid's reverse shard, and no later lock.
	GroupsOf(uid membership.UID) []*group.Group
	// LockGroup locks groupID's shard and returns its group (nil: none), a
	// func that creates it in the shard, empty, and the func that unlocks.
	LockGroup(groupID string) (g *group.Group, create func() *group.Group, unlock func())
	// RGroup holds groupID's shard for reading and returns its group (nil:
	// none), and the func that lets go.
	RGroup(groupID string) (*group.Group, func())
	// RLockAll holds every shard and the index of the groups for reading,
	// and returns the index and the func that lets go.
	RLockAll() (*group.Index, func())
	// RevisionOf returns the revision of g (nil: a group that does not
	// exist), as the store's Revision gives it; Check, the error of a
	// write whose precondition does not hold for g. The caller holds g's
	// shard.
	RevisionOf(g *group.Group) membership.Revision
	Check(g *group.Group, cond membership.Precondition) error
	// Drop deletes g, which the change rev left vacant: the caller holds
	// g's shard, and nothing after it.
	Drop(g *group.Group, rev membership.Revision)
	// Latest returns the latest revision given out.
	Latest() membership.Revision
}

// Directory is the directory of one in-memory store. It implements
// membership/directory's Reader.
type Directory struct {
	s Store
	// tables are the store's tables of groups, which keep the groups'
	// attributes.
	tables    *group.Tables
	reverse   *reverse.Index
	due       *expiry.Due
	nicknames *nicknames.Directory
	feed      *feed.Feed
	// members counts the store's memberships.
	members *atomic.Int64
}

var _ domain.Reader = (*Directory)(nil)

// New returns the directory of s, whose tables of groups, reverse index,
// due set, nickname directory, feed and count of memberships these are.
func New(s Store, tables *group.Tables, reverse *reverse.Index, due *expiry.Due, nicknames *nicknames.Directory, feed *feed.Feed, members *atomic.Int64) *Directory {
	return &Directory{s: s, tables: tables, reverse: reverse, due: due, nicknames: nicknames, feed: feed, members: members}
}

// RefuseInactive returns the CodeInactiveUser error of the first of users
// whose account is inactive: an add or a replace names none. The caller
// holds the shard of the group they are added to: an account is set
// inactive holding every shard.
func (d *Directory) RefuseInactive(users []membership.User) error {
	if d.nicknames.InactiveAccounts() == 0 || len(users) == 0 {
		return nil
	}
	d.nicknames.RLock()
	defer d.nicknames.RUnlock()
	accounts := d.nicknames.Accounts()
	for _, u := range users {
		if accounts.IsInactive(u.UID) {
			return membership.Errorf(membership.CodeInactiveUser,
				"user %d's account is inactive (active false), and an inactive user is in no group: nothing was changed; activate it first", u.UID)
		}
	}
	return nil
}

// one yields uid.
func one(uid membership.UID) func(yield func(membership.UID) bool) {
	return func(yield func(membership.UID) bool) { yield(uid) }
}
