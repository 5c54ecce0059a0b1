package transitive

import (
	"math"
	"sync"

	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/nesting"
	"example.com/groupmembership/internal/store/memory/shards"
	"example.com/groupmembership/membership"
)

// closure is a group and every group below it, as the nesting was at
// rev: it changes only with the nesting, so it is kept (closureCache) and
// shared, never written once built.
type closure struct {
	rev membership.Revision
	// root is the group's node, nil when it is neither nested nor has
	// subgroups: then ids is the group alone.
	root  *nesting.Node
	nodes []*nesting.Node // while it is built
	// ids are the groups, the root first, their shards' indexes and the
	// end of each one's last path from the root (forever: none ends).
	ids    []string
	shards []int
	ends   []int64
	// lock is the set of shards, built once: a read of a closure of
	// thousands of groups locks its few shards without adding each.
	lock shards.Set
}

// closureOf returns groupID's closure in graph, whose latest change is of
// rev. The caller holds the nesting.
func (r *Reader) closureOf(graph *nesting.Graph, rev membership.Revision, groupID string) *closure {
	if c := r.closures.get(groupID, rev); c != nil {
		return c
	}
	c := &closure{rev: rev, root: graph.Node(groupID)}
	if c.root == nil {
		c.ids, c.ends = []string{groupID}, []int64{forever}
	} else {
		c.nodes = append([]*nesting.Node{c.root}, graph.Below(groupID)...)
		c.ids = make([]string, len(c.nodes))
		for i, n := range c.nodes {
			c.ids[i] = n.ID
		}
		c.ends = reach(c.nodes)
		c.nodes = nil // only reach needs them
	}
	c.shards = make([]int, len(c.ids))
	c.lock = shards.NewSet(r.s.Shards(), nil)
	for i, id := range c.ids {
		c.shards[i] = r.s.ShardOf(id)
		c.lock.Add(c.shards[i])
	}
	if c.root != nil {
		// Kept whole: the reads that find it share it, unlocked.
		r.closures.put(c.root.ID, c)
		if r.closureKept != nil {
			r.closureKept()
		}
	}
	return c
}

// closureCache keeps the closures read last, at most maxCachedClosureNodes
// groups in all (a few MiB).
type closureCache struct {
	// mu guards the fields below; it is taken with no lock after it.
	mu      sync.Mutex
	entries map[string]*closure
	nodes   int
}

const maxCachedClosureNodes = 1 << 18

func (cc *closureCache) get(groupID string, rev membership.Revision) *closure {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if c := cc.entries[groupID]; c != nil && c.rev == rev {
		return c
	}
	return nil
}

func (cc *closureCache) put(groupID string, c *closure) {
	if len(c.ids) > maxCachedClosureNodes/4 {
		return
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.entries == nil {
		cc.entries = map[string]*closure{}
	}
	if old := cc.entries[groupID]; old != nil {
		cc.nodes -= len(old.ids)
		delete(cc.entries, groupID)
	}
	for id, old := range cc.entries { // at random, until it fits
		if cc.nodes+len(c.ids) <= maxCachedClosureNodes {
			break
		}
		cc.nodes -= len(old.ids)
		delete(cc.entries, id)
	}
	cc.entries[groupID] = c
	cc.nodes += len(c.ids)
}

// forever is the end of a path that never ends.
const forever = math.MaxInt64

// reach returns, for each node of a closure (nodes, its root first), when
// its last path from the root ends: a path ends at the earliest end of
// its nestings (forever when none ends). Each node is reached after every
// parent in the closure (the graph has no cycle).
func reach(nodes []*nesting.Node) []int64 {
	index := make(map[*nesting.Node]int, len(nodes))
	for i, n := range nodes {
		index[n] = i
	}
	waiting := make([]int, len(nodes)) // parents in the closure not yet reached
	for _, n := range nodes {
		for _, e := range n.Children {
			waiting[index[e.Node]]++
		}
	}
	ends := make([]int64, len(nodes))
	ends[0] = forever
	ready := []int{0}
	for len(ready) > 0 {
		i := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		for _, e := range nodes[i].Children {
			j := index[e.Node]
			end := ends[i]
			if e.At != 0 {
				end = min(end, e.At)
			}
			ends[j] = max(ends[j], end)
			if waiting[j]--; waiting[j] == 0 {
				ready = append(ready, j)
			}
		}
	}
	return ends
}

// closureGroups returns the groups of c (nil: one with no members and no
// subgroups), in groups' room, the latest of their revisions as the
// store's Revision gives them, and the key of their members: a revision
// that moves whenever any of their members, or which they are, changes,
// and with nothing else (a nickname does not move it). The caller holds
// their shards.
func (r *Reader) closureGroups(c *closure, groups []*group.Group) ([]*group.Group, membership.Revision, membership.Revision) {
	groups = groups[:0]
	var key membership.Revision
	removed := r.s.RemovedRevision()
	for i, id := range c.ids {
		g := r.s.Group(c.shards[i], id)
		groups = append(groups, g)
		if g != nil {
			key = max(key, g.Revision)
		} else {
			key = max(key, removed)
		}
	}
	// What the store's Revision gives each group, the latest of them.
	return groups, max(key, r.s.Nicknames().Revision()), key
}
