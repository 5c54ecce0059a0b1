package memory

import "hash/maphash"

// The group index orders the groups that have members by id, for
// Store.Groups: a treap (a binary search tree kept balanced by random
// priorities, in heap order), threaded through the groups themselves, each
// node counting the groups of its subtree. Finding a page, or how many ids
// fall in a range, is a walk from the root: O(log n) expected, with no
// scan or sort of the groups.

// groupIndex is the root of the treap, with what it needs.
type groupIndex struct {
	seed maphash.Seed
	root *group
}

// indexNode are a group's links in the group index.
type indexNode struct {
	left, right *group
	priority    uint64
	count       int // groups in this subtree, this one included
}

func (ix *groupIndex) insert(g *group) {
	g.node = indexNode{priority: maphash.String(ix.seed, g.id), count: 1}
	ix.root = treapInsert(ix.root, g)
}

// build fills the index, which must be empty, with groups, which must be
// sorted by id and distinct: in one pass (a stack of the rightmost path),
// not a search from the root for each, as a restart of a million groups
// needs. It is the treap the inserts would have built.
func (ix *groupIndex) build(groups []*group) {
	var path []*group // the rightmost path, from the root down
	for _, g := range groups {
		g.node = indexNode{priority: maphash.String(ix.seed, g.id), count: 1}
		var below *group
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
func recountAll(t *group) int {
	if t == nil {
		return 0
	}
	t.node.count = 1 + recountAll(t.node.left) + recountAll(t.node.right)
	return t.node.count
}

func (ix *groupIndex) remove(id string) { ix.root = treapRemove(ix.root, id) }

func countOf(t *group) int {
	if t == nil {
		return 0
	}
	return t.node.count
}

func (t *group) recount() { t.node.count = 1 + countOf(t.node.left) + countOf(t.node.right) }

func treapInsert(t, g *group) *group {
	if t == nil {
		return g
	}
	if g.node.priority > t.node.priority {
		g.node.left, g.node.right = treapSplit(t, g.id)
		g.recount()
		return g
	}
	if g.id < t.id {
		t.node.left = treapInsert(t.node.left, g)
	} else {
		t.node.right = treapInsert(t.node.right, g)
	}
	t.recount()
	return t
}

// treapSplit splits t into the groups with ids below id and the rest.
func treapSplit(t *group, id string) (below, rest *group) {
	if t == nil {
		return nil, nil
	}
	if t.id < id {
		t.node.right, rest = treapSplit(t.node.right, id)
		t.recount()
		return t, rest
	}
	below, t.node.left = treapSplit(t.node.left, id)
	t.recount()
	return below, t
}

// treapMerge joins a and b, every id of a being below every id of b.
func treapMerge(a, b *group) *group {
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

func treapRemove(t *group, id string) *group {
	if t == nil {
		return nil
	}
	switch {
	case id < t.id:
		t.node.left = treapRemove(t.node.left, id)
	case id > t.id:
		t.node.right = treapRemove(t.node.right, id)
	default:
		merged := treapMerge(t.node.left, t.node.right)
		t.node = indexNode{}
		return merged
	}
	t.recount()
	return t
}

// below returns how many groups have ids below id.
func (ix *groupIndex) below(id string) int {
	n := 0
	for t := ix.root; t != nil; {
		if t.id < id {
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
func (ix *groupIndex) ascend(after string, inclusive bool, yield func(*group) bool) {
	var stack []*group
	for t := ix.root; t != nil; {
		if t.id > after || inclusive && t.id == after {
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
