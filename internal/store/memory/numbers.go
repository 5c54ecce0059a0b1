package memory

import (
	"sync"

	"example.com/groupmembership/membership"
)

// groupNumbers interns group ids as numbers: the reverse index and the
// due set name a group by its number.
type groupNumbers struct {
	// mu guards the fields below.
	mu    sync.RWMutex
	names []string // number to group id; "" for a free number
	free  []uint32 // numbers of deleted groups, for reuse
	// unnested are the revisions of the changes that made each group, or
	// later left it in no nesting (its node gone) while it had members:
	// the revision of its ancestors and subgroups from then on, when it is
	// in none (0, or past its end: none since it was loaded).
	unnested []membership.Revision
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
		if int(n) < len(g.unnested) {
			g.unnested[n] = 0
		}
	} else {
		n = uint32(len(g.names))
		g.names = append(g.names, groupID)
	}
	return n
}

// setUnnested notes that the change rev left the group numbered n in no
// nesting. The caller holds the group's shard.
func (g *groupNumbers) setUnnested(n uint32, rev membership.Revision) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if int(n) >= len(g.unnested) {
		g.unnested = append(g.unnested, make([]membership.Revision, int(n)+1-len(g.unnested))...)
	}
	g.unnested[n] = rev
}

// unnestedOf returns the revision of the change that left the group
// numbered n in no nesting (0: none). The caller holds mu.
func (g *groupNumbers) unnestedOf(n uint32) membership.Revision {
	if int(n) < len(g.unnested) {
		return g.unnested[n]
	}
	return 0
}

// release frees n, the number of a group that has no members left: no
// pair refers to it any more.
func (g *groupNumbers) release(n uint32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.names[n] = ""
	g.free = append(g.free, n)
}
