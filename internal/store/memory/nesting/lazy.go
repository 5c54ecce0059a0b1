package nesting

import "example.com/groupmembership/membership"

// A group with one parent has the ancestors of that parent and the parent
// itself: they change exactly when the parent's do. Such a node, once a
// change of its ancestors is stamped on it, is lazy: it keeps no revision
// of its own for them, but the latest of its own and its parent's
// (AncestorsRevision), and a change above it neither walks to it nor
// touches it. A walk of a change skips a lazy node and all below it
// unless a node below is not lazy: each node counts the nodes below it it
// reaches through lazy ones that are not (eagerBelow).
//
// A lazy node becomes eager again before its parents change: it takes
// the revision it had through its parent as its own (eager), so that its
// revision moves exactly when its ancestors change, never back.

// AncestorsRevision returns the revision of the latest change of the
// groups above n.
func (n *Node) AncestorsRevision() membership.Revision {
	if n == nil {
		return 0
	}
	rev := n.above
	for ; n.lazy; n = n.up {
		rev = max(rev, n.up.above)
	}
	return rev
}

// eager makes n, whose parents are about to change, keep the revision of
// its ancestors itself. When a change not yet stamped altered the
// ancestors of a group it has its own through, it altered n's: n is
// touched for it, as that group is.
func (g *Graph) eager(n *Node) {
	if !n.lazy {
		return
	}
	old := n.above
	n.above = n.AncestorsRevision()
	for x := n.up; ; x = x.up {
		if g.pendingAbove(x) {
			g.touch(n, changedAbove)
			break
		}
		if !x.lazy {
			break
		}
	}
	g.setLazy(n, false)
	g.record(func() {
		g.setLazy(n, true)
		n.above = old
	})
}

// setLazy makes n, which has one parent, lazy or not, and counts it so
// above it.
func (g *Graph) setLazy(n *Node, lazy bool) {
	if n.lazy == lazy {
		return
	}
	was := n.eagerCount()
	n.lazy = lazy
	g.addEager(n.up, n.eagerCount()-was)
}

// eagerCount returns how many nodes that are not lazy n counts for in its
// parent's eagerBelow: itself, or those below it when it is lazy.
func (n *Node) eagerCount() int32 {
	if n.lazy {
		return n.eagerBelow
	}
	return 1
}

// addEager adds d to the count of eager nodes below n, and below each
// node n is lazily below.
func (g *Graph) addEager(n *Node, d int32) {
	for ; d != 0; n = n.up {
		n.eagerBelow += d
		g.steps++
		if !n.lazy {
			return
		}
	}
}
