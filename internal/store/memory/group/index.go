package group

import (
	"hash/maphash"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/groupids"
)

// The Index orders the groups that have members by id, for Store.Groups:
// a treap (a binary search tree kept balanced by random
// priorities, in heap order), threaded through the groups themselves, each
// node counting the groups of its subtree. Finding a page, or how many ids
// fall in a range, is a walk from the root: O(log n) expected, with no
// scan or sort of the groups.

// Index is the root of the treap, with what it needs.
type Index struct {
	seed maphash.Seed
	root *Group
}

// NewIndex returns an empty Index whose priorities are hashes of ids with
// seed.
func NewIndex(seed maphash.Seed) Index { return Index{seed: seed} }

// node are a group's links in the Index.
type node struct {
	left, right *Group
	priority    uint64
	count       int // groups in this subtree, this one included
}

func (ix *Index) Insert(g *Group) {
	g.node = node{priority: maphash.String(ix.seed, g.ID), count: 1}
	ix.root = treapInsert(ix.root, g)
}

// Build fills the index, which must be empty, with groups, which must be
// sorted by id and distinct: in one pass (a stack of the rightmost path),
// not a search from the root for each, as a restart of a million groups
// needs. It is the treap the inserts would have built.
func (ix *Index) Build(groups []*Group) {
	var path []*Group // the rightmost path, from the root down
	for _, g := range groups {
		g.node = node{priority: maphash.String(ix.seed, g.ID), count: 1}
		var below *Group
		for len(path) > 0 && path[len(path)-1].node.priority < g.node.priority {
			below, path = path[len(path)-1], path[:len(path)-1]
		}
		g.node.left = below
		if len(path) > 0 {
			path[len(path)-1].node.right = g
		}
		path = append(path, g)
	}
	if len(path) > 0 {
		ix.root = path[0]
		recountAll(ix.root)
	}
}

// recountAll sets the count of every node of t, and returns t's.
func recountAll(t *Group) int {
	if t == nil {
		return 0
	}
	t.node.count = 1 + recountAll(t.node.left) + recountAll(t.node.right)
	return t.node.count
}

func (ix *Index) Remove(id string) { ix.root = treapRemove(ix.root, id) }

func countOf(t *Group) int {
	if t == nil {
		return 0
	}
	return t.node.count
}

func (t *Group) recount() { t.node.count = 1 + countOf(t.node.left) + countOf(t.node.right) }

func treapInsert(t, g *Group) *Group {
	if t == nil {
		return g
	}
	if g.node.priority > t.node.priority {
		g.node.left, g.node.right = treapSplit(t, g.ID)
		g.recount()
		return g
	}
	if g.ID < t.ID {
		t.node.left = treapInsert(t.node.left, g)
	} else {
		t.node.right = treapInsert(t.node.right, g)
	}
	t.recount()
	return t
}

// treapSplit splits t into the groups with ids below id and the rest.
func treapSplit(t *Group, id string) (below, rest *Group) {
	if t == nil {
		return nil, nil
	}
	if t.ID < id {
		t.node.right, rest = treapSplit(t.node.right, id)
		t.recount()
		return t, rest
	}
	below, t.node.left = treapSplit(t.node.left, id)
	t.recount()
	return below, t
}

// treapMerge joins a and b, every id of a being below every id of b.
func treapMerge(a, b *Group) *Group {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.node.priority > b.node.priority:
		a.node.right = treapMerge(a.node.right, b)
		a.recount()
		return a
	default:
		b.node.left = treapMerge(a, b.node.left)
		b.recount()
		return b
	}
}

func treapRemove(t *Group, id string) *Group {
	if t == nil {
		return nil
	}
	switch {
	case id < t.ID:
		t.node.left = treapRemove(t.node.left, id)
	case id > t.ID:
		t.node.right = treapRemove(t.node.right, id)
	default:
		merged := treapMerge(t.node.left, t.node.right)
		t.node = node{}
		return merged
	}
	t.recount()
	return t
}

// below returns how many groups have ids below id.
func (ix *Index) below(id string) int {
	n := 0
	for t := ix.root; t != nil; {
		if t.ID < id {
			n += countOf(t.node.left) + 1
			t = t.node.right
		} else {
			t = t.node.left
		}
	}
	return n
}

// ascend yields the groups from the first with an id above after (or equal
// to it, when inclusive), in byte order of their ids, until yield returns
// false.
func (ix *Index) ascend(after string, inclusive bool, yield func(*Group) bool) {
	var stack []*Group
	for t := ix.root; t != nil; {
		if t.ID > after || inclusive && t.ID == after {
			stack = append(stack, t)
			t = t.node.left
		} else {
			t = t.node.right
		}
	}
	for len(stack) > 0 {
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !yield(t) {
			return
		}
		for c := t.node.right; c != nil; c = c.node.left {
			stack = append(stack, c)
		}
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
			page = append(page, membership.GroupSize{ID: g.ID, Members: g.Members.Len(), Subgroups: g.Subgroups})
			return true
		})
	}
	return total, page
}

// count returns how many groups have ids in r.
func (ix *Index) count(r groupids.Range) int {
	n := countOf(ix.root)
	if r.End != "" {
		n = ix.below(r.End)
	}
	return n - ix.below(r.Start)
}

// Len returns how many groups the index holds.
func (ix *Index) Len() int { return countOf(ix.root) }

// From yields the groups from the offset-th in byte order of their ids (0
// the first), until yield returns false: finding the first is a walk from
// the root, O(log n), however far it is.
func (ix *Index) From(offset int, yield func(*Group) bool) {
	var stack []*Group
	for t := ix.root; t != nil; {
		left := countOf(t.node.left)
		switch {
		case offset < left:
			stack = append(stack, t)
			t = t.node.left
		case offset == left:
			stack = append(stack, t)
			t = nil
		default:
			offset -= left + 1
			t = t.node.right
		}
	}
	for len(stack) > 0 {
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !yield(t) {
			return
		}
		for c := t.node.right; c != nil; c = c.node.left {
			stack = append(stack, c)
		}
	}
}
