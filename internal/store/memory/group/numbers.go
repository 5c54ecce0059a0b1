package group

import (
	"sync"

	"example.com/groupmembership/membership"
)

// Numbers guards the ids of the groups' slots (Table): a group's number
// is its slot's, and the reverse index and the due set name a group by
// its number, so that the readers of a number's id (a user's groups, the
// expirer) read it under the lock, while a group is given a slot, or its
// slot freed, under the lock and its shard's. Package memory's doc gives
// the lock's place in the store's order.
type Numbers struct {
	// RWMutex guards the ids of the slots and unnested.
	sync.RWMutex
	// unnested are, by group number, the revisions of the changes that
	// made each group, or later left it in no nesting (its node gone)
	// while it had members: the revision of its ancestors and subgroups
	// from then on, when it is in none (0, or past its end: none since it
	// was loaded). A slot given to a group (Given) resets its number's.
	unnested []membership.Revision
}

// Given notes that the group numbered n was just made, in a slot that may
// have held another group. The caller holds the lock.
func (g *Numbers) Given(n uint32) {
	if int(n) < len(g.unnested) {
		g.unnested[n] = 0
	}
}

// SetUnnested notes that the change rev left the group numbered n in no
// nesting. The caller holds the group's shard.
func (g *Numbers) SetUnnested(n uint32, rev membership.Revision) {
	g.Lock()
	defer g.Unlock()
	if int(n) >= len(g.unnested) {
		g.unnested = append(g.unnested, make([]membership.Revision, int(n)+1-len(g.unnested))...)
	}
	g.unnested[n] = rev
}

// UnnestedOf returns the revision of the change that left the group
// numbered n in no nesting (0: none). The caller holds the lock.
func (g *Numbers) UnnestedOf(n uint32) membership.Revision {
	if int(n) < len(g.unnested) {
		return g.unnested[n]
	}
	return 0
}
