package memory

import (
	"sync"

	"example.com/groupmembership/membership"
)

// The reverse index maps users to the groups they are in, for
// Store.UserGroups. Group ids are interned as numbers (groupNumbers), and
// every membership is one (user, group number) pair in the reverse shard of
// its uid, kept sorted in chunks: a user's pairs lie together, and adding or
// removing one never looks at a group id. The ids are looked up, and sorted,
// only when a user's groups are listed.
//
// A uid's shard is the uid modulo the number of shards, and its pairs hold
// the quotient (reverseKey): the uids of one shard are that many times
// closer together as quotients, so their distances take fewer bytes.

// reverseShard holds the pairs of the uids that hash to it.
type reverseShard struct {
	// mu guards pairs. It is taken while a group shard's lock is held, never
	// the other way round, and never together with groupNumbers.mu by a
	// writer.
	mu    sync.RWMutex
	pairs pairSet
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

// maxPairChunkBytes is the most bytes of deltas one chunk of pairs holds:
// fewer than a group's, because inserts land anywhere in the reverse index.
const maxPairChunkBytes = 256

// pairSet is the sorted set of a reverse shard's pairs (packed.go): a
// user's pairs lie together, in group number order.
type pairSet struct {
	packedSet
}

// fill fills an empty set from ps, which must be sorted and distinct.
func (s *pairSet) fill(ps []pair) {
	s.packedSet.fill(ps, maxPairChunkBytes*3/4)
}

// add adds p, and reports whether it is the first pair of its user: the
// pairs beside where it goes tell, with no second search.
func (s *pairSet) add(p pair) (firstOfUser bool) {
	added, nb := s.packedSet.add(p, maxPairChunkBytes)
	return added && nb.aloneIn(p.user)
}

// remove removes p, and reports whether it was the last pair of its user.
func (s *pairSet) remove(p pair) (lastOfUser bool) {
	removed, nb := s.packedSet.remove(p, maxPairChunkBytes)
	return removed && nb.aloneIn(p.user)
}

// aloneIn reports whether neither neighbour is of user.
func (nb neighbours) aloneIn(user membership.UID) bool {
	return !(nb.hasPrev && nb.prev.user == user) && !(nb.hasNext && nb.next.user == user)
}

// hasUser reports whether user has a pair: whether the user is in a group.
func (s *pairSet) hasUser(user membership.UID) bool {
	found := false
	s.eachGroupOf(user, func(uint32) { found = true })
	return found
}

// eachGroupOf calls fn with each group number of user, in number order.
func (s *pairSet) eachGroupOf(user membership.UID, fn func(n uint32)) {
	if len(s.chunks) == 0 {
		return
	}
	for i := s.chunkFor(pair{user: user}); i < len(s.chunks); i++ {
		more := s.chunks[i].each(func(p pair) bool {
			if p.user == user {
				fn(p.group)
			}
			return p.user <= user
		})
		if !more {
			return
		}
	}
}
