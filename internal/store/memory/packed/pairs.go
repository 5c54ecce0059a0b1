package packed

import (
	"example.com/groupmembership/membership"
)

// maxPairChunkBytes is the most bytes of deltas one chunk of pairs holds:
// fewer than a group's, because inserts land anywhere in the reverse index.
const maxPairChunkBytes = 256

// Pairs is the sorted set of a reverse shard's pairs: a user's pairs lie
// together, in group number order.
type Pairs struct {
	set
}

// Fill fills an empty set from ps, which must be sorted and distinct.
func (s *Pairs) Fill(ps []Pair) {
	s.set.fill(ps, maxPairChunkBytes*3/4)
}

// Add adds p, and reports whether it is the first pair of its user: the
// pairs beside where it goes tell, with no second search.
func (s *Pairs) Add(p Pair) (firstOfUser bool) {
	added, nb := s.set.add(p, maxPairChunkBytes)
	return added && nb.aloneIn(p.User)
}

// Remove removes p, and reports whether it was the last pair of its user.
func (s *Pairs) Remove(p Pair) (lastOfUser bool) {
	removed, nb := s.set.remove(p, maxPairChunkBytes)
	return removed && nb.aloneIn(p.User)
}

// aloneIn reports whether neither neighbour is of user.
func (nb neighbours) aloneIn(user membership.UID) bool {
	return !(nb.hasPrev && nb.prev.User == user) && !(nb.hasNext && nb.next.User == user)
}

// HasUser reports whether user has a pair: whether the user is in a group.
func (s *Pairs) HasUser(user membership.UID) bool {
	found := false
	s.EachFrom(user, func(p Pair) bool {
		found = p.User == user
		return false
	})
	return found
}

// EachFrom calls yield with the pairs from the first of user on, in
// order, until it returns false.
func (s *Pairs) EachFrom(user membership.UID, yield func(Pair) bool) {
	if len(s.chunks) == 0 {
		return
	}
	for i := s.chunkFor(Pair{User: user}); i < len(s.chunks); i++ {
		more := s.chunks[i].each(func(p Pair) bool {
			return p.User < user || yield(p)
		})
		if !more {
			return
		}
	}
}

// LastUser returns the user of the last pair, and false when there is
// none.
func (s *Pairs) LastUser() (membership.UID, bool) {
	if len(s.chunks) == 0 {
		return 0, false
	}
	return s.chunks[len(s.chunks)-1].last().User, true
}
