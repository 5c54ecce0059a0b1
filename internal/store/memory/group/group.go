// Package group holds a group of the in-memory store (Group: its members,
// their expiries, its revision and its number in the reverse index, and
// how its members change, in the reverse index and the due set too), the
// table of a shard's groups (Table: their slots, which number them, found
// by id), the lock of the slots' ids with the groups' unnested revisions
// (Numbers), and the index of the groups that have members, in order of
// their ids (Index), for pages of groups.
//
// None but Numbers has a lock: the store's locks guard them (see package
// memory).
package group

import (
	"slices"

	"example.com/groupmembership/internal/store/memory/expiry"
	"example.com/groupmembership/internal/store/memory/packed"
	"example.com/groupmembership/internal/store/memory/reverse"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
)

// Group is a group with members, subgroups or attributes, in a slot of
// its shard's Table: 64 bytes, its few members packed in it (package
// packed). Its attributes, which few groups have, are kept in its Table
// (Tables.Attrs), not in the slot.
type Group struct {
	// ID is the group's id, in memory of its own (Table.Add), never
	// empty: "" marks a free slot.
	ID       string
	Members  packed.Members
	Revision membership.Revision // of the last change of its members
	// Expiries holds the expiry of each member that has one.
	Expiries expiry.Members
	// subgroups is how many groups are nested in it directly (a group
	// with subgroups is kept with no members), below attributed, the bit
	// set while its Table keeps attributes of it.
	subgroups uint32
	Number    uint32 // in the reverse index and the due set (Table)
}

// attributed is the bit of Group.subgroups set while the group has
// attributes: a store holds fewer than 2^31 groups, so no group has that
// many subgroups.
const attributed = 1 << 31

// Subgroups returns how many groups are nested in g directly.
func (g *Group) Subgroups() int { return int(g.subgroups &^ attributed) }

// SetSubgroups sets how many groups are nested in g directly: fewer than
// 2^31, as a store holds fewer groups.
func (g *Group) SetSubgroups(n int) { g.subgroups = g.subgroups&attributed | uint32(n) }

// HasAttrs reports whether g has attributes (Tables.Attrs): a group with
// attributes is kept with no members or subgroups.
func (g *Group) HasAttrs() bool { return g.subgroups&attributed != 0 }

// Attrs are a group's attributes (membership.OpSetGroup), with when they
// were set first and last, in Unix milliseconds (0: a change without a
// time). They are replaced whole, never changed in place, so that a reader
// may keep them past the group's lock.
type Attrs struct {
	account.GroupAttributes
	Created, Modified int64
}

// Vacant reports whether g has neither members, subgroups nor attributes:
// it is dropped then.
func (g *Group) Vacant() bool { return g.Members.Len() == 0 && g.subgroups == 0 }

// Size is what a precondition counts of g (membership.Precondition.Holds):
// its members and subgroups, and its attributes as one.
func (g *Group) Size() int {
	n := g.Members.Len() + g.Subgroups()
	if g.HasAttrs() {
		n++
	}
	return n
}

// BulkFill is how many users an add to an empty group must bring for the
// group to be built in one pass instead of one insert at a time.
const BulkFill = 64

// Insert adds users to g and to the reverse index x, and returns the uids
// it added, ascending: in one pass when g is empty and they are many, one
// at a time otherwise. The caller holds g's shard and the users' reverse
// shards.
func (g *Group) Insert(x *reverse.Index, users []membership.User) []membership.UID {
	if g.Members.Len() == 0 && len(users) >= BulkFill {
		uids := make([]membership.UID, len(users))
		for i, u := range users {
			uids[i] = u.UID
		}
		slices.Sort(uids)
		uids = slices.Compact(uids)
		g.Members.Fill(uids)
		x.AddAll(uids, g.Number)
		return uids
	}
	added := make([]membership.UID, 0, len(users))
	for _, u := range users {
		if g.Members.Add(u.UID) {
			added = append(added, u.UID)
		}
	}
	x.AddAll(added, g.Number)
	slices.Sort(added)
	return added
}

// SetMembers makes g's members exactly uids (sorted, distinct), in the
// reverse index x and the due set too, and calls leftInNoGroup with each
// user it leaves in no group. The caller holds g's shard and the reverse
// shards of the uids that change.
func (g *Group) SetMembers(x *reverse.Index, due *expiry.Due, uids []membership.UID, leftInNoGroup func(membership.UID)) {
	packed.EachDifferent(&g.Members, uids, func(uid membership.UID, in bool) bool {
		if in {
			x.Add(uid, g.Number)
			return true
		}
		due.End(&g.Expiries, g.Number, uid)
		if x.Remove(uid, g.Number) {
			leftInNoGroup(uid)
		}
		return true
	})
	var next packed.Members
	next.Fill(uids)
	g.Members = next
}

// Empty removes every member of g, from the reverse index x and the due
// set too, and returns how many; it calls leftInNoGroup with each user it
// leaves in no group. The caller holds g's shard and the reverse shards of
// its members.
func (g *Group) Empty(x *reverse.Index, due *expiry.Due, leftInNoGroup func(membership.UID)) int {
	for uid := range g.Members.All {
		if x.Remove(uid, g.Number) {
			leftInNoGroup(uid)
		}
	}
	removed := g.Members.Len()
	g.Members = packed.Members{}
	due.EndAll(&g.Expiries, g.Number)
	return removed
}

// SortedUIDs returns the uids of users, ascending, each once.
func SortedUIDs(users []membership.User) []membership.UID {
	uids := make([]membership.UID, len(users))
	for i, u := range users {
		uids[i] = u.UID
	}
	slices.Sort(uids)
	return slices.Compact(uids)
}

// Tight returns uids in an array of its length, copying it when it has more
// room than that: the feed keeps it, and a change that altered one uid of ten
// thousand given must not hold the room of ten thousand.
func Tight(uids []membership.UID) []membership.UID {
	if cap(uids) == len(uids) {
		return uids
	}
	return append(make([]membership.UID, 0, len(uids)), uids...)
}
