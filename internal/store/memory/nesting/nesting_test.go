package nesting

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

func ancestors(g *Graph, id string) []string {
	var out []string
	g.Node(id).Ancestors(func(n *Node) { out = append(out, n.ID) })
	slices.Sort(out)
	return out
}

// reachable returns the ids of the nodes reached from id along next (up
// its parents or down its children), in byte order; nil when none.
func reachable(g *Graph, id string, next func(*Node) []Edge) []string {
	seen := map[string]bool{}
	stack := []string{id}
	for len(stack) > 0 {
		n := g.Node(stack[len(stack)-1])
		stack = stack[:len(stack)-1]
		if n == nil {
			continue
		}
		for _, e := range next(n) {
			if !seen[e.Node.ID] {
				seen[e.Node.ID] = true
				stack = append(stack, e.Node.ID)
			}
		}
	}
	var out []string
	for id := range seen {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func edges(g *Graph) []string {
	var out []string
	g.All(func(p, c string, at int64) bool {
		out = append(out, fmt.Sprintf("%s>%s@%d", p, c, at))
		return true
	})
	return out
}

func TestAncestorsFollowEveryChange(t *testing.T) {
	g := New()
	// A diamond: a > b > d, a > c > d, and e above a.
	for _, e := range [][2]string{{"a", "b"}, {"a", "c"}, {"b", "d"}, {"c", "d"}, {"e", "a"}} {
		g.Set(e[0], e[1], 0)
	}
	assert.Equal(t, []string{"a", "b", "c", "e"}, ancestors(g, "d"))
	assert.True(t, g.Node("d").IsAbove(g.Node("e")))
	assert.False(t, g.Node("e").IsAbove(g.Node("d")))
	g.Remove("b", "d")
	assert.Equal(t, []string{"a", "c", "e"}, ancestors(g, "d"), "still below a through c")
	g.Remove("e", "a")
	assert.Equal(t, []string{"a", "c"}, ancestors(g, "d"))
	assert.Nil(t, g.Node("e"), "a group with no nesting left is forgotten")
	g.Remove("c", "d")
	assert.Nil(t, g.Node("d"))
	assert.Equal(t, 2, g.Edges())
	assert.Equal(t, []string{"a>b@0", "a>c@0"}, edges(g))
	_, existed := g.Remove("a", "x")
	assert.False(t, existed)
}

func TestCheckNamesTheShortestPathAndTheDepth(t *testing.T) {
	g := New()
	for _, e := range [][2]string{{"top", "z"}, {"z", "m"}, {"top", "y"}, {"y", "m"}, {"m", "bottom"}, {"top", "bottom2"}, {"bottom2", "bottom"}} {
		require.NoError(t, g.Check(e[0], e[1], 0))
		g.Set(e[0], e[1], 0)
	}
	assert.Equal(t, membership.CycleError("bottom", "top", []string{"top", "bottom2", "bottom"}), g.Check("bottom", "top", 0))
	assert.Equal(t, membership.CycleError("m", "top", []string{"top", "y", "m"}), g.Check("m", "top", 0), "two shortest: the first in byte order")
	assert.Equal(t, membership.CycleError("x", "x", []string{"x"}), g.Check("x", "x", 5))
	assert.NoError(t, g.Check("bottom", "under", 4), "top > z > m > bottom > under is 4 deep")
	assert.Equal(t, membership.TooDeepError("bottom", "under", 4, 3), g.Check("bottom", "under", 3))
	g.Set("under", "deeper", 0)
	assert.Equal(t, membership.TooDeepError("bottom", "under", 5, 4), g.Check("bottom", "under", 4))
	assert.Equal(t, []string{"top", "bottom2", "bottom"}, g.Path("top", func(id string) bool { return id == "bottom" }),
		"bottom is 2 below top through bottom2, 3 through y or z: the shortest")
}

func TestPathIsShortestThenSmallest(t *testing.T) {
	g := New()
	for _, e := range [][2]string{{"r", "b"}, {"r", "a"}, {"a", "y"}, {"b", "x"}, {"x", "u"}, {"y", "u"}, {"r", "c"}, {"c", "u2"}} {
		g.Set(e[0], e[1], 0)
	}
	holds := func(ids ...string) func(string) bool { return func(id string) bool { return slices.Contains(ids, id) } }
	assert.Equal(t, []string{"r", "a", "y", "u"}, g.Path("r", holds("u")))
	assert.Equal(t, []string{"r", "c", "u2"}, g.Path("r", holds("u", "u2")), "shorter first")
	assert.Equal(t, []string{"r", "a", "y"}, g.Path("r", holds("x", "y")), "of one length, the smallest in byte order, from the top")
	assert.Equal(t, []string{"r"}, g.Path("r", holds("r")))
	assert.Nil(t, g.Path("r", holds("nowhere")))
	assert.Nil(t, g.Path("unknown", holds("u")))
}

func TestRollbackUndoesEveryChange(t *testing.T) {
	g := New()
	g.Set("a", "b", 100)
	g.Set("b", "c", 0)
	before := edges(g)
	g.Begin()
	g.Set("a", "b", 200)
	g.Set("c", "d", 300)
	g.Remove("b", "c")
	g.Set("x", "a", 0)
	g.Rollback()
	assert.Equal(t, before, edges(g))
	assert.Equal(t, []string{"a", "b"}, ancestors(g, "c"))
	assert.Nil(t, g.Node("x"))
	assert.Nil(t, g.Node("d"))
	assert.Equal(t, 1, g.Expiring())
	assert.Equal(t, int64(100), g.Next())
	g.Begin()
	g.Set("c", "d", 0)
	g.Commit()
	g.Rollback() // nothing left to undo
	assert.Equal(t, []string{"a", "b", "c"}, ancestors(g, "d"))
}

func TestDueNestingsComeOutInTimeOrderOnce(t *testing.T) {
	g := New()
	g.Set("p", "a", 30)
	g.Set("p", "b", 10)
	g.Set("q", "a", 10)
	g.Set("p", "c", 0)
	assert.Equal(t, int64(10), g.Next())
	assert.Empty(t, g.Pop(9, 10))
	assert.Equal(t, []Due{{Parent: "p", Child: "b", At: 10}, {Parent: "q", Child: "a", At: 10}}, g.Pop(10, 10))
	assert.Empty(t, g.Pop(10, 10), "taken")
	g.Requeue("p", "b")
	g.Requeue("p", "c") // no end: not due
	g.Requeue("p", "zz")
	assert.Equal(t, []Due{{Parent: "p", Child: "b", At: 10}}, g.Pop(10, 10))
	g.Set("p", "a", 50) // extended: its old end is stale
	assert.Empty(t, g.Pop(40, 10))
	g.Remove("p", "a")
	assert.Empty(t, g.Pop(60, 10), "removed: nothing due")
	assert.Zero(t, g.Next())
	assert.Equal(t, 2, g.Expiring(), "p > b and q > a still have ends; they were only taken")

	// Ends changed again and again leave the due set bounded.
	for i := range 10000 {
		g.Set("p", "b", int64(1000+i))
	}
	assert.LessOrEqual(t, len(g.due), 2*g.Expiring()+64)
	assert.Equal(t, []Due{{Parent: "p", Child: "b", At: 10999}}, g.Pop(20000, 10))
}

// The ancestors of every node are those a walk up its parents finds, after
// any mix of nestings made, ended and rolled back.
func TestAncestorsMatchAWalkAfterRandomChanges(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	g := New()
	ids := make([]string, 12)
	for i := range ids {
		ids[i] = fmt.Sprintf("g%02d", i)
	}
	walk := func(id string) []string { return reachable(g, id, func(n *Node) []Edge { return n.Parents }) }
	for step := range 3000 {
		p, c := ids[rnd.IntN(len(ids))], ids[rnd.IntN(len(ids))]
		rollback := rnd.IntN(4) == 0
		if rollback {
			g.Begin()
		}
		if _, ok := g.Node(p).Child(c); ok && rnd.IntN(2) == 0 {
			g.Remove(p, c)
		} else if g.Check(p, c, 0) == nil {
			g.Set(p, c, 0)
		}
		if rollback {
			g.Rollback()
		}
		for _, id := range ids {
			require.Equal(t, walk(id), ancestors(g, id), "step %d: the ancestors of %s", step, id)
		}
	}
}

// A group in many groups that holds many loses a parent at the cost of its
// subgroups, not of their subgroups times all its other parents: ending
// half the nestings of a group in 1000 groups costs a few times more when
// it holds 1000 subgroups than when it holds one, not a thousand times (as
// when every removal rebuilt every subgroup's ancestors). The two are timed
// alike, so that the comparison holds under -race and on a busy machine.
func TestEndingANestingOfAHubIsNotQuadratic(t *testing.T) {
	const n = 1000
	endParents := func(children int) (int64, *Graph) {
		g := New()
		for i := range max(n, children) {
			if i < children {
				g.Set("hub", fmt.Sprintf("child%04d", i), 0)
			}
			if i < n {
				g.Set(fmt.Sprintf("parent%04d", i), "hub", 0)
			}
		}
		start := g.Steps()
		for i := range n / 2 {
			g.Remove(fmt.Sprintf("parent%04d", i), "hub")
		}
		return g.Steps() - start, g
	}
	one, _ := endParents(1)
	many, g := endParents(n)
	assert.Less(t, many, 10*one,
		"ending %d nestings of a group in %d groups: steps with %d subgroups %d, with one %d", n/2, n, n, many, one)
	assert.Len(t, ancestors(g, "child0000"), n/2+1)
	assert.False(t, g.Node("child0000").IsAbove(g.Node("parent0000")))
	assert.True(t, g.Node("child0000").IsAbove(g.Node("parent0999")))
}

// revisions returns the revisions of id's node: of its children, its
// parents and its ancestors.
func revisions(g *Graph, id string) [3]membership.Revision {
	n := g.Node(id)
	return [3]membership.Revision{n.ChildrenRevision(), n.ParentsRevision(), n.AncestorsRevision()}
}

func TestStampGivesEachNodeTheRevisionOfWhatChanged(t *testing.T) {
	g := New()
	// a > b > c, d alone above c later.
	g.Set("a", "b", 0)
	g.Set("b", "c", 0)
	assert.Empty(t, g.Stamp(1))
	assert.Equal(t, [3]membership.Revision{1, 0, 0}, revisions(g, "a"))
	assert.Equal(t, [3]membership.Revision{1, 1, 1}, revisions(g, "b"))
	assert.Equal(t, [3]membership.Revision{0, 1, 1}, revisions(g, "c"))

	g.Set("x", "a", 0) // above a: the ancestors of all three change
	g.Stamp(2)
	assert.Equal(t, [3]membership.Revision{1, 2, 2}, revisions(g, "a"))
	assert.Equal(t, [3]membership.Revision{1, 1, 2}, revisions(g, "b"))
	assert.Equal(t, [3]membership.Revision{0, 1, 2}, revisions(g, "c"))

	g.Set("b", "c", 99) // an end: the nesting's two ends, not the ancestors
	g.Stamp(3)
	assert.Equal(t, [3]membership.Revision{3, 1, 2}, revisions(g, "b"))
	assert.Equal(t, [3]membership.Revision{0, 3, 2}, revisions(g, "c"))

	g.Set("d", "c", 0) // a second way above c
	g.Stamp(4)
	assert.Equal(t, [3]membership.Revision{0, 4, 4}, revisions(g, "c"))
	g.Remove("x", "a") // c keeps d, loses x
	assert.Equal(t, []string{"x"}, g.Stamp(5), "x is in no nesting any more")
	assert.Equal(t, [3]membership.Revision{1, 5, 5}, revisions(g, "a"))
	assert.Equal(t, [3]membership.Revision{0, 4, 5}, revisions(g, "c"))
	g.Remove("b", "c") // c is still below d: its ancestors lose a and b
	g.Stamp(6)
	assert.Equal(t, [3]membership.Revision{6, 1, 5}, revisions(g, "b"))
	assert.Equal(t, [3]membership.Revision{0, 6, 6}, revisions(g, "c"))
	g.Remove("d", "c")
	assert.ElementsMatch(t, []string{"c", "d"}, g.Stamp(7))
}

// A group with one parent takes the revision of its ancestors from it; a
// write that gives the parent a new ancestor, then nests the group in that
// ancestor too, changed the group's ancestors (through its parent) though
// the second nesting gives it none: it has the write's revision.
func TestAWriteThatNestsAGroupAndItsParentStampsBoth(t *testing.T) {
	g := New()
	g.Set("a", "b", 0)
	g.Stamp(2)
	g.Begin()
	g.Set("x", "a", 0)
	g.Set("x", "b", 0)
	g.Commit()
	g.Stamp(3)
	assert.Equal(t, []string{"a", "x"}, ancestors(g, "b"))
	assert.Equal(t, membership.Revision(3), g.Node("a").AncestorsRevision())
	assert.Equal(t, membership.Revision(3), g.Node("b").AncestorsRevision())
}

func TestRollbackGivesBackTheNodesWithTheirRevisions(t *testing.T) {
	g := New()
	g.Set("a", "b", 0)
	g.Stamp(1)
	b := g.Node("b")
	g.NoteDropped("b", 1)
	g.Begin()
	g.Remove("a", "b")
	g.Set("c", "b", 0)
	g.Remove("c", "b")
	g.Rollback()
	assert.Same(t, b, g.Node("b"), "the node b was, not one made again")
	assert.Equal(t, [3]membership.Revision{0, 1, 1}, revisions(g, "b"))
	assert.Equal(t, membership.Revision(1), b.Dropped())
	assert.Empty(t, g.Stamp(2), "a change rolled back stamps nothing")
	assert.Equal(t, [3]membership.Revision{0, 1, 1}, revisions(g, "b"))
	assert.Equal(t, [3]membership.Revision{1, 0, 0}, revisions(g, "a"))
}

func TestNoteDroppedKeepsTheLatestDeletionOfANestedGroup(t *testing.T) {
	g := New()
	g.NoteDropped("a", 3) // in no nesting: nothing to note it in
	g.Set("a", "b", 0)
	assert.Zero(t, g.Node("b").Dropped())
	g.NoteDropped("b", 5)
	assert.Equal(t, membership.Revision(5), g.Node("b").Dropped())
	assert.Zero(t, g.Node("a").Dropped())
	var none *Node
	assert.Zero(t, none.Dropped())
	assert.Zero(t, none.AncestorsRevision())
}

// A hub's ancestors are kept once, not once for each group below it: in a
// hub in n groups that holds n groups, each holding one, the nodes hold
// about n ancestors in all (the hub's), where a set of each node's would
// hold 2n times n.
func TestAHubsAncestorsAreKeptOnce(t *testing.T) {
	const n = 300
	g := hub(n, n)
	held := 0
	for _, node := range g.nodes {
		held += len(node.extra)
	}
	assert.LessOrEqual(t, held, n, "ancestors held")
	assert.Len(t, ancestors(g, "leaf0123"), n+2)
	assert.True(t, g.Node("leaf0123").IsAbove(g.Node("parent0000")))
	assert.True(t, g.Node("leaf0123").IsAbove(g.Node("parent0299")))

	// Ending a nesting of the hub takes its parent out of every set below.
	g.Remove("parent0299", "hub")
	assert.Len(t, ancestors(g, "leaf0123"), n+1)
	assert.False(t, g.Node("leaf0123").IsAbove(g.Node("parent0299")))
}

// A random run of every kind of change, some rolled back, against a walk
// of the graph after each: the ancestors, the revision of the ancestors of
// each group (it moves exactly when they changed), and the depth Check
// finds (the longest chain through the nesting it would make).
func TestRandomChangesKeepAncestorsRevisionsAndDepthsExact(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	g := New()
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = fmt.Sprintf("g%02d", i)
	}
	walk := func(id string, next func(*Node) []Edge) []string { return reachable(g, id, next) }
	up := func(n *Node) []Edge { return n.Parents }
	down := func(n *Node) []Edge { return n.Children }
	var longest func(id string, next func(*Node) []Edge) int
	longest = func(id string, next func(*Node) []Edge) int {
		h := 0
		if n := g.Node(id); n != nil {
			for _, e := range next(n) {
				h = max(h, 1+longest(e.Node.ID, next))
			}
		}
		return h
	}
	change := func() {
		p, c := ids[rnd.IntN(len(ids))], ids[rnd.IntN(len(ids))]
		_, nested := g.Node(p).Child(c)
		switch r := rnd.IntN(10); {
		case r == 0:
			g.Unnest(p)
		case nested && r < 5:
			g.Remove(p, c)
		case nested:
			g.Set(p, c, int64(rnd.IntN(3)))
		case g.Check(p, c, 0) == nil:
			had := map[string]int{}
			for _, id := range ids {
				had[id] = len(walk(id, up))
			}
			g.Set(p, c, 0)
			// The most ancestors a group whose ancestors grew has, and
			// the group the graph names has as many.
			most := -1
			for _, id := range ids {
				if n := len(walk(id, up)); n > had[id] {
					most = max(most, n)
				}
			}
			if most < 0 {
				require.Nil(t, g.most.from, "%s into %s changed no ancestors", c, p)
				return
			}
			require.Equal(t, most, g.most.count, "%s into %s: the most ancestors of a group it changed", c, p)
			require.Len(t, walk(g.most.node().ID, up), most, "%s into %s: the group named", c, p)
		}
	}
	before := map[string][]string{}
	for rev := membership.Revision(1); rev <= 3000; rev++ {
		// One change a revision, or a few, as a write of many nestings
		// makes them, some rolled back. A group whose ancestors a write
		// changed has its revision; one whose ancestors it did not keeps
		// its own, when the write made one change (one that both ends and
		// makes nestings may stamp a group that lost ancestors and had
		// them back).
		rollback := rnd.IntN(4) == 0
		changes := 1
		g.Begin()
		change()
		for rnd.IntN(3) == 0 {
			change()
			changes++
		}
		if rollback {
			g.Rollback()
		} else {
			g.Commit()
		}
		g.Stamp(rev)
		for _, n := range g.nodes {
			want := int32(0)
			for _, e := range n.Children {
				want += e.Node.eagerCount()
			}
			require.Equal(t, want, n.eagerBelow, "revision %d: the groups below %s that are not lazy", rev, n.ID)
			if n.lazy {
				require.Len(t, n.Parents, 1, "revision %d: %s is lazy", rev, n.ID)
				require.Same(t, n.Parents[0].Node, n.up, "revision %d: %s is lazy", rev, n.ID)
			}
		}
		for _, id := range ids {
			now := walk(id, up)
			require.Equal(t, now, ancestors(g, id), "revision %d: the ancestors of %s", rev, id)
			if n := g.Node(id); n != nil && (changes == 1 || !slices.Equal(before[id], now)) {
				assert.Equal(t, !slices.Equal(before[id], now), n.AncestorsRevision() == rev,
					"revision %d, %d changes: the ancestors of %s were %v, are %v, stamped %d", rev, changes, id, before[id], now, n.AncestorsRevision())
			}
			before[id] = now
		}
		p, c := ids[rnd.IntN(len(ids))], ids[rnd.IntN(len(ids))]
		if _, nested := g.Node(p).Child(c); nested || p == c || slices.Contains(walk(p, up), c) {
			continue
		}
		depth := longest(p, up) + 1 + longest(c, down)
		for _, limit := range []int{depth - 1, depth} {
			if limit == 0 {
				continue // no bound
			}
			var me *membership.Error
			err := g.Check(p, c, limit)
			assert.Equal(t, limit < depth, errors.As(err, &me) && me.Code == membership.CodeTooDeep, "revision %d: %s into %s, depth %d, limit %d: %v", rev, c, p, depth, limit, err)
		}
	}
}

// A hub that holds n groups and is in n groups: nesting the hub in its
// parents, nesting all its parents in one group, and taking the hub out of
// every nesting, each cost steps that grow with n, not with n times n
// (each nesting walked every group below the hub, or every parent of it).
func TestNestingAroundAHubIsLinear(t *testing.T) {
	const n = 1000
	g := New()
	for i := range n {
		g.Set("hub", fmt.Sprintf("child%04d", i), 0)
	}
	g.Stamp(1)
	start := g.Steps()
	for i := range n {
		require.NoError(t, g.Check(fmt.Sprintf("parent%04d", i), "hub", 32))
		g.Set(fmt.Sprintf("parent%04d", i), "hub", 0)
		g.Stamp(membership.Revision(2 + i))
	}
	assert.Less(t, g.Steps()-start, int64(20*n), "steps to nest the hub in %d parents", n)
	assert.Equal(t, membership.Revision(1+n), g.Node("child0000").AncestorsRevision())

	start = g.Steps()
	for i := range n {
		require.NoError(t, g.Check("top", fmt.Sprintf("parent%04d", i), 32))
		g.Set("top", fmt.Sprintf("parent%04d", i), 0)
	}
	g.Stamp(membership.Revision(2 + n))
	assert.Less(t, g.Steps()-start, int64(20*n), "steps to nest the hub's %d parents in one group", n)
	assert.Equal(t, 3, g.Node("top").Deepest())
	assert.Equal(t, 3, g.Node("child0000").Highest())
	assert.Len(t, ancestors(g, "child0000"), n+2)
	assert.Equal(t, membership.Revision(2+n), g.Node("child0000").AncestorsRevision())

	start = g.Steps()
	assert.Len(t, g.Unnest("hub"), n)
	assert.Less(t, g.Steps()-start, int64(20*n), "steps to take the hub out of its %d parents and %d subgroups", n, n)
	assert.Nil(t, g.Node("child0000"))
	assert.Nil(t, g.Node("hub"))
	assert.Equal(t, 1, g.Node("top").Deepest())
	assert.Equal(t, 1, g.Node("parent0000").Highest())
	assert.Equal(t, 0, g.Node("parent0000").Deepest())
}

// Groups with two parents below a group that gains or loses many
// ancestors: each holds the ancestors it has from its other parent, not a
// copy of those it gains (they come through its up), and losing them costs
// steps that grow with the groups, not with the groups times the ancestors
// lost.
func TestGroupsWithTwoParentsGainAndLoseManyAncestorsCheaply(t *testing.T) {
	const n = 500
	g := New()
	for i := range n {
		g.Set("other", fmt.Sprintf("child%04d", i), 0) // its first parent, its up
		g.Set("hub", fmt.Sprintf("child%04d", i), 0)
		g.Set(fmt.Sprintf("parent%04d", i), "top", 0)
	}
	g.Stamp(1)
	g.Set("top", "hub", 0) // every child gains top and its n parents
	g.Stamp(2)
	g.Set("more", "hub", 0)
	g.Stamp(3)
	held := 0
	for _, node := range g.nodes {
		held += len(node.extra)
	}
	assert.Less(t, held, 4*n, "ancestors held in extras")
	assert.Len(t, ancestors(g, "child0000"), n+4)

	start := g.Steps()
	g.Remove("top", "hub")
	g.Stamp(4)
	assert.Less(t, g.Steps()-start, int64(40*n), "steps for %d groups with two parents to lose %d ancestors", n, n+1)
	assert.Equal(t, []string{"hub", "more", "other"}, ancestors(g, "child0000"))
	assert.Equal(t, membership.Revision(4), g.Node("child0000").AncestorsRevision())
	assert.Zero(t, g.Node("more").AncestorsRevision(), "more has no ancestors")
}

// A group in many groups: nesting new groups in it, and ending their
// nestings, cost steps that do not grow with its ancestors; and a group
// in many parents with many ancestors above them ends one of those
// nestings at the cost of what it loses, not of the ancestors of all the
// others.
func TestNestingsBelowManyAncestorsCostStepsOfWhatChanges(t *testing.T) {
	const n = 1000
	g := New()
	for i := range n {
		g.Set(fmt.Sprintf("above%04d", i), "top", 0)
	}
	g.Stamp(1)
	start := g.Steps()
	for i := range n {
		g.Set("top", fmt.Sprintf("new%04d", i), 0)
	}
	g.Stamp(2)
	for i := range n {
		g.Remove("top", fmt.Sprintf("new%04d", i))
	}
	g.Stamp(3)
	assert.Less(t, g.Steps()-start, int64(20*n), "steps to nest %d groups in a group with %d ancestors, and end it", n, n)

	for i := range n {
		g.Set(fmt.Sprintf("parent%04d", i), "x", 0)
		g.Set("top", fmt.Sprintf("parent%04d", i), 0)
	}
	g.Stamp(4)
	start = g.Steps()
	g.Remove("parent0000", "x")
	g.Stamp(5)
	assert.Less(t, g.Steps()-start, int64(20*n), "steps to end one of %d nestings, each below %d ancestors", n, n+1)
	assert.Len(t, ancestors(g, "x"), 2*n)
	assert.False(t, g.Node("x").IsAbove(g.Node("parent0000")))
	assert.Equal(t, membership.Revision(5), g.Node("x").AncestorsRevision())
	start = g.Steps()
	g.Remove("parent0001", "x") // x's up, maybe: the same either way
	g.Remove("parent0999", "x")
	g.Stamp(6)
	assert.Less(t, g.Steps()-start, int64(20*n), "steps to end two more")
	assert.Len(t, ancestors(g, "x"), 2*n-2)
}
