package memory

import (
	"sync"
)

// groupNumbers interns group ids as numbers: the reverse index and the
// due set name a group by its number.
type groupNumbers struct {
	// mu guards the fields below.
	mu    sync.RWMutex
	names []string // number to group id; "" for a free number
	free  []uint32 // numbers of deleted groups, for reuse
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
	return n
}

// release frees n, the number of a group that has no members left: no
// pair refers to it any more.
func (g *groupNumbers) release(n uint32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.names[n] = ""
	g.free = append(g.free, n)
}
