// Package transitive answers the reads of groups in groups of the
// in-memory store (membership.Nesting): a group's subgroups and parents,
// and every answer through nesting, each at one revision. It keeps what
// those reads build for the next ones: the closures of groups below a
// group, their members merged, and their totals.
//
// It reads the store through Store, taking the store's locks through it
// in the store's one order (package memory's doc), and never changes
// anything the store keeps.
package transitive

import (
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/nesting"
	"example.com/groupmembership/internal/store/memory/nicknames"
	"example.com/groupmembership/internal/store/memory/shards"
	"example.com/groupmembership/membership"
)

// Store is what the reads need of the in-memory store: the nesting, the
// groups in their shards, the users' groups, the nicknames, and the
// revisions that stand for what a read cannot see.
type Store interface {
	// RLockNesting holds the nesting for reading, and returns its graph
	// and the revision of its latest change; RUnlockNesting lets go.
	RLockNesting() (*nesting.Graph, membership.Revision)
	RUnlockNesting()

	// Shards returns how many shards hold the groups, and ShardOf the
	// index of groupID's.
	Shards() int
	ShardOf(groupID string) int
	// RLockShards holds the shards of set for reading, in index order;
	// RUnlockShards lets go.
	RLockShards(set shards.Set)
	RUnlockShards(set shards.Set)
	// Group returns the group groupID of the shard i, nil when it has
	// neither members nor subgroups. The caller holds the shard.
	Group(i int, groupID string) *group.Group
	// RemovedRevision returns the revision of the latest deletion of a
	// group: the revision of every group absent.
	RemovedRevision() membership.Revision

	// GroupsOfUsers calls fn with the id of each group of each user
	// uidOf(0) to uidOf(n-1) is directly in (i the user's index),
	// holding those users' groups still, and returns the latest
	// revision, read while it holds them. The caller holds the nesting.
	GroupsOfUsers(n int, uidOf func(i int) membership.UID, fn func(i int, groupID string)) membership.Revision

	// Nicknames returns the nickname directory.
	Nicknames() *nicknames.Directory
}

// Reader answers the reads of groups in groups of one Store. It implements
// membership.Nesting.
type Reader struct {
	s Store
	// totals are the totals of transitive members counted last, and
	// closures the closures read last.
	totals   totalCache
	closures closureCache
	// merged are the members of the closures read last, merged.
	merged mergedCache
	// closureKept, when set, is called when a closure is kept
	// (closureCache), with the nesting held, for tests.
	closureKept func()
}

var _ membership.Nesting = (*Reader)(nil)

// New returns the Reader of s.
func New(s Store) *Reader {
	r := &Reader{s: s}
	r.merged.budget = defaultMergedBudget
	return r
}

// rlock holds the shards of c's groups for reading, in index order.
func (r *Reader) rlock(c *closure) { r.s.RLockShards(c.lock) }

// runlock lets go of what rlock holds.
func (r *Reader) runlock(c *closure) { r.s.RUnlockShards(c.lock) }
