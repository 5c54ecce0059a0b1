package memory

import (
	"sync"

	"example.com/groupmembership/internal/store/memory/packed"
)

// The reverse index maps users to the groups they are in, for
// Store.UserGroups. Group ids are interned as numbers (groupNumbers), and
// every membership is one (user, group number) pair in the reverse shard of
// its uid, kept sorted in chunks: a user's pairs lie together, and adding or
// removing one never looks at a group id. The ids are looked up, and sorted,
// only when a user's groups are listed.
//
// A uid's shard is the uid modulo the number of shards, and its pairs hold
// the quotient (reverseKey): the uids of one shard are that many times
// closer together as quotients, so their distances take fewer bytes.

// reverseShard holds the pairs of the uids that hash to it.
type reverseShard struct {
	// mu guards pairs. It is taken while a group shard's lock is held, never
	// the other way round, and never together with groupNumbers.mu by a
	// writer.
	mu    sync.RWMutex
	pairs packed.Pairs
}

// groupNumbers interns group ids as numbers.
type groupNumbers struct {
	// mu guards the fields below.
	mu      sync.RWMutex
	names   []string          // number to group id; "" for a free number
	numbers map[string]uint32 // group id to number
	free    []uint32          // numbers of deleted groups, for reuse
}

// number gives groupID a number. The caller creates the group.
func (g *groupNumbers) number(groupID string) uint32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var n uint32
	if len(g.free) > 0 {
		n = g.free[len(g.free)-1]
		g.free = g.free[:len(g.free)-1]
		g.names[n] = groupID
	} else {
		n = uint32(len(g.names))
		g.names = append(g.names, groupID)
	}
	g.numbers[groupID] = n
	return n
}

// release frees the number of a group that has no members left: no pair
// refers to it any more.
func (g *groupNumbers) release(groupID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n, ok := g.numbers[groupID]; ok {
		delete(g.numbers, groupID)
		g.names[n] = ""
		g.free = append(g.free, n)
	}
}
