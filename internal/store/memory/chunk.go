package memory

import (
	"encoding/binary"
	"slices"
)

// The sorted sets of expiries (sortedSet: a group's expiries by uid, the
// store's by time) keep their elements in ordered chunks, delta-encoded: a
// chunk holds its first element in full and each other one as varints of
// its difference from the one before, so an expiry costs a few bytes; a
// chunk is decoded from its start, so it is kept to a few hundred bytes, and
// finding an element is a binary search over the chunks' first elements
// and then a short scan. (Members and reverse pairs, on the path of every
// add, use fixed-width deltas instead: packed.go.)
//
// The functions here keep the chunks in shape once a position is found, and
// are generic over the encoding.

// chunk is a run of a sorted set: first, then the rest of the run, each
// element encoded after the one before it.
type chunk[T any] struct {
	first T
	rest  []byte
}

// codec encodes the elements of a sorted set, each after the one before it.
type codec[T any] interface {
	// put appends the encoding of v, which follows prev.
	put(buf []byte, prev, v T) []byte
	// next decodes the element that follows prev at rest[off:], and returns
	// it and the offset after it.
	next(rest []byte, off int, prev T) (T, int)
}

// maxEncoded is the most bytes one element takes: two varints.
const maxEncoded = 2 * binary.MaxVarintLen64

// splice replaces rest[from:to] with repl, keeping slack bytes of room
// after them (a packed chunk's load needs some, packed.go). When rest has
// no room, the new array has room for an eighth more, not append's double,
// so that a chunk wastes at most an eighth of its size.
func splice(rest []byte, from, to int, repl []byte, slack int) []byte {
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
func splitChunk[T any, C codec[T]](chunks []chunk[T], i int) []chunk[T] {
	var c C
	rest := chunks[i].rest
	off, v := 0, chunks[i].first
	for off < len(rest)/2 {
		v, off = c.next(rest, off, v)
	}
	// The element ending at off is the last of the first half.
	second, end := c.next(rest, off, v)
	chunks[i].rest = slices.Clone(rest[:off])
	if len(chunks) == cap(chunks) { // grow by an eighth, as chunks do
		chunks = append(make([]chunk[T], 0, len(chunks)+len(chunks)/8+4), chunks...)
	}
	return slices.Insert(chunks, i+1, chunk[T]{first: second, rest: slices.Clone(rest[end:])})
}

// thinChunk keeps chunks[i] in shape after a removal: a thin chunk is
// merged into the next one, so that removals cannot leave many tiny chunks,
// and one that removals left mostly empty gives back its room.
func thinChunk[T any, C codec[T]](chunks []chunk[T], i, limit int) []chunk[T] {
	var cd C
	c := &chunks[i]
	switch {
	case len(c.rest) < limit/4 && i+1 < len(chunks) && len(c.rest)+len(chunks[i+1].rest)+maxEncoded <= limit/2:
		next := chunks[i+1]
		var buf [maxEncoded]byte
		joint := cd.put(buf[:0], lastOf[T, C](*c), next.first)
		merged := make([]byte, 0, len(c.rest)+len(joint)+len(next.rest))
		c.rest = append(append(append(merged, c.rest...), joint...), next.rest...)
		return slices.Delete(chunks, i+1, i+2)
	case cap(c.rest) > 2*len(c.rest)+16:
		c.rest = slices.Clone(c.rest)
	}
	return chunks
}

// lastOf returns the last element of c.
func lastOf[T any, C codec[T]](c chunk[T]) T {
	var cd C
	v := c.first
	for off := 0; off < len(c.rest); {
		v, off = cd.next(c.rest, off, v)
	}
	return v
}

// fillChunks returns the chunks of sorted, which must be sorted and
// distinct, each filled to fillBytes and with no spare room: room for
// later inserts is made when they come.
func fillChunks[T any, C codec[T]](sorted []T, fillBytes int) []chunk[T] {
	var cd C
	var chunks []chunk[T]
	buf := make([]byte, 0, fillBytes+maxEncoded)
	for len(sorted) > 0 {
		c := chunk[T]{first: sorted[0]}
		buf = buf[:0]
		n := 1
		for ; n < len(sorted) && len(buf) < fillBytes; n++ {
			buf = cd.put(buf, sorted[n-1], sorted[n])
		}
		if len(buf) > 0 {
			c.rest = slices.Clone(buf)
		}
		chunks = append(chunks, c)
		sorted = sorted[n:]
	}
	return slices.Clip(chunks)
}

// uvarint decodes the varint at b[off:] and returns it and the offset after
// it. It is small enough to be inlined; b must hold a whole varint, as
// every chunk does.
func uvarint(b []byte, off int) (uint64, int) {
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
