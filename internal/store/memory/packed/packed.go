// Package packed keeps the sorted sets on the path of every add and
// remove of the in-memory index: a group's Members (Members) and a reverse
// index shard's (user, group number) pairs (Pairs). Both are sets of pairs
// (a group's Members are pairs of group 0), kept in ordered chunks of
// fixed-width deltas: a chunk holds its first pair in full, and each other
// one as the difference of its user from the one before, shifted left by g
// bits, with its group in those g bits; every delta of a chunk takes the
// same w bytes, the fewest its largest needs. Finding a pair is a binary
// search over the chunks' first pairs and then a scan of one chunk, and
// the scan reads a delta with one load and a mask, with no branch per byte
// to mispredict, as a varint's would on every delta of a random set.
// Sorted uids are close to each other, so a member of a random group of a
// thousand uids below a billion takes three bytes, and a reverse pair of a
// thousand groups three. A group of a few members keeps them bit-packed
// instead, in its Members or in 64 bytes beside it, with no chunk
// (inline.go).
//
// A chunk holds at most limit bytes of deltas and limit/2 deltas (its set's
// limit): dense uids, a byte a delta, would otherwise make a chunk of
// hundreds of deltas, and a scan of hundreds for each add and remove.
//
// A chunk keeps seven bytes of room after its deltas, so that the last one
// too is read with an eight-byte load.
//
// The sets have no lock: the index's locks guard them (see package memory).
package packed

import (
	"encoding/binary"
	"math/bits"
	"slices"

	"example.com/groupmembership/internal/store/memory/sortedset"
	"example.com/groupmembership/membership"
)

// chunk is a run of a set: first, then the deltas of the pairs after it,
// each w bytes, little-endian.
type chunk struct {
	first Pair
	// w is the bytes of each delta, g the bits of a delta that hold the
	// group. w is 0 while rest is empty.
	w, g uint8
	// rest holds the deltas; cap(rest) >= len(rest)+loadSlack when it is
	// not empty.
	rest []byte
}

// loadSlack is the room a chunk keeps after its deltas for an eight-byte
// load of its last one.
const loadSlack = 7

// set is a sorted set of pairs in packed chunks.
type set struct {
	// chunks are ordered: every pair of chunks[i] is below
	// chunks[i+1].first.
	chunks []chunk
}

// Pair is one element of a set. In the reverse index, User is the uid
// divided by the number of shards, Group the group's number; in a group's
// Members, User is the uid and Group is 0.
type Pair struct {
	User  membership.UID
	Group uint32
}

// ComparePairs orders pairs by user, then group.
func ComparePairs(a, b Pair) int {
	switch {
	case a.User < b.User:
		return -1
	case a.User > b.User:
		return 1
	case a.Group < b.Group:
		return -1
	case a.Group > b.Group:
		return 1
	}
	return 0
}

// len returns how many deltas c holds.
func (c *chunk) len() int {
	if c.w == 0 {
		return 0
	}
	return len(c.rest) / int(c.w)
}

// delta returns the delta that encodes v after prev in c, and whether c's
// width and group bits can hold it.
func (c *chunk) delta(prev, v Pair) (uint64, bool) {
	d := uint64(v.User - prev.User)
	if c.w == 0 || bits.Len32(v.Group) > int(c.g) || bits.Len64(d)+int(c.g) > 8*int(c.w) {
		return 0, false
	}
	return d<<c.g | uint64(v.Group), true
}

// at decodes the delta at rest[off:], which follows prev.
func (c *chunk) at(off int, prev Pair) Pair {
	e := binary.LittleEndian.Uint64(c.rest[off:cap(c.rest)]) & (^uint64(0) >> (64 - 8*uint(c.w)))
	return Pair{User: prev.User + membership.UID(e>>c.g), Group: uint32(e & (1<<c.g - 1))}
}

// scan looks in c for p, which is above c.first: off is where the first
// pair >= p is encoded (len(c.rest) when none is), prev the pair before it,
// and at that pair (when off < len(c.rest)).
//
// This loop is every add's, remove's and check's: it is written out.
func (c *chunk) scan(p Pair) (off int, prev, at Pair) {
	prev = c.first
	w := int(c.w)
	if w == 0 {
		return 0, prev, Pair{}
	}
	n := len(c.rest)
	if c.g == 0 && p.Group == 0 {
		// A group's Members (and reverse pairs of group 0): the users
		// alone are compared, and a chunk of one-byte deltas (dense uids)
		// is read a byte at a time.
		return c.scanUsers(p.User)
	}
	rest := c.rest[:cap(c.rest)]
	mask := ^uint64(0) >> (64 - 8*uint(w))
	g := c.g
	gmask := uint64(1)<<g - 1
	for ; off < n; off += w {
		e := binary.LittleEndian.Uint64(rest[off:]) & mask
		at = Pair{User: prev.User + membership.UID(e>>g), Group: uint32(e & gmask)}
		if at.User > p.User || at.User == p.User && at.Group >= p.Group {
			return off, prev, at
		}
		prev = at
	}
	return n, prev, Pair{}
}

// scanUsers is scan for a chunk whose deltas hold no group bits, looking
// for the first pair of user or above, of group 0: the pairs after the
// first are (user, 0), so their users alone are compared.
func (c *chunk) scanUsers(user membership.UID) (off int, prev, at Pair) {
	prev = c.first
	u := prev.User
	n := len(c.rest)
	if c.w == 1 { // dense uids: a byte at a time
		for ; off < n; off++ {
			next := u + membership.UID(c.rest[off])
			if next >= user {
				return off, prev, Pair{User: next}
			}
			u, prev = next, Pair{User: next}
		}
		return n, prev, Pair{}
	}
	w := int(c.w)
	rest := c.rest[:cap(c.rest)]
	mask := ^uint64(0) >> (64 - 8*uint(w))
	for ; off < n; off += w {
		next := u + membership.UID(binary.LittleEndian.Uint64(rest[off:])&mask)
		if next >= user {
			return off, prev, Pair{User: next}
		}
		u, prev = next, Pair{User: next}
	}
	return n, prev, Pair{}
}

// each calls fn with each pair of c, in order, until fn returns false,
// and reports whether it did not.
func (c *chunk) each(fn func(Pair) bool) bool {
	p := c.first
	if !fn(p) {
		return false
	}
	for off := 0; off < len(c.rest); off += int(c.w) {
		p = c.at(off, p)
		if !fn(p) {
			return false
		}
	}
	return true
}

// pairs appends the pairs of c to buf.
func (c *chunk) pairs(buf []Pair) []Pair {
	c.each(func(p Pair) bool {
		buf = append(buf, p)
		return true
	})
	return buf
}

// last returns the last pair of c.
func (c *chunk) last() Pair {
	p := c.first
	for off := 0; off < len(c.rest); off += int(c.w) {
		p = c.at(off, p)
	}
	return p
}

// putDelta appends the w bytes of e to buf.
func putDelta(buf []byte, e uint64, w uint8) []byte {
	for range w {
		buf = append(buf, byte(e))
		e >>= 8
	}
	return buf
}

// withSlack returns a copy of b with loadSlack bytes of room after it, and
// extra more.
func withSlack(b []byte, extra int) []byte {
	out := make([]byte, len(b), len(b)+loadSlack+extra)
	copy(out, b)
	return out
}

// packChunks returns the chunks of ps, which must be sorted and distinct,
// each with at most fillBytes of deltas and no room but loadSlack: room
// for later inserts is made when they come. A chunk ends early where a
// pair's delta could not fit in eight bytes beside the group bits.
func packChunks(ps []Pair, fillBytes int) []chunk {
	var chunks []chunk
	var buf []byte
	for len(ps) > 0 {
		// Take pairs while the deltas, at the width the widest needs, fit.
		var maxUser uint64
		var g int
		n := 1
		for ; n < len(ps); n++ {
			u := max(maxUser, uint64(ps[n].User-ps[n-1].User))
			gn := max(g, bits.Len32(ps[n].Group))
			need := bits.Len64(u) + gn
			if need > 64 || n*max(1, (need+7)/8) > fillBytes || n > fillBytes/2 {
				break
			}
			maxUser, g = u, gn
		}
		c := chunk{first: ps[0], g: uint8(g)}
		if n > 1 {
			c.w = uint8(max(1, (bits.Len64(maxUser)+g+7)/8))
			buf = buf[:0]
			for i := 1; i < n; i++ {
				e, _ := c.delta(ps[i-1], ps[i])
				buf = putDelta(buf, e, c.w)
			}
			c.rest = withSlack(buf, 0)
		}
		chunks = append(chunks, c)
		ps = ps[n:]
	}
	return slices.Clip(chunks)
}

// chunkFor returns the index of the chunk that holds p or would: the last
// whose first pair is <= p, or the first chunk. There must be one.
func (s *set) chunkFor(p Pair) int {
	lo, hi := 1, len(s.chunks)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if f := s.chunks[mid].first; f.User < p.User || f.User == p.User && f.Group <= p.Group {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}

// contains reports whether p is in the set.
func (s *set) contains(p Pair) bool {
	if len(s.chunks) == 0 {
		return false
	}
	c := &s.chunks[s.chunkFor(p)]
	if ComparePairs(p, c.first) <= 0 {
		return p == c.first
	}
	off, _, at := c.scan(p)
	return off < len(c.rest) && at == p
}

// neighbours are the pairs beside one that was added or removed.
type neighbours struct {
	prev, next       Pair
	hasPrev, hasNext bool
}

// add adds p and reports whether it was new, and the pairs beside it.
// limit is the most bytes of deltas a chunk holds.
func (s *set) add(p Pair, limit int) (added bool, nb neighbours) {
	if len(s.chunks) == 0 {
		s.chunks = []chunk{{first: p}}
		return true, nb
	}
	i := s.chunkFor(p)
	c := &s.chunks[i]
	var buf [16]byte
	switch order := ComparePairs(p, c.first); {
	case order == 0:
		return false, nb
	case order < 0: // a new smallest pair: i is 0
		nb.next, nb.hasNext = c.first, true
		e, ok := c.delta(p, c.first)
		if !ok {
			s.repack(i, p, true, limit)
			return true, nb
		}
		c.rest = sortedset.Splice(c.rest, 0, 0, putDelta(buf[:0], e, c.w), loadSlack)
		c.first = p
	default:
		off, prev, at := c.scan(p)
		hasAt := off < len(c.rest)
		if hasAt && at == p {
			return false, nb
		}
		nb.prev, nb.hasPrev = prev, true
		if hasAt {
			nb.next, nb.hasNext = at, true
		} else if i+1 < len(s.chunks) {
			nb.next, nb.hasNext = s.chunks[i+1].first, true
		}
		e1, ok := c.delta(prev, p)
		repl, end := putDelta(buf[:0], e1, c.w), off
		if hasAt {
			e2, ok2 := c.delta(p, at)
			ok = ok && ok2
			repl, end = putDelta(repl, e2, c.w), off+int(c.w)
		}
		if !ok {
			s.repack(i, p, true, limit)
			return true, nb
		}
		c.rest = sortedset.Splice(c.rest, off, end, repl, loadSlack)
	}
	if len(c.rest) > limit || c.len() > limit/2 {
		s.split(i)
	}
	return true, nb
}

// remove removes p and reports whether it was in the set, and the pairs
// that were beside it.
func (s *set) remove(p Pair, limit int) (removed bool, nb neighbours) {
	if len(s.chunks) == 0 {
		return false, nb
	}
	i := s.chunkFor(p)
	c := &s.chunks[i]
	switch order := ComparePairs(p, c.first); {
	case order < 0:
		return false, nb
	case order == 0:
		if nb.hasPrev = i > 0; nb.hasPrev {
			nb.prev = s.chunks[i-1].last()
		}
		if len(c.rest) == 0 {
			if nb.hasNext = i+1 < len(s.chunks); nb.hasNext {
				nb.next = s.chunks[i+1].first
			}
			s.chunks = slices.Delete(s.chunks, i, i+1)
			return true, nb
		}
		// The next pair becomes the first; the ones after it are encoded
		// from it, and stay as they are.
		nb.next, nb.hasNext = c.at(0, c.first), true
		c.first = nb.next
		c.rest = sortedset.Splice(c.rest, 0, int(c.w), nil, loadSlack)
	default:
		off, prev, at := c.scan(p)
		if off == len(c.rest) || at != p {
			return false, nb
		}
		nb.prev, nb.hasPrev = prev, true
		end := off + int(c.w)
		var repl []byte
		var buf [8]byte
		if end < len(c.rest) {
			nb.next, nb.hasNext = c.at(end, at), true
			e, ok := c.delta(prev, nb.next)
			if !ok {
				s.repack(i, p, false, limit)
				return true, nb
			}
			repl, end = putDelta(buf[:0], e, c.w), end+int(c.w)
		} else if nb.hasNext = i+1 < len(s.chunks); nb.hasNext {
			nb.next = s.chunks[i+1].first
		}
		c.rest = sortedset.Splice(c.rest, off, end, repl, loadSlack)
	}
	if len(c.rest) == 0 {
		c.w, c.g, c.rest = 0, 0, nil
	}
	s.thin(i, limit)
	return true, nb
}

// repack rebuilds chunks[i] with p added (or removed), at the width its
// deltas need now: a delta that did not fit in its chunk's width or group
// bits. It may leave more than one chunk where chunks[i] was.
func (s *set) repack(i int, p Pair, add bool, limit int) {
	ps := s.chunks[i].pairs(make([]Pair, 0, s.chunks[i].len()+2))
	at, found := slices.BinarySearchFunc(ps, p, ComparePairs)
	switch {
	case add && !found:
		ps = slices.Insert(ps, at, p)
	case !add && found:
		ps = slices.Delete(ps, at, at+1)
	}
	s.replace(i, i+1, ps, limit)
}

// replace replaces chunks[from:to] with the chunks of ps, each filled to
// three quarters of limit.
func (s *set) replace(from, to int, ps []Pair, limit int) {
	s.chunks = slices.Replace(s.chunks, from, to, packChunks(ps, limit*3/4)...)
}

// split splits chunks[i], which has grown over its limit, in two halves.
// The deltas after the new first pair are encoded from it already, so the
// halves keep the chunk's width.
func (s *set) split(i int) {
	c := &s.chunks[i]
	w := int(c.w)
	half := c.len() / 2 * w // the offset of the second half's first pair
	p := c.first
	for off := 0; off <= half; off += w {
		p = c.at(off, p)
	}
	second := chunk{first: p, w: c.w, g: c.g}
	if rest := c.rest[half+w:]; len(rest) > 0 {
		second.rest = withSlack(rest, 0)
	} else {
		second.w, second.g = 0, 0
	}
	c.rest = withSlack(c.rest[:half], 0)
	if half == 0 {
		c.w, c.g, c.rest = 0, 0, nil
	}
	if len(s.chunks) == cap(s.chunks) { // grow by an eighth, as chunks do
		s.chunks = append(make([]chunk, 0, len(s.chunks)+len(s.chunks)/8+4), s.chunks...)
	}
	s.chunks = slices.Insert(s.chunks, i+1, second)
}

// thin keeps chunks[i] in shape after a removal: a thin chunk is merged
// with the next one, so that removals cannot leave many tiny chunks, and
// one that removals left mostly empty gives back its room.
func (s *set) thin(i, limit int) {
	c := &s.chunks[i]
	switch {
	case len(c.rest) < limit/4 && i+1 < len(s.chunks) && len(c.rest)+len(s.chunks[i+1].rest)+8 <= limit/2 &&
		c.len()+s.chunks[i+1].len()+1 <= limit/4:
		ps := c.pairs(make([]Pair, 0, c.len()+s.chunks[i+1].len()+2))
		ps = s.chunks[i+1].pairs(ps)
		s.replace(i, i+2, ps, limit)
	case cap(c.rest) > 2*len(c.rest)+16+loadSlack:
		c.rest = withSlack(c.rest, 0)
	}
}

// fill fills an empty set from ps, which must be sorted and distinct, in
// chunks of fillBytes with no spare room.
func (s *set) fill(ps []Pair, fillBytes int) {
	s.chunks = packChunks(ps, fillBytes)
}
