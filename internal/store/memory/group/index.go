package group

import (
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/groupids"
)

// The Index orders the groups that have members or subgroups by id, for
// Store.Groups: a B+tree whose leaves hold the groups' numbers, in order
// of their ids, and whose inner nodes hold the first id below each child
// and how many groups are below it. Finding a page, or how many ids fall
// in a range, is a walk from the root: O(log n), with no scan or sort of
// the groups. A group costs its number in a leaf, about five bytes (a
// leaf that overflows gives to a neighbour with room before it splits, so
// that leaves are mostly full; full after a Build), and nothing in its
// struct.

const (
	// leafMax is the most numbers a leaf holds: a leaf, with room for one
	// more while it splits, is 256 bytes.
	leafMax = 62
	// innerMax is the most children of an inner node.
	innerMax = 64
)

// A leaf holds groups' numbers, in order of their ids.
type leaf struct {
	n       int32
	numbers [leafMax + 1]uint32
}

// An inner node holds its children, for each the id of its first group
// and how many groups are below it.
type inner struct {
	n      int
	firsts [innerMax + 1]string
	counts [innerMax + 1]int
	// leaves are the children of a node just above the leaves, inners
	// those of the nodes above.
	leaves [innerMax + 1]*leaf
	inners [innerMax + 1]*inner
}

// Index is the root of the tree, with what it needs.
type Index struct {
	// at returns the group of a number.
	at   func(uint32) *Group
	root *inner // nil while empty
	// height is the levels of inner nodes: 1 when the root's children
	// are leaves.
	height int
	total  int
}

// NewIndex returns an empty Index of the groups at returns by number.
func NewIndex(at func(uint32) *Group) Index { return Index{at: at} }

// id returns the id of the group numbered n.
func (ix *Index) id(n uint32) string { return ix.at(n).ID }

// child returns the index of the child of x whose groups hold id, or
// would: the last whose first id is <= id, or the first.
func child(x *inner, id string) int {
	lo, hi := 1, x.n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if x.firsts[mid] <= id {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}

// search returns the index of the first group of l whose id is >= id, or
// > id when !inclusive.
func (ix *Index) search(l *leaf, id string, inclusive bool) int {
	lo, hi := 0, int(l.n)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if got := ix.id(l.numbers[mid]); got < id || !inclusive && got == id {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

func (x *inner) sum() int {
	n := 0
	for _, c := range x.counts[:x.n] {
		n += c
	}
	return n
}

// insertAt inserts v at i of a, which holds n.
func insertAt[T any](a []T, n, i int, v T) {
	copy(a[i+1:n+1], a[i:n])
	a[i] = v
}

// deleteAt deletes what is at i of a, which holds n.
func deleteAt[T any](a []T, n, i int) {
	copy(a[i:n-1], a[i+1:n])
	var zero T
	a[n-1] = zero
}

// addChild inserts, at i of x, the child c (a *leaf or an *inner) whose
// first id is first and which holds count groups.
func (x *inner) addChild(i int, first string, count int, l *leaf, c *inner) {
	insertAt(x.firsts[:], x.n, i, first)
	insertAt(x.counts[:], x.n, i, count)
	insertAt(x.leaves[:], x.n, i, l)
	insertAt(x.inners[:], x.n, i, c)
	x.n++
}

// dropChild removes the child at i of x.
func (x *inner) dropChild(i int) {
	deleteAt(x.firsts[:], x.n, i)
	deleteAt(x.counts[:], x.n, i)
	deleteAt(x.leaves[:], x.n, i)
	deleteAt(x.inners[:], x.n, i)
	x.n--
}

// Insert adds g, which the index must not hold.
func (ix *Index) Insert(g *Group) {
	ix.total++
	if ix.root == nil {
		l := &leaf{n: 1}
		l.numbers[0] = g.Number
		ix.root, ix.height = &inner{}, 1
		ix.root.addChild(0, g.ID, 1, l, nil)
		return
	}
	if sibling := ix.insert(ix.root, ix.height, g); sibling != nil {
		old := ix.root
		ix.root = &inner{}
		ix.root.addChild(0, old.firsts[0], old.sum(), nil, old)
		ix.root.addChild(1, sibling.firsts[0], sibling.sum(), nil, sibling)
		ix.height++
	}
}

// insert adds g below x, at height h, and returns the new sibling of x
// when x split.
func (ix *Index) insert(x *inner, h int, g *Group) *inner {
	i := child(x, g.ID)
	x.counts[i]++
	if h == 1 {
		l := x.leaves[i]
		at := ix.search(l, g.ID, false)
		insertAt(l.numbers[:], int(l.n), at, g.Number)
		l.n++
		if at == 0 {
			x.firsts[i] = g.ID
		}
		if l.n > leafMax {
			ix.overflow(x, i)
		}
	} else {
		c := x.inners[i]
		if sibling := ix.insert(c, h-1, g); sibling != nil {
			x.counts[i] = c.sum()
			x.addChild(i+1, sibling.firsts[0], sibling.sum(), nil, sibling)
		}
		x.firsts[i] = c.firsts[0]
	}
	if x.n <= innerMax {
		return nil
	}
	r := &inner{}
	for j := x.n / 2; j < x.n; j++ {
		r.addChild(r.n, x.firsts[j], x.counts[j], x.leaves[j], x.inners[j])
	}
	for x.n > innerMax+1-r.n {
		x.dropChild(x.n - 1)
	}
	return r
}

// overflow makes room in the leaf at i of x, which holds one more than
// leafMax: it gives its last number to the next leaf, or its first to the
// previous one, when that has room, and else splits in halves. Ids added
// in order (g1, g2, ... g10, g11: runs of them land in one place) then fill
// leaves as random ones do, two thirds full or more, where halves alone
// would leave them half full.
func (ix *Index) overflow(x *inner, i int) {
	l := x.leaves[i]
	switch {
	case i+1 < x.n && x.leaves[i+1].n < leafMax:
		r := x.leaves[i+1]
		l.n--
		insertAt(r.numbers[:], int(r.n), 0, l.numbers[l.n])
		r.n++
		l.numbers[l.n] = 0
		x.counts[i]--
		x.counts[i+1]++
		x.firsts[i+1] = ix.id(r.numbers[0])
	case i > 0 && x.leaves[i-1].n < leafMax:
		prev := x.leaves[i-1]
		prev.numbers[prev.n] = l.numbers[0]
		prev.n++
		deleteAt(l.numbers[:], int(l.n), 0)
		l.n--
		x.counts[i]--
		x.counts[i-1]++
		x.firsts[i] = ix.id(l.numbers[0])
	default:
		r := &leaf{n: l.n / 2}
		l.n -= r.n
		copy(r.numbers[:], l.numbers[l.n:l.n+r.n])
		clear(l.numbers[l.n:])
		x.counts[i] = int(l.n)
		x.addChild(i+1, ix.id(r.numbers[0]), int(r.n), r, nil)
	}
}

// Remove removes g, which the index holds.
func (ix *Index) Remove(g *Group) {
	ix.total--
	ix.remove(ix.root, ix.height, g.ID)
	for ix.height > 1 && ix.root.n == 1 {
		ix.root = ix.root.inners[0]
		ix.height--
	}
	if ix.root.n == 0 {
		ix.root, ix.height = nil, 0
	}
}

// remove removes the group id below x, at height h. A child left empty
// goes; one left under a quarter full is merged into a neighbour that has
// room for it.
func (ix *Index) remove(x *inner, h int, id string) {
	i := child(x, id)
	x.counts[i]--
	if h == 1 {
		l := x.leaves[i]
		at := ix.search(l, id, true)
		deleteAt(l.numbers[:], int(l.n), at)
		l.n--
		switch {
		case l.n == 0:
			x.dropChild(i)
		case at == 0:
			x.firsts[i] = ix.id(l.numbers[0])
		}
		if i < x.n && x.leaves[i] == l && l.n < leafMax/4 {
			mergeLeaves(x, i)
		}
		return
	}
	c := x.inners[i]
	ix.remove(c, h-1, id)
	if c.n == 0 {
		x.dropChild(i)
		return
	}
	x.firsts[i] = c.firsts[0]
	if c.n < innerMax/4 {
		mergeInners(x, i)
	}
}

// mergeLeaves merges the leaf at i of x with its next or previous one,
// when the two fit one leaf.
func mergeLeaves(x *inner, i int) {
	if i+1 == x.n {
		i-- // with the previous one
	}
	if i < 0 || x.leaves[i].n+x.leaves[i+1].n > leafMax {
		return
	}
	a, b := x.leaves[i], x.leaves[i+1]
	copy(a.numbers[a.n:], b.numbers[:b.n])
	a.n += b.n
	x.counts[i] += x.counts[i+1]
	x.dropChild(i + 1)
}

// mergeInners merges the inner node at i of x with its next or previous
// one, when the two fit one node.
func mergeInners(x *inner, i int) {
	if i+1 == x.n {
		i--
	}
	if i < 0 || x.inners[i].n+x.inners[i+1].n > innerMax {
		return
	}
	a, b := x.inners[i], x.inners[i+1]
	for j := range b.n {
		a.addChild(a.n, b.firsts[j], b.counts[j], b.leaves[j], b.inners[j])
	}
	x.counts[i] += x.counts[i+1]
	x.dropChild(i + 1)
}

// Build fills the index, which must be empty, with groups, which must be
// sorted by id and distinct: full leaves, in one pass, as a restart of a
// million groups needs.
func (ix *Index) Build(groups []*Group) {
	if len(groups) == 0 {
		return
	}
	level := &inner{} // the nodes above the leaves, gathered as one
	var nodes []*inner
	for start := 0; start < len(groups); start += leafMax {
		l := &leaf{}
		for _, g := range groups[start:min(start+leafMax, len(groups))] {
			l.numbers[l.n] = g.Number
			l.n++
		}
		if level.n == innerMax {
			nodes, level = append(nodes, level), &inner{}
		}
		level.addChild(level.n, groups[start].ID, int(l.n), l, nil)
	}
	nodes = append(nodes, level)
	ix.height, ix.total = 1, len(groups)
	for len(nodes) > 1 {
		var up []*inner
		level = &inner{}
		for _, c := range nodes {
			if level.n == innerMax {
				up, level = append(up, level), &inner{}
			}
			level.addChild(level.n, c.firsts[0], c.sum(), nil, c)
		}
		nodes = append(up, level)
		ix.height++
	}
	ix.root = nodes[0]
}

// below returns how many groups have ids below id.
func (ix *Index) below(id string) int {
	n := 0
	for x, h := ix.root, ix.height; x != nil; h-- {
		i := child(x, id)
		for _, c := range x.counts[:i] {
			n += c
		}
		if h == 1 {
			return n + ix.search(x.leaves[i], id, true)
		}
		x = x.inners[i]
	}
	return n
}

// ascend yields the groups from the first with an id above after (or equal
// to it, when inclusive), in byte order of their ids, until yield returns
// false.
func (ix *Index) ascend(after string, inclusive bool, yield func(*Group) bool) {
	if ix.root == nil {
		return
	}
	path := make([]frame, 0, ix.height)
	for x, h := ix.root, ix.height; ; h-- {
		i := child(x, after)
		path = append(path, frame{x, i})
		if h == 1 {
			break
		}
		x = x.inners[i]
	}
	bottom := &path[len(path)-1]
	ix.walk(path, ix.search(bottom.x.leaves[bottom.i], after, inclusive), yield)
}

// A frame is a node on the path from the root to a leaf, and the index of
// the child the path goes down.
type frame struct {
	x *inner
	i int
}

// walk yields the groups from the at-th of the leaf path ends in, in byte
// order of their ids, until yield returns false.
func (ix *Index) walk(path []frame, at int, yield func(*Group) bool) {
	bottom := &path[len(path)-1]
	l := bottom.x.leaves[bottom.i]
	for ; ; at = 0 {
		for ; at < int(l.n); at++ {
			if !yield(ix.at(l.numbers[at])) {
				return
			}
		}
		// The next leaf: up to the lowest node with a child after the
		// path's, then down its first children.
		k := len(path) - 1
		for k >= 0 && path[k].i+1 >= path[k].x.n {
			k--
		}
		if k < 0 {
			return
		}
		path[k].i++
		for j := k; j < len(path)-1; j++ {
			path[j+1] = frame{path[j].x.inners[path[j].i], 0}
		}
		l = bottom.x.leaves[bottom.i]
	}
}

// Page returns how many groups have ids that start with opts.Prefix (and
// are in opts.Within, when set), and the page of them opts asks for, with
// their sizes: those after opts.After, at most opts.Limit (0: all). Each
// range of Within costs a walk from the root for the count, and one more
// for the page when it has ids in it.
func (ix *Index) Page(opts membership.GroupsOptions) (int, []membership.GroupSize) {
	selected := []groupids.Range{groupids.PrefixRange(opts.Prefix)}
	if opts.Within != nil {
		selected = selected[:0]
		for _, r := range opts.Within.Ranges() {
			if in, ok := r.Intersect(groupids.PrefixRange(opts.Prefix)); ok {
				selected = append(selected, in)
			}
		}
	}
	total := 0
	for _, r := range selected {
		total += ix.count(r)
	}
	var page []membership.GroupSize
	if opts.Limit > 0 {
		page = make([]membership.GroupSize, 0, min(opts.Limit, total))
	}
	for _, r := range selected {
		if opts.Limit > 0 && len(page) == opts.Limit {
			break
		}
		if r.End != "" && r.End <= opts.After {
			continue
		}
		from, inclusive := opts.After, false
		if r.Start > from {
			from, inclusive = r.Start, true
		}
		ix.ascend(from, inclusive, func(g *Group) bool {
			if r.End != "" && g.ID >= r.End || opts.Limit > 0 && len(page) == opts.Limit {
				return false
			}
			page = append(page, membership.GroupSize{ID: g.ID, Members: g.Members.Len(), Subgroups: g.Subgroups()})
			return true
		})
	}
	return total, page
}

// count returns how many groups have ids in r.
func (ix *Index) count(r groupids.Range) int {
	n := ix.total
	if r.End != "" {
		n = ix.below(r.End)
	}
	return n - ix.below(r.Start)
}

// Len returns how many groups the index holds.
func (ix *Index) Len() int { return ix.total }

// From yields the groups from the offset-th in byte order of their ids (0
// the first), until yield returns false: finding the first is a walk from
// the root by the counts of the children, O(log n), however far it is.
func (ix *Index) From(offset int, yield func(*Group) bool) {
	if ix.root == nil || offset >= ix.total {
		return
	}
	path := make([]frame, 0, ix.height)
	for x, h := ix.root, ix.height; ; h-- {
		i := 0
		for ; i < x.n-1 && offset >= x.counts[i]; i++ {
			offset -= x.counts[i]
		}
		path = append(path, frame{x, i})
		if h == 1 {
			break
		}
		x = x.inners[i]
	}
	ix.walk(path, offset, yield)
}
