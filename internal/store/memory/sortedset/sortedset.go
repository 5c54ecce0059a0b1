// Package sortedset keeps sorted sets in chunks of delta-encoded elements,
// for element types whose sets are not on the path of every request: the
// expiries of a group, and the due set of a whole store (package expiry).
// A chunk holds its first element in full and each other one as varints of
// its difference from the one before, so an element costs a few bytes; a
// chunk is decoded from its start, so it is kept to a few hundred bytes, and
// finding an element is a binary search over the chunks' first elements
// and then a short scan. (Members and reverse pairs, on the path of every
// add, use fixed-width deltas instead: package packed.)
//
// A Set is generic over its elements' encoding, a Codec. It has no lock:
// its owner's guards it.
package sortedset

import (
	"encoding/binary"
	"slices"
)

// Codec encodes the elements of a Set, each after the one before it, and
// orders them.
type Codec[T any] interface {
	// Put appends the encoding of v, which follows prev.
	Put(buf []byte, prev, v T) []byte
	// Next decodes the element that follows prev at rest[off:], and returns
	// it and the offset after it.
	Next(rest []byte, off int, prev T) (T, int)
	// Compare orders a and b as cmp.Compare does.
	Compare(a, b T) int
	// MaxBytes is the most bytes of encodings a chunk of the set holds.
	MaxBytes() int
}

// maxEncoded is the most bytes one element takes: two varints.
const maxEncoded = 2 * binary.MaxVarintLen64

// Set is a sorted set in delta-encoded chunks. The zero Set is empty.
type Set[T any, C Codec[T]] struct {
	// chunks are ordered: every element of chunks[i] is below
	// chunks[i+1].first. Each holds at most C.MaxBytes of encodings, a few
	// more while it is being split.
	chunks []chunk[T]
	size   int
}

// Len returns how many elements s holds.
func (s *Set[T, C]) Len() int { return s.size }

// Min returns the smallest element of s, which must not be empty.
func (s *Set[T, C]) Min() T { return s.chunks[0].first }

// maxSetEncoded is the most bytes one element of a Set takes: three
// varints.
const maxSetEncoded = 30

// chunkFor returns the index of the chunk that holds v or would: the last
// whose first element is <= v, or the first chunk. There must be one.
func (s *Set[T, C]) chunkFor(v T) int {
	var c C
	lo, hi := 1, len(s.chunks)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if c.Compare(s.chunks[mid].first, v) <= 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}

// seek scans ch for v, which is above ch.first: off is where the first
// element >= v is encoded (len(ch.rest) when none is), prev the element
// before it, and at and end that element and the offset after it (end ==
// off when none).
func seek[T any, C Codec[T]](ch *chunk[T], v T) (off int, prev, at T, end int) {
	var c C
	prev = ch.first
	for off < len(ch.rest) {
		x, e := c.Next(ch.rest, off, prev)
		if c.Compare(x, v) >= 0 {
			return off, prev, x, e
		}
		prev, off = x, e
	}
	return off, prev, at, off
}

// Get returns the element equal to v, if there is one.
func (s *Set[T, C]) Get(v T) (T, bool) {
	var c C
	var zero T
	if s == nil || len(s.chunks) == 0 {
		return zero, false
	}
	ch := &s.chunks[s.chunkFor(v)]
	switch order := c.Compare(v, ch.first); {
	case order < 0:
		return zero, false
	case order == 0:
		return ch.first, true
	}
	off, _, at, end := seek[T, C](ch, v)
	if end > off && c.Compare(at, v) == 0 {
		return at, true
	}
	return zero, false
}

// Insert adds v, and reports whether it did: not when an element equal to
// v is there (it stays as it is).
func (s *Set[T, C]) Insert(v T) bool {
	var c C
	if len(s.chunks) == 0 {
		s.chunks = []chunk[T]{{first: v}}
		s.size = 1
		return true
	}
	i := s.chunkFor(v)
	ch := &s.chunks[i]
	var buf [2 * maxSetEncoded]byte
	switch order := c.Compare(v, ch.first); {
	case order == 0:
		return false
	case order < 0: // a new smallest element
		ch.rest = Splice(ch.rest, 0, 0, c.Put(buf[:0], v, ch.first), 0)
		ch.first = v
	default:
		off, prev, at, end := seek[T, C](ch, v)
		if end > off && c.Compare(at, v) == 0 {
			return false
		}
		repl := c.Put(buf[:0], prev, v)
		if end > off {
			repl = c.Put(repl, v, at)
		}
		ch.rest = Splice(ch.rest, off, end, repl, 0)
	}
	s.size++
	if len(ch.rest) > c.MaxBytes() {
		s.chunks = splitChunk[T, C](s.chunks, i)
	}
	return true
}

// Remove removes the element equal to v, and returns it, if there is one.
func (s *Set[T, C]) Remove(v T) (T, bool) {
	var c C
	var zero T
	if len(s.chunks) == 0 {
		return zero, false
	}
	i := s.chunkFor(v)
	ch := &s.chunks[i]
	var old T
	switch order := c.Compare(v, ch.first); {
	case order < 0:
		return zero, false
	case order == 0:
		old = ch.first
		if len(ch.rest) == 0 {
			s.chunks = slices.Delete(s.chunks, i, i+1)
			s.size--
			return old, true
		}
		// The next element becomes the first; the one after it is encoded
		// from it, and stays as it is.
		next, end := c.Next(ch.rest, 0, ch.first)
		ch.first = next
		ch.rest = Splice(ch.rest, 0, end, nil, 0)
	default:
		off, prev, at, end := seek[T, C](ch, v)
		if end == off || c.Compare(at, v) != 0 {
			return zero, false
		}
		old = at
		var repl []byte
		if end < len(ch.rest) {
			var next T
			next, end = c.Next(ch.rest, end, at)
			var buf [maxSetEncoded]byte
			repl = c.Put(buf[:0], prev, next)
		}
		ch.rest = Splice(ch.rest, off, end, repl, 0)
	}
	s.size--
	s.chunks = thinChunk[T, C](s.chunks, i, c.MaxBytes())
	return old, true
}

// PopWhile removes the smallest elements, in order, as long as take, called
// with each, says so.
func (s *Set[T, C]) PopWhile(take func(T) bool) {
	var c C
	taken := 0
	defer func() { s.size -= taken }()
	for whole := 0; whole < len(s.chunks); whole++ {
		ch := &s.chunks[whole]
		v := ch.first
		if !take(v) {
			s.chunks = slices.Delete(s.chunks, 0, whole)
			return
		}
		taken++
		for off := 0; off < len(ch.rest); {
			x, end := c.Next(ch.rest, off, v)
			if !take(x) {
				// x becomes the chunk's first; the one after it is
				// encoded from it.
				ch.first = x
				ch.rest = slices.Clip(slices.Clone(ch.rest[end:]))
				s.chunks = slices.Delete(s.chunks, 0, whole)
				return
			}
			taken++
			v, off = x, end
		}
	}
	s.chunks = nil
}

// Fill fills an empty set from sorted, which must be sorted and distinct.
func (s *Set[T, C]) Fill(sorted []T) {
	var c C
	s.chunks = fillChunks[T, C](sorted, c.MaxBytes()*3/4)
	s.size = len(sorted)
}

// Cursor returns a cursor at the first element >= from.
func (s *Set[T, C]) Cursor(from T) Cursor[T, C] {
	cur := Cursor[T, C]{s: s}
	if s == nil || len(s.chunks) == 0 {
		return cur
	}
	var c C
	cur.chunk = s.chunkFor(from)
	cur.v, cur.ok = s.chunks[cur.chunk].first, true
	for cur.ok && c.Compare(cur.v, from) < 0 {
		cur.advance()
	}
	return cur
}

// All calls yield with every element, in order.
func (s *Set[T, C]) All(yield func(T) bool) {
	if s == nil || len(s.chunks) == 0 {
		return
	}
	for cur := (Cursor[T, C]{s: s, v: s.chunks[0].first, ok: true}); cur.ok; cur.advance() {
		if !yield(cur.v) {
			return
		}
	}
}

// Cursor walks a Set in order. The set must not change while it walks.
type Cursor[T any, C Codec[T]] struct {
	s     *Set[T, C]
	chunk int
	off   int
	v     T // the element it is at, while ok
	ok    bool
}

// Ok reports whether the cursor is at an element: not past the last.
func (cur *Cursor[T, C]) Ok() bool { return cur.ok }

// Value returns the element the cursor is at, while Ok.
func (cur *Cursor[T, C]) Value() T { return cur.v }

// advance moves the cursor to the next element.
func (cur *Cursor[T, C]) advance() {
	var c C
	ch := &cur.s.chunks[cur.chunk]
	if cur.off < len(ch.rest) {
		cur.v, cur.off = c.Next(ch.rest, cur.off, cur.v)
		return
	}
	cur.chunk++
	cur.off = 0
	if cur.chunk == len(cur.s.chunks) {
		cur.ok = false
		return
	}
	cur.v = cur.s.chunks[cur.chunk].first
}

// SeekTo advances the cursor to the first element >= v, which must not be
// below the element it is at: a walk in step with another sorted walk
// costs O(1) a step.
func (cur *Cursor[T, C]) SeekTo(v T) {
	var c C
	for cur.ok && c.Compare(cur.v, v) < 0 {
		cur.advance()
	}
}

// The functions below keep the chunks in shape once a position is found.

// chunk is a run of a sorted set: first, then the rest of the run, each
// element encoded after the one before it.
type chunk[T any] struct {
	first T
	rest  []byte
}

// Splice replaces rest[from:to] with repl, keeping slack bytes of room
// after them (a packed chunk's load needs some: package packed, which
// splices its chunks with it too). When rest has
// no room, the new array has room for an eighth more, not append's double,
// so that a chunk wastes at most an eighth of its size.
func Splice(rest []byte, from, to int, repl []byte, slack int) []byte {
	n := len(rest) - (to - from) + len(repl)
	if n+slack > cap(rest) {
		grown := make([]byte, n, n+n/8+8+slack)
		copy(grown, rest[:from])
		copy(grown[from:], repl)
		copy(grown[from+len(repl):], rest[to:])
		return grown
	}
	old := len(rest)
	b := rest[:max(n, old)]
	copy(b[from+len(repl):], b[to:old])
	copy(b[from:], repl)
	return b[:n]
}

// splitChunk splits chunks[i], which has grown over its limit, in two
// halves of about the same number of bytes.
func splitChunk[T any, C Codec[T]](chunks []chunk[T], i int) []chunk[T] {
	var c C
	rest := chunks[i].rest
	off, v := 0, chunks[i].first
	for off < len(rest)/2 {
		v, off = c.Next(rest, off, v)
	}
	// The element ending at off is the last of the first half.
	second, end := c.Next(rest, off, v)
	chunks[i].rest = slices.Clone(rest[:off])
	if len(chunks) == cap(chunks) { // grow by an eighth, as chunks do
		chunks = append(make([]chunk[T], 0, len(chunks)+len(chunks)/8+4), chunks...)
	}
	return slices.Insert(chunks, i+1, chunk[T]{first: second, rest: slices.Clone(rest[end:])})
}

// thinChunk keeps chunks[i] in shape after a removal: a thin chunk is
// merged into the next one, so that removals cannot leave many tiny chunks,
// and one that removals left mostly empty gives back its room.
func thinChunk[T any, C Codec[T]](chunks []chunk[T], i, limit int) []chunk[T] {
	var cd C
	c := &chunks[i]
	switch {
	case len(c.rest) < limit/4 && i+1 < len(chunks) && len(c.rest)+len(chunks[i+1].rest)+maxEncoded <= limit/2:
		next := chunks[i+1]
		var buf [maxEncoded]byte
		joint := cd.Put(buf[:0], lastOf[T, C](*c), next.first)
		merged := make([]byte, 0, len(c.rest)+len(joint)+len(next.rest))
		c.rest = append(append(append(merged, c.rest...), joint...), next.rest...)
		return slices.Delete(chunks, i+1, i+2)
	case cap(c.rest) > 2*len(c.rest)+16:
		c.rest = slices.Clone(c.rest)
	}
	return chunks
}

// lastOf returns the last element of c.
func lastOf[T any, C Codec[T]](c chunk[T]) T {
	var cd C
	v := c.first
	for off := 0; off < len(c.rest); {
		v, off = cd.Next(c.rest, off, v)
	}
	return v
}

// fillChunks returns the chunks of sorted, which must be sorted and
// distinct, each filled to fillBytes and with no spare room: room for
// later inserts is made when they come.
func fillChunks[T any, C Codec[T]](sorted []T, fillBytes int) []chunk[T] {
	var cd C
	var chunks []chunk[T]
	buf := make([]byte, 0, fillBytes+maxEncoded)
	for len(sorted) > 0 {
		c := chunk[T]{first: sorted[0]}
		buf = buf[:0]
		n := 1
		for ; n < len(sorted) && len(buf) < fillBytes; n++ {
			buf = cd.Put(buf, sorted[n-1], sorted[n])
		}
		if len(buf) > 0 {
			c.rest = slices.Clone(buf)
		}
		chunks = append(chunks, c)
		sorted = sorted[n:]
	}
	return slices.Clip(chunks)
}

// Uvarint decodes the varint at b[off:] and returns it and the offset after
// it, for a Codec's Next. It is small enough to be inlined; b must hold a
// whole varint, as every chunk does.
func Uvarint(b []byte, off int) (uint64, int) {
	x := uint64(b[off])
	if x < 0x80 {
		return x, off + 1
	}
	return uvarintLong(b, off+1, x&0x7f)
}

// uvarintLong decodes the rest of a varint whose low 7 bits are x, from
// b[off:].
func uvarintLong(b []byte, off int, x uint64) (uint64, int) {
	for shift := uint(7); ; shift += 7 {
		y := uint64(b[off])
		off++
		x |= (y & 0x7f) << shift
		if y < 0x80 {
			return x, off
		}
	}
}
