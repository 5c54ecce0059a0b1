package memory

import (
	"cmp"
	"encoding/binary"
	"slices"
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

// pair is one membership in a reverse shard: user is the uid divided by
// the number of shards, group the group's number.
type pair struct {
	user  membership.UID
	group uint32
}

func comparePairs(a, b pair) int {
	if c := cmp.Compare(a.user, b.user); c != 0 {
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

// maxPairChunkBytes is the most bytes one chunk of pairs holds: fewer than a
// group's, because inserts land anywhere in the reverse index.
const maxPairChunkBytes = 256

// pairSet is a sorted set of pairs in delta-encoded chunks, like members.
type pairSet struct {
	// chunks are ordered: every pair of chunks[i] is below
	// chunks[i+1].first.
	chunks []chunk[pair]
}

// pairCodec encodes a pair after the one before it as two uvarints: the
// distance between their uids, then the distance between their groups when
// the uid is the same, or the group number when it is not.
type pairCodec struct{}

func (pairCodec) put(buf []byte, prev, v pair) []byte {
	buf = binary.AppendUvarint(buf, uint64(v.user-prev.user))
	if v.user == prev.user {
		return binary.AppendUvarint(buf, uint64(v.group-prev.group))
	}
	return binary.AppendUvarint(buf, uint64(v.group))
}

func (pairCodec) next(rest []byte, off int, prev pair) (pair, int) {
	d, off := uvarint(rest, off)
	g, off := uvarint(rest, off)
	if d == 0 {
		return pair{user: prev.user, group: prev.group + uint32(g)}, off
	}
	return pair{user: prev.user + membership.UID(d), group: uint32(g)}, off
}

// chunkFor returns the index of the chunk that holds p or would: the last
// whose first pair is <= p, or the first chunk. There must be one.
func (s *pairSet) chunkFor(p pair) int {
	lo, hi := 1, len(s.chunks)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if comparePairs(s.chunks[mid].first, p) <= 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}

// findPair scans c for p, which is above c.first: off is where the first
// pair >= p is encoded (len(c.rest) when none is), prev the pair before it,
// and at and end that pair and the offset after it (end == off when none).
//
// The group of prev is exact only when prev is of p's user (or is
// c.first): the groups of the pairs of users before p's are skipped, not
// decoded, as no caller needs them. A pair is encoded after prev with its
// group in full unless prev is of the same user, so that re-encoding a
// pair after prev reads prev's group only when it is exact.
func findPair(c *chunk[pair], p pair) (off int, prev, at pair, end int) {
	prev = c.first
	rest := c.rest
	for off < len(rest) {
		// pairCodec.next, by hand: this loop is every add's and remove's.
		d, e := uvarint(rest, off)
		user := prev.user + membership.UID(d)
		if user < p.user {
			for rest[e] >= 0x80 {
				e++
			}
			prev, off = pair{user: user}, e+1
			continue
		}
		g, e := uvarint(rest, e)
		if d == 0 {
			at = pair{user: user, group: prev.group + uint32(g)}
		} else {
			at = pair{user: user, group: uint32(g)}
		}
		if at.user > p.user || at.group >= p.group {
			return off, prev, at, e
		}
		prev, off = at, e
	}
	return off, prev, pair{}, off
}

// fill fills an empty set from ps, which must be sorted and distinct.
func (s *pairSet) fill(ps []pair) {
	s.chunks = fillChunks[pair, pairCodec](ps, maxPairChunkBytes*3/4)
}

// add adds p, and reports whether it is the first pair of its user: the
// pairs beside where it goes tell, with no second search.
func (s *pairSet) add(p pair) (firstOfUser bool) {
	if len(s.chunks) == 0 {
		s.chunks = []chunk[pair]{{first: p}}
		return true
	}
	var codec pairCodec
	i := s.chunkFor(p)
	c := &s.chunks[i]
	var buf [2 * maxEncoded]byte
	switch order := comparePairs(p, c.first); {
	case order == 0:
		return false
	case order < 0: // a new smallest pair
		firstOfUser = p.user != c.first.user
		c.rest = splice(c.rest, 0, 0, codec.put(buf[:0], p, c.first))
		c.first = p
	default:
		off, prev, at, end := findPair(c, p)
		if end > off && at == p {
			return false
		}
		repl := codec.put(buf[:0], prev, p)
		next, hasNext := at, end > off
		if hasNext {
			repl = codec.put(repl, p, at)
		} else if i+1 < len(s.chunks) {
			next, hasNext = s.chunks[i+1].first, true
		}
		firstOfUser = prev.user != p.user && !(hasNext && next.user == p.user)
		c.rest = splice(c.rest, off, end, repl)
	}
	if len(c.rest) > maxPairChunkBytes {
		s.chunks = splitChunk[pair, pairCodec](s.chunks, i)
	}
	return firstOfUser
}

// remove removes p, and reports whether it was the last pair of its user.
func (s *pairSet) remove(p pair) (lastOfUser bool) {
	if len(s.chunks) == 0 {
		return false
	}
	var codec pairCodec
	i := s.chunkFor(p)
	c := &s.chunks[i]
	// The pairs beside p, once it is gone: before it, and after it.
	var prev, next pair
	hasPrev, hasNext := true, true
	switch order := comparePairs(p, c.first); {
	case order < 0:
		return false
	case order == 0:
		if hasPrev = i > 0; hasPrev {
			prev = lastOf[pair, pairCodec](s.chunks[i-1])
		}
		if len(c.rest) == 0 {
			if hasNext = i+1 < len(s.chunks); hasNext {
				next = s.chunks[i+1].first
			}
			s.chunks = slices.Delete(s.chunks, i, i+1)
			return !(hasPrev && prev.user == p.user) && !(hasNext && next.user == p.user)
		}
		// The next pair becomes the first; the one after it is encoded
		// from it, and stays as it is.
		var end int
		next, end = codec.next(c.rest, 0, c.first)
		c.first = next
		c.rest = splice(c.rest, 0, end, nil)
	default:
		off, before, at, end := findPair(c, p)
		if end == off || at != p {
			return false
		}
		prev = before
		var repl []byte
		if end < len(c.rest) {
			next, end = codec.next(c.rest, end, at)
			var buf [maxEncoded]byte
			repl = codec.put(buf[:0], prev, next)
		} else if hasNext = i+1 < len(s.chunks); hasNext {
			next = s.chunks[i+1].first
		}
		c.rest = splice(c.rest, off, end, repl)
	}
	s.chunks = thinChunk[pair, pairCodec](s.chunks, i, maxPairChunkBytes)
	return !(hasPrev && prev.user == p.user) && !(hasNext && next.user == p.user)
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
	var codec pairCodec
	for i := s.chunkFor(pair{user: user}); i < len(s.chunks); i++ {
		c := &s.chunks[i]
		p := c.first
		for off := 0; ; p, off = codec.next(c.rest, off, p) {
			if p.user > user {
				return
			}
			if p.user == user {
				fn(p.group)
			}
			if off == len(c.rest) {
				break
			}
		}
	}
}
