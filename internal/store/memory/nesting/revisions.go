package nesting

import (
	"slices"

	"example.com/groupmembership/membership"
)

// The revisions of a node: each change of a nesting marks what it changed
// of each node (touch), and once the change has its revision, Stamp gives
// it to them. A read of groups in groups answers with the revision of the
// latest change of what it reads (its parents, its ancestors, the
// children of the nodes below it): one at which its answer was what it
// is, which moves exactly when its answer can have changed.

// changed says what a change changed of a node.
type changed uint8

const (
	changedChildren changed = 1 << iota
	changedParents
	changedAbove
)

type pendingChange struct {
	n    *Node
	what changed
}

// pendingAbove reports whether a change not yet stamped altered n's
// ancestors.
func (g *Graph) pendingAbove(n *Node) bool {
	return n.pend > 0 && g.pending[n.pend-1].what&changedAbove != 0
}

// touch marks what a change changed of n: in n's one entry among those
// pending. What an open transaction adds to an entry made before it began
// is undone with it; what its undoing changes is not marked.
func (g *Graph) touch(n *Node, what changed) {
	if g.undoing {
		return
	}
	if n.pend == 0 {
		g.pending = append(g.pending, pendingChange{n, what})
		n.pend = int32(len(g.pending))
		return
	}
	i := int(n.pend - 1)
	had := g.pending[i].what
	if had|what == had {
		return
	}
	g.pending[i].what = had | what
	if i < g.mark {
		g.record(func() { g.pending[i].what = had })
	}
}

// Stamp gives the revision rev to what the changes since the last Stamp
// changed, and returns the ids of the groups they left in no nesting (in
// no order, each once): the store keeps the revision of that for them
// (their nodes are gone). The caller has recorded the changes as rev.
func (g *Graph) Stamp(rev membership.Revision) (gone []string) {
	for _, p := range g.pending {
		n := p.n
		n.pend = 0
		if p.what&changedChildren != 0 {
			n.children = rev
		}
		if p.what&changedParents != 0 {
			n.parents = rev
		}
		if p.what&changedAbove != 0 {
			n.above = rev
			if len(n.Parents) == 1 && g.nodes[n.ID] == n {
				g.setLazy(n, true)
			}
		}
		if g.nodes[n.ID] != n {
			gone = append(gone, n.ID)
		}
	}
	clear(g.pending)
	g.pending = g.pending[:0]
	g.clearLimbo()
	slices.Sort(gone)
	return slices.Compact(gone)
}

// NoteDropped notes that the group id was deleted by the change rev (its
// members all gone): a read of a group above it, whose answer it was part
// of, answers at rev at least. The caller holds the group's shard, not the
// nesting's lock.
func (g *Graph) NoteDropped(id string, rev membership.Revision) {
	g.mapMu.RLock()
	defer g.mapMu.RUnlock()
	n := g.nodes[id]
	if n == nil {
		n = g.limbo[id]
	}
	if n != nil {
		n.dropped.Store(uint64(rev))
	}
}

// LoadChildrenRevision sets the revision of the latest change of n's
// subgroups, as a snapshot loaded tells it (its group's revision, which
// moves with them): a loaded graph knows no other.
func (n *Node) LoadChildrenRevision(rev membership.Revision) { n.children = rev }

// ChildrenRevision returns the revision of the latest change of n's
// subgroups or of when their nestings end (0: n nil, or none since it was
// loaded).
func (n *Node) ChildrenRevision() membership.Revision {
	if n == nil {
		return 0
	}
	return n.children
}

// ParentsRevision returns the revision of the latest change of the groups
// n is directly in, or of when those nestings end.
func (n *Node) ParentsRevision() membership.Revision {
	if n == nil {
		return 0
	}
	return n.parents
}

// Dropped returns the revision of the latest deletion of n's group, 0 when
// none came since n was made. A reader holds the group's shard.
func (n *Node) Dropped() membership.Revision {
	if n == nil {
		return 0
	}
	return membership.Revision(n.dropped.Load())
}
