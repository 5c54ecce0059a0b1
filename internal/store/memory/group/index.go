package group

import (
	"hash/maphash"

	"example.com/groupmembership/membership"
)

// The Index orders the groups that have members by id, for Store.Groups:
// a treap (a binary search tree kept balanced by random
// priorities, in heap order), threaded through the groups themselves, each
// node counting the groups of its subtree. Finding a page, or how many ids
// fall in a range, is a walk from the root: O(log n) expected, with no
// scan or sort of the groups. A node links to its children by their
// numbers (Tables.At finds them), and its priority is a hash of its
// number: a link and a count take twelve bytes a group.

// Index is the root of the treap, with what it needs.
type Index struct {
	seed uint64
	root link
	// at returns the group of a number.
	at func(uint32) *Group
}

// NewIndex returns an empty Index of the groups at returns by number,
// whose priorities are hashes of their numbers with seed.
func NewIndex(seed maphash.Seed, at func(uint32) *Group) Index {
	return Index{seed: maphash.Comparable(seed, 0), at: at}
}

// link is a group's number plus one; 0 is no group.
type link uint32

// node are a group's links in the Index.
type node struct {
	left, right link
	count       uint32 // groups in this subtree, this one included
}

// group returns the group of l, nil for none.
func (ix *Index) group(l link) *Group {
	if l == 0 {
		return nil
	}
	return ix.at(uint32(l - 1))
}

func linkOf(g *Group) link {
	if g == nil {
		return 0
	}
	return link(g.Number + 1)
}

// priority returns g's priority: a hash (splitmix64's finalizer) of its
// number and the seed, which no client can foresee.
func (ix *Index) priority(g *Group) uint64 {
	z := uint64(g.Number) ^ ix.seed
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (ix *Index) Insert(g *Group) {
	g.node = node{count: 1}
	ix.root = linkOf(ix.insert(ix.group(ix.root), g, ix.priority(g)))
}

// Build fills the index, which must be empty, with groups, which must be
// sorted by id and distinct: in one pass (a stack of the rightmost path),
// not a search from the root for each, as a restart of a million groups
// needs. It is the treap the inserts would have built.
func (ix *Index) Build(groups []*Group) {
	type entry struct {
		g        *Group
		priority uint64
	}
	var path []entry // the rightmost path, from the root down
	for _, g := range groups {
		g.node = node{count: 1}
		p := ix.priority(g)
		var below *Group
		for len(path) > 0 && path[len(path)-1].priority < p {
			below, path = path[len(path)-1].g, path[:len(path)-1]
		}
		g.node.left = linkOf(below)
		if len(path) > 0 {
			path[len(path)-1].g.node.right = linkOf(g)
		}
		path = append(path, entry{g, p})
	}
	if len(path) > 0 {
		ix.root = linkOf(path[0].g)
		ix.recountAll(path[0].g)
	}
}

// recountAll sets the count of every node of t, and returns t's.
func (ix *Index) recountAll(t *Group) uint32 {
	if t == nil {
		return 0
	}
	t.node.count = 1 + ix.recountAll(ix.group(t.node.left)) + ix.recountAll(ix.group(t.node.right))
	return t.node.count
}

// Remove removes g, which the index holds.
func (ix *Index) Remove(g *Group) { ix.root = linkOf(ix.remove(ix.group(ix.root), g.ID)) }

func (ix *Index) countOf(l link) uint32 {
	if l == 0 {
		return 0
	}
	return ix.group(l).node.count
}

func (ix *Index) recount(t *Group) {
	t.node.count = 1 + ix.countOf(t.node.left) + ix.countOf(t.node.right)
}

func (ix *Index) insert(t, g *Group, priority uint64) *Group {
	if t == nil {
		return g
	}
	if priority > ix.priority(t) {
		left, right := ix.split(t, g.ID)
		g.node.left, g.node.right = linkOf(left), linkOf(right)
		ix.recount(g)
		return g
	}
	if g.ID < t.ID {
		t.node.left = linkOf(ix.insert(ix.group(t.node.left), g, priority))
	} else {
		t.node.right = linkOf(ix.insert(ix.group(t.node.right), g, priority))
	}
	ix.recount(t)
	return t
}

// split splits t into the groups with ids below id and the rest.
func (ix *Index) split(t *Group, id string) (below, rest *Group) {
	if t == nil {
		return nil, nil
	}
	if t.ID < id {
		right, rest := ix.split(ix.group(t.node.right), id)
		t.node.right = linkOf(right)
		ix.recount(t)
		return t, rest
	}
	below, left := ix.split(ix.group(t.node.left), id)
	t.node.left = linkOf(left)
	ix.recount(t)
	return below, t
}

// merge joins a and b, every id of a being below every id of b.
func (ix *Index) merge(a, b *Group) *Group {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case ix.priority(a) > ix.priority(b):
		a.node.right = linkOf(ix.merge(ix.group(a.node.right), b))
		ix.recount(a)
		return a
	default:
		b.node.left = linkOf(ix.merge(a, ix.group(b.node.left)))
		ix.recount(b)
		return b
	}
}

func (ix *Index) remove(t *Group, id string) *Group {
	if t == nil {
		return nil
	}
	switch {
	case id < t.ID:
		t.node.left = linkOf(ix.remove(ix.group(t.node.left), id))
	case id > t.ID:
		t.node.right = linkOf(ix.remove(ix.group(t.node.right), id))
	default:
		merged := ix.merge(ix.group(t.node.left), ix.group(t.node.right))
		t.node = node{}
		return merged
	}
	ix.recount(t)
	return t
}

// below returns how many groups have ids below id.
func (ix *Index) below(id string) int {
	n := 0
	for t := ix.group(ix.root); t != nil; {
		if t.ID < id {
			n += int(ix.countOf(t.node.left)) + 1
			t = ix.group(t.node.right)
		} else {
			t = ix.group(t.node.left)
		}
	}
	return n
}

// ascend yields the groups from the first with an id above after (or equal
// to it, when inclusive), in byte order of their ids, until yield returns
// false.
func (ix *Index) ascend(after string, inclusive bool, yield func(*Group) bool) {
	var stack []*Group
	for t := ix.group(ix.root); t != nil; {
		if t.ID > after || inclusive && t.ID == after {
			stack = append(stack, t)
			t = ix.group(t.node.left)
		} else {
			t = ix.group(t.node.right)
		}
	}
	for len(stack) > 0 {
		t := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !yield(t) {
			return
		}
		for c := ix.group(t.node.right); c != nil; c = ix.group(c.node.left) {
			stack = append(stack, c)
		}
	}
}

// Page returns how many groups have ids that start with opts.Prefix, and
// the page of them opts asks for, with their sizes: those after opts.After,
// at most opts.Limit (0: all).
func (ix *Index) Page(opts membership.GroupsOptions) (int, []membership.GroupSize) {
	end, bounded := prefixEnd(opts.Prefix)
	total := int(ix.countOf(ix.root))
	if bounded {
		total = ix.below(end)
	}
	total -= ix.below(opts.Prefix)
	from, inclusive := opts.After, false
	if opts.Prefix > from {
		from, inclusive = opts.Prefix, true
	}
	var page []membership.GroupSize
	if opts.Limit > 0 {
		page = make([]membership.GroupSize, 0, min(opts.Limit, total))
	}
	ix.ascend(from, inclusive, func(g *Group) bool {
		if bounded && g.ID >= end || opts.Limit > 0 && len(page) == opts.Limit {
			return false
		}
		page = append(page, membership.GroupSize{ID: g.ID, Members: g.Members.Len(), Subgroups: g.Subgroups})
		return true
	})
	return total, page
}

// prefixEnd returns the smallest string above every string that starts
// with prefix, and false when there is none (prefix is all 0xff bytes).
func prefixEnd(prefix string) (string, bool) {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}
