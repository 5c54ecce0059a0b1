// Package nesting holds the groups in groups of the in-memory store: each
// nesting both ways (a group's subgroups and its parents, with when each
// nesting ends), each group's set of ancestors, kept as nestings change
// and shared along a parent a group has them from (ancestors.go), so that
// whether a group is above another costs a lookup a level, each group's
// heights, the longest chains below and above it (heights.go), so that the
// depth a nesting would make costs two lookups, and the nestings that end
// by themselves, by time.
//
// A change walks only the groups whose ancestors it changes, and not
// those that take theirs from their one parent (lazy.go): its work grows
// with the groups it changes that have more than one parent, times the
// ancestors each gains or loses. A new nesting finds the most ancestors
// a group it changed now has (CheckAncestors), so that a write may be
// refused for putting a group below too many: what a group holds of its
// own, and what a change does to it, is then bounded.
//
// A Graph has no lock: the store's nesting lock guards it (see package
// memory), but for NoteDropped, which a writer of members calls without
// it. It knows group ids alone, not their members, and of each group the
// revisions of the latest changes of its nestings (revisions.go).
package nesting

import (
	"container/heap"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"example.com/groupmembership/membership"
)

// Edge is a nesting as a node lists it: the group at its other end, and
// when it ends, in Unix milliseconds (0: never).
type Edge struct {
	Node *Node
	At   int64
}

// Node is a group that is nested or has subgroups.
type Node struct {
	ID string
	// Children and Parents are in byte order of ids.
	Children []Edge
	Parents  []Edge
	// up and extra are the nodes above this one (ancestors.go): up, one
	// of its parents (nil: it has none), and every node above up; extra,
	// the others, none of them above up.
	up    *Node
	extra map[*Node]struct{}
	// children, parents and above are the revisions of the latest change
	// of Children, of Parents (their ends included) and of the set of
	// ancestors (Stamp gives them).
	children, parents, above membership.Revision
	// dropped is the revision of the latest deletion of the group, since
	// the node was made (NoteDropped).
	dropped atomic.Uint64
	// deepest and highest are the longest chains of nestings below and
	// above the node, deepBy and highBy how many of its children and of
	// its parents they come through (heights.go).
	deepest, highest int32
	deepBy, highBy   int32
	// pend is 1 + the index of the node's entry among the graph's pending
	// changes, 0 when it has none (touch).
	pend int32
	// lazy is set when the node takes the revision of its ancestors from
	// its one parent; eagerBelow counts the nodes that are not lazy below
	// it through lazy ones (lazy.go).
	lazy       bool
	eagerBelow int32
	// extraPeak is the most extra held since its map was made
	// (deleteExtra).
	extraPeak int32
	// seen is what the latest walk of a change found of the node: a walk
	// takes marks of its own from the graph's epoch. Only a writer walks.
	seen uint64
}

// Graph is the nesting of groups: a directed graph without cycles.
type Graph struct {
	// mapMu guards nodes and limbo for NoteDropped, which reads them
	// without the store's nesting lock; whoever writes them holds both.
	mapMu sync.RWMutex
	nodes map[string]*Node
	// limbo are the nodes dropped since the last Commit, Rollback or
	// Stamp: one made again is the same node, with its revisions, so that
	// a Rollback gives back every node as it was.
	limbo map[string]*Node
	edges int
	// due holds the nestings that end by themselves, by time; an entry
	// whose nesting ended otherwise, or changed its end, stays until it
	// comes up (Pop skips it), as long as there are at most as many stale
	// entries as live ones.
	due dueHeap
	// expiring counts the nestings that have an end.
	expiring int
	// undo, while a transaction is open (Begin), holds what undoes each
	// change since, last first.
	undo []func()
	open bool
	// pending are the changes of nodes since the last Stamp; mark is how
	// many there were at Begin.
	pending []pendingChange
	mark    int
	// steps counts the steps taken over ancestor sets, the work that
	// grows with the shape of the nesting (Steps).
	steps int64
	// most is what the latest new nesting made of the ancestors of the
	// nodes below it (CheckAncestors).
	most mostAbove
	// epoch is the latest mark a walk took (Node.seen); walk keeps the
	// lists of the latest, emptied, for the next.
	epoch uint64
	walk  [2][]*Node
	// undoing is set while Rollback undoes changes: they touch nothing.
	undoing bool
}

// Steps returns how many steps over ancestor sets the graph's changes
// have taken in all: the work a change costs, counted rather than timed.
func (g *Graph) Steps() int64 { return g.steps }

// New returns an empty graph.
func New() *Graph { return &Graph{nodes: map[string]*Node{}} }

// Node returns the node of id, nil when id is neither nested nor has
// subgroups.
func (g *Graph) Node(id string) *Node { return g.nodes[id] }

// Edges returns how many nestings there are.
func (g *Graph) Edges() int { return g.edges }

// Expiring returns how many nestings have an end.
func (g *Graph) Expiring() int { return g.expiring }

// All yields every nesting, by parent then child in byte order of ids.
func (g *Graph) All(yield func(parent, child string, at int64) bool) {
	ids := make([]string, 0, len(g.nodes))
	for id, n := range g.nodes {
		if len(n.Children) > 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		for _, e := range g.nodes[id].Children {
			if !yield(id, e.Node.ID, e.At) {
				return
			}
		}
	}
}

// Child returns the nesting of child in n, false when there is none.
func (n *Node) Child(child string) (Edge, bool) {
	if n == nil {
		return Edge{}, false
	}
	i, ok := search(n.Children, child)
	if !ok {
		return Edge{}, false
	}
	return n.Children[i], true
}

func search(edges []Edge, id string) (int, bool) {
	return slices.BinarySearchFunc(edges, id, func(e Edge, id string) int { return strings.Compare(e.Node.ID, id) })
}

func (g *Graph) node(id string) *Node {
	n := g.nodes[id]
	if n != nil {
		return n
	}
	g.mapMu.Lock()
	defer g.mapMu.Unlock()
	if n = g.limbo[id]; n != nil {
		delete(g.limbo, id)
	} else {
		n = &Node{ID: strings.Clone(id)}
	}
	g.nodes[n.ID] = n
	return n
}

// drop forgets n when no nesting is left at either of its ends.
func (g *Graph) drop(n *Node) {
	if len(n.Children) == 0 && len(n.Parents) == 0 {
		g.mapMu.Lock()
		defer g.mapMu.Unlock()
		delete(g.nodes, n.ID)
		if g.limbo == nil {
			g.limbo = map[string]*Node{}
		}
		g.limbo[n.ID] = n
	}
}

// Begin opens a transaction: until Commit, Rollback undoes every change.
func (g *Graph) Begin() { g.undo, g.open, g.mark = g.undo[:0], true, len(g.pending) }

// Commit keeps the changes since Begin.
func (g *Graph) Commit() {
	clear(g.undo)
	g.undo, g.open = g.undo[:0], false
	g.clearLimbo()
}

// Rollback undoes the changes since Begin.
func (g *Graph) Rollback() {
	undo := g.undo
	g.open, g.undoing = false, true // the undoing records and touches nothing
	for i := len(undo) - 1; i >= 0; i-- {
		undo[i]()
	}
	g.undoing = false
	clear(undo)
	g.undo = undo[:0]
	for _, p := range g.pending[g.mark:] {
		p.n.pend = 0
	}
	clear(g.pending[g.mark:])
	g.pending = g.pending[:g.mark]
	g.clearLimbo()
}

func (g *Graph) clearLimbo() {
	if len(g.limbo) > 0 {
		g.mapMu.Lock()
		clear(g.limbo)
		g.mapMu.Unlock()
	}
}

func (g *Graph) record(f func()) {
	if g.open {
		g.undo = append(g.undo, f)
	}
}

// Check returns the error of nesting child in parent, which are not nested
// so yet, against the graph as it is: membership.CycleError when child is
// parent or above it, membership.TooDeepError when the nesting would make
// a chain deeper than maxDepth (0: no bound).
func (g *Graph) Check(parent, child string, maxDepth int) error {
	p, c := g.nodes[parent], g.nodes[child]
	if parent == child || p.IsAbove(c) {
		return membership.CycleError(parent, child, g.Path(child, func(id string) bool { return id == parent }))
	}
	if maxDepth <= 0 {
		return nil
	}
	if depth := p.Highest() + 1 + c.Deepest(); depth > maxDepth {
		return membership.TooDeepError(parent, child, depth, maxDepth)
	}
	return nil
}

// CheckAncestors returns the error of the nesting of child in parent,
// just made (Set), when it gave a group more than maxAncestors ancestors
// (0: no bound): membership.TooManyAncestorsError, naming the group.
func (g *Graph) CheckAncestors(parent, child string, maxAncestors int) error {
	if maxAncestors <= 0 || g.most.from == nil || g.most.count <= maxAncestors {
		return nil
	}
	return membership.TooManyAncestorsError(parent, child, g.most.node().ID, g.most.count, maxAncestors)
}

// Path returns a shortest path of groups from id down to a group for
// which isEnd holds (id itself included), the smallest in byte order of
// the shortest; nil when there is none.
func (g *Graph) Path(id string, isEnd func(string) bool) []string {
	if isEnd(id) {
		return []string{id}
	}
	start := g.nodes[id]
	if start == nil {
		return nil
	}
	// Breadth first, children in byte order: each layer is found in byte
	// order of the paths to it, so the first end found ends the smallest.
	prev := map[*Node]*Node{start: nil}
	layer := []*Node{start}
	for len(layer) > 0 {
		var next []*Node
		for _, n := range layer {
			for _, e := range n.Children {
				if _, seen := prev[e.Node]; seen {
					continue
				}
				prev[e.Node] = n
				if isEnd(e.Node.ID) {
					var path []string
					for at := e.Node; at != nil; at = prev[at] {
						path = append(path, at.ID)
					}
					slices.Reverse(path)
					return path
				}
				next = append(next, e.Node)
			}
		}
		layer = next
	}
	return nil
}

// Below returns every node below id, each once, in no order.
func (g *Graph) Below(id string) []*Node {
	start := g.nodes[id]
	if start == nil {
		return nil
	}
	seen := map[*Node]bool{start: true}
	var out []*Node
	stack := []*Node{start}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, e := range n.Children {
			if !seen[e.Node] {
				seen[e.Node] = true
				out = append(out, e.Node)
				stack = append(stack, e.Node)
			}
		}
	}
	return out
}

// Set nests child in parent until at (0: with no end), or changes the end
// of that nesting, without checks (see Check), and returns the end it had
// and whether it existed.
func (g *Graph) Set(parent, child string, at int64) (old int64, existed bool) {
	p, c := g.node(parent), g.node(child)
	i, ok := search(p.Children, child)
	if ok {
		old = p.Children[i].At
		if old == at {
			return old, true
		}
		p.Children[i].At = at
		j, _ := search(c.Parents, parent)
		c.Parents[j].At = at
		g.countExpiring(old, at)
		g.schedule(p, c, at)
		g.touch(p, changedChildren)
		g.touch(c, changedParents)
		g.record(func() { g.Set(parent, child, old) })
		return old, true
	}
	g.eager(c)
	p.Children = slices.Insert(p.Children, i, Edge{Node: c, At: at})
	g.addEager(p, 1)
	j, _ := search(c.Parents, parent)
	c.Parents = slices.Insert(c.Parents, j, Edge{Node: p, At: at})
	g.edges++
	g.countExpiring(0, at)
	g.schedule(p, c, at)
	g.touch(p, changedChildren)
	g.touch(c, changedParents)
	g.heights(p, c, true)
	// c and every node below it are now below p and all above p.
	g.addAbove(p, c)
	g.record(func() { g.Remove(parent, child) })
	return 0, false
}

// Remove ends the nesting of child in parent, and returns the end it had
// and whether it existed.
func (g *Graph) Remove(parent, child string) (at int64, existed bool) {
	p, c := g.nodes[parent], g.nodes[child]
	if p == nil || c == nil {
		return 0, false
	}
	at, existed = g.unlink(p, c)
	if !existed {
		return 0, false
	}
	g.removeAbove(p, c)
	g.drop(p)
	g.drop(c)
	return at, true
}

// unlink takes the nesting of c in p, if there is one, out of both nodes'
// lists and heights, and returns the end it had and whether it existed;
// the caller puts the ancestors right after it (Remove).
func (g *Graph) unlink(p, c *Node) (at int64, existed bool) {
	i, ok := search(p.Children, c.ID)
	if !ok {
		return 0, false
	}
	at = p.Children[i].At
	g.eager(c)
	p.Children = slices.Delete(p.Children, i, i+1)
	g.addEager(p, -1)
	j, _ := search(c.Parents, p.ID)
	c.Parents = slices.Delete(c.Parents, j, j+1)
	g.edges--
	g.countExpiring(at, 0)
	g.touch(p, changedChildren)
	g.touch(c, changedParents)
	g.heights(p, c, false)
	parent, child := p.ID, c.ID
	g.record(func() { g.Set(parent, child, at) })
	return at, true
}

func (g *Graph) countExpiring(old, at int64) {
	if old != 0 {
		g.expiring--
	}
	if at != 0 {
		g.expiring++
	}
}

// Due is a nesting that has come to its end.
type Due struct {
	Parent, Child string
	At            int64
}

type dueHeap []Due

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if h[i].At != h[j].At {
		return h[i].At < h[j].At
	}
	if h[i].Parent != h[j].Parent {
		return h[i].Parent < h[j].Parent
	}
	return h[i].Child < h[j].Child
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)   { *h = append(*h, x.(Due)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// schedule puts the end of the nesting of c in p, at, among those due.
func (g *Graph) schedule(p, c *Node, at int64) {
	if at == 0 {
		return
	}
	heap.Push(&g.due, Due{Parent: p.ID, Child: c.ID, At: at})
	if len(g.due) > 2*g.expiring+64 {
		g.compact()
	}
}

// compact drops the stale entries of the due set.
func (g *Graph) compact() {
	live := g.due[:0]
	for _, d := range g.due {
		if g.current(d) {
			live = append(live, d)
		}
	}
	clear(g.due[len(live):])
	g.due = live
	heap.Init(&g.due)
}

// current reports whether d is the end its nesting has now.
func (g *Graph) current(d Due) bool {
	e, ok := g.nodes[d.Parent].Child(d.Child)
	return ok && e.At == d.At
}

// Next returns when the earliest nesting ends, 0 when none does.
func (g *Graph) Next() int64 {
	for len(g.due) > 0 && !g.current(g.due[0]) {
		heap.Pop(&g.due)
	}
	if len(g.due) == 0 {
		return 0
	}
	return g.due[0].At
}

// Pop takes out of the due set the nestings that end at or before now, at
// most max, earliest first; they are not due again unless given back
// (Requeue).
func (g *Graph) Pop(now int64, max int) []Due {
	var out []Due
	for len(out) < max {
		at := g.Next()
		if at == 0 || at > now {
			break
		}
		out = append(out, heap.Pop(&g.due).(Due))
	}
	return out
}

// Requeue gives back the nesting of child in parent, if it still has an
// end, to the due set.
func (g *Graph) Requeue(parent, child string) {
	if e, ok := g.nodes[parent].Child(child); ok && e.At != 0 {
		heap.Push(&g.due, Due{Parent: parent, Child: child, At: e.At})
	}
}
