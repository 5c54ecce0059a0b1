package memory

import "slices"

// sortedSet is a sorted set in delta-encoded chunks (chunk.go) for element
// types whose sets are not on the hot path of every request: the expiries
// of a group, and the due set of the whole store (expiry.go). Where
// members and pairSet scan by hand, it scans through its codec.
type sortedSet[T any, C orderedCodec[T]] struct {
	// chunks are ordered: every element of chunks[i] is below
	// chunks[i+1].first. Each holds at most C.maxBytes of encodings, a few
	// more while it is being split.
	chunks []chunk[T]
	size   int
}

// orderedCodec is the codec of a sortedSet's elements, with their order
// and the size of the set's chunks.
type orderedCodec[T any] interface {
	codec[T]
	compare(a, b T) int
	maxBytes() int
}

// maxSetEncoded is the most bytes one element of a sortedSet takes: three
// varints.
const maxSetEncoded = 30

// chunkFor returns the index of the chunk that holds v or would: the last
// whose first element is <= v, or the first chunk. There must be one.
func (s *sortedSet[T, C]) chunkFor(v T) int {
	var c C
	lo, hi := 1, len(s.chunks)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if c.compare(s.chunks[mid].first, v) <= 0 {
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
func seek[T any, C orderedCodec[T]](ch *chunk[T], v T) (off int, prev, at T, end int) {
	var c C
	prev = ch.first
	for off < len(ch.rest) {
		x, e := c.next(ch.rest, off, prev)
		if c.compare(x, v) >= 0 {
			return off, prev, x, e
		}
		prev, off = x, e
	}
	return off, prev, at, off
}

// get returns the element equal to v, if there is one.
func (s *sortedSet[T, C]) get(v T) (T, bool) {
	var c C
	var zero T
	if s == nil || len(s.chunks) == 0 {
		return zero, false
	}
	ch := &s.chunks[s.chunkFor(v)]
	switch order := c.compare(v, ch.first); {
	case order < 0:
		return zero, false
	case order == 0:
		return ch.first, true
	}
	off, _, at, end := seek[T, C](ch, v)
	if end > off && c.compare(at, v) == 0 {
		return at, true
	}
	return zero, false
}

// insert adds v, and reports whether it did: not when an element equal to
// v is there (it stays as it is).
func (s *sortedSet[T, C]) insert(v T) bool {
	var c C
	if len(s.chunks) == 0 {
		s.chunks = []chunk[T]{{first: v}}
		s.size = 1
		return true
	}
	i := s.chunkFor(v)
	ch := &s.chunks[i]
	var buf [2 * maxSetEncoded]byte
	switch order := c.compare(v, ch.first); {
	case order == 0:
		return false
	case order < 0: // a new smallest element
		ch.rest = splice(ch.rest, 0, 0, c.put(buf[:0], v, ch.first), 0)
		ch.first = v
	default:
		off, prev, at, end := seek[T, C](ch, v)
		if end > off && c.compare(at, v) == 0 {
			return false
		}
		repl := c.put(buf[:0], prev, v)
		if end > off {
			repl = c.put(repl, v, at)
		}
		ch.rest = splice(ch.rest, off, end, repl, 0)
	}
	s.size++
	if len(ch.rest) > c.maxBytes() {
		s.chunks = splitChunk[T, C](s.chunks, i)
	}
	return true
}

// remove removes the element equal to v, and returns it, if there is one.
func (s *sortedSet[T, C]) remove(v T) (T, bool) {
	var c C
	var zero T
	if len(s.chunks) == 0 {
		return zero, false
	}
	i := s.chunkFor(v)
	ch := &s.chunks[i]
	var old T
	switch order := c.compare(v, ch.first); {
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
		next, end := c.next(ch.rest, 0, ch.first)
		ch.first = next
		ch.rest = splice(ch.rest, 0, end, nil, 0)
	default:
		off, prev, at, end := seek[T, C](ch, v)
		if end == off || c.compare(at, v) != 0 {
			return zero, false
		}
		old = at
		var repl []byte
		if end < len(ch.rest) {
			var next T
			next, end = c.next(ch.rest, end, at)
			var buf [maxSetEncoded]byte
			repl = c.put(buf[:0], prev, next)
		}
		ch.rest = splice(ch.rest, off, end, repl, 0)
	}
	s.size--
	s.chunks = thinChunk[T, C](s.chunks, i, c.maxBytes())
	return old, true
}

// popWhile removes the smallest elements, in order, as long as take, called
// with each, says so.
func (s *sortedSet[T, C]) popWhile(take func(T) bool) {
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
			x, end := c.next(ch.rest, off, v)
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

// fill fills an empty set from sorted, which must be sorted and distinct.
func (s *sortedSet[T, C]) fill(sorted []T) {
	var c C
	s.chunks = fillChunks[T, C](sorted, c.maxBytes()*3/4)
	s.size = len(sorted)
}

// cursor returns a cursor at the first element >= from.
func (s *sortedSet[T, C]) cursor(from T) setCursor[T, C] {
	cur := setCursor[T, C]{s: s}
	if s == nil || len(s.chunks) == 0 {
		return cur
	}
	var c C
	cur.chunk = s.chunkFor(from)
	cur.v, cur.ok = s.chunks[cur.chunk].first, true
	for cur.ok && c.compare(cur.v, from) < 0 {
		cur.advance()
	}
	return cur
}

// all calls yield with every element, in order.
func (s *sortedSet[T, C]) all(yield func(T) bool) {
	if s == nil || len(s.chunks) == 0 {
		return
	}
	for cur := (setCursor[T, C]{s: s, v: s.chunks[0].first, ok: true}); cur.ok; cur.advance() {
		if !yield(cur.v) {
			return
		}
	}
}

// setCursor walks a sortedSet in order: v is the element it is at, while
// ok. The set must not change while it walks.
type setCursor[T any, C orderedCodec[T]] struct {
	s     *sortedSet[T, C]
	chunk int
	off   int
	v     T
	ok    bool
}

// advance moves the cursor to the next element.
func (cur *setCursor[T, C]) advance() {
	var c C
	ch := &cur.s.chunks[cur.chunk]
	if cur.off < len(ch.rest) {
		cur.v, cur.off = c.next(ch.rest, cur.off, cur.v)
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

// seekTo advances the cursor to the first element >= v, which must not be
// below the element it is at: a walk in step with another sorted walk
// costs O(1) a step.
func (cur *setCursor[T, C]) seekTo(v T) {
	var c C
	for cur.ok && c.compare(cur.v, v) < 0 {
		cur.advance()
	}
}
