package store

import (
	"cmp"
	"slices"
	"sort"
	"sync"

	"example.com/groupmembership/membership"
)

// The reverse index maps users to the groups they are in, for
// Store.UserGroups. Group ids are interned as numbers (groupNumbers), and
// every membership is one (uid, group number) pair in the reverse shard of
// its uid, kept sorted in chunks: a user's pairs lie together, and adding or
// removing one never looks at a group id. The ids are looked up, and sorted,
// only when a user's groups are listed.

// reverseShard holds the pairs of the uids that hash to it.
type reverseShard struct {
	// mu guards pairs. It is taken while a group shard's lock is held, never
	// the other way round, and never together with groupNumbers.mu by a
	// writer.
	mu    sync.RWMutex
	pairs pairSet
}

type pair struct {
	uid   membership.UID
	group uint32
}

func comparePairs(a, b pair) int {
	if c := cmp.Compare(a.uid, b.uid); c != 0 {
		return c
	}
	return cmp.Compare(a.group, b.group)
}

// groupNumbers interns group ids as numbers.
type groupNumbers struct {
	// mu guards the fields below.
	mu      sync.RWMutex
	names   []string          // number to group id; "" for a free number
	numbers map[string]uint32 // group id to number
	free    []uint32          // numbers of deleted groups, for reuse
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
	g.numbers[groupID] = n
	return n
}

// release frees the number of a group that has no members left: no pair
// refers to it any more.
func (g *groupNumbers) release(groupID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n, ok := g.numbers[groupID]; ok {
		delete(g.numbers, groupID)
		g.names[n] = ""
		g.free = append(g.free, n)
	}
}

// maxPairChunk is the most pairs one chunk holds: smaller than maxChunk,
// because pairs are twice the size of uids and inserts land anywhere.
const maxPairChunk = 128

// pairSet is a sorted set of pairs in chunks, like members.
type pairSet struct {
	chunks [][]pair // non-empty, ordered, at most maxPairChunk pairs each
}

// position returns where p is or would go: chunk i, index j.
func (s *pairSet) position(p pair) (i, j int) {
	i = sort.Search(len(s.chunks), func(i int) bool {
		c := s.chunks[i]
		return comparePairs(c[len(c)-1], p) >= 0
	})
	if i == len(s.chunks) {
		return i - 1, len(s.chunks[i-1]) // after everything
	}
	j, _ = slices.BinarySearchFunc(s.chunks[i], p, comparePairs)
	return i, j
}

// fill fills an empty set from ps, which must be sorted and distinct.
func (s *pairSet) fill(ps []pair) {
	for len(ps) > 0 {
		n := min(len(ps), maxPairChunk*3/4)
		s.chunks = append(s.chunks, slices.Clone(ps[:n]))
		ps = ps[n:]
	}
}

// add adds p, and reports whether it is the first pair of its uid: the
// pairs beside where it goes tell, with no second search.
func (s *pairSet) add(p pair) (firstOfUID bool) {
	if len(s.chunks) == 0 {
		s.chunks = [][]pair{{p}}
		return true
	}
	i, j := s.position(p)
	c := s.chunks[i]
	if j < len(c) && c[j] == p {
		return false
	}
	firstOfUID = !s.uidAround(i, j, p.uid)
	s.chunks = insertAt(s.chunks, i, j, p, maxPairChunk)
	return firstOfUID
}

// uidAround reports whether the pair before position (i, j) or the one at
// it has uid.
func (s *pairSet) uidAround(i, j int, uid membership.UID) bool {
	c := s.chunks[i]
	switch {
	case j > 0 && c[j-1].uid == uid:
		return true
	case j == 0 && i > 0 && s.chunks[i-1][len(s.chunks[i-1])-1].uid == uid:
		return true
	case j < len(c) && c[j].uid == uid:
		return true
	case j == len(c) && i+1 < len(s.chunks) && s.chunks[i+1][0].uid == uid:
		return true
	}
	return false
}

// remove removes p, and reports whether it was the last pair of its uid.
func (s *pairSet) remove(p pair) (lastOfUID bool) {
	if len(s.chunks) == 0 {
		return false
	}
	i, j := s.position(p)
	c := s.chunks[i]
	if j == len(c) || c[j] != p {
		return false
	}
	// The pairs beside p, once it is gone: before it, and after it.
	before := j > 0 && c[j-1].uid == p.uid || j == 0 && i > 0 && s.chunks[i-1][len(s.chunks[i-1])-1].uid == p.uid
	after := j+1 < len(c) && c[j+1].uid == p.uid || j+1 == len(c) && i+1 < len(s.chunks) && s.chunks[i+1][0].uid == p.uid
	s.chunks = deleteAt(s.chunks, i, j, maxPairChunk)
	return !before && !after
}

// hasUID reports whether uid has a pair: whether the user is in a group.
func (s *pairSet) hasUID(uid membership.UID) bool {
	if len(s.chunks) == 0 {
		return false
	}
	i, j := s.position(pair{uid: uid}) // the first pair of uid, if any
	c := s.chunks[i]
	if j == len(c) {
		if i+1 == len(s.chunks) {
			return false
		}
		c, j = s.chunks[i+1], 0
	}
	return c[j].uid == uid
}

// eachGroupOf calls fn with each group number of uid, in number order.
func (s *pairSet) eachGroupOf(uid membership.UID, fn func(n uint32)) {
	if len(s.chunks) == 0 {
		return
	}
	i, j := s.position(pair{uid: uid})
	for ; i < len(s.chunks); i, j = i+1, 0 {
		c := s.chunks[i]
		for ; j < len(c); j++ {
			if c[j].uid != uid {
				return
			}
			fn(c[j].group)
		}
	}
}
