package packed

import (
	"encoding/binary"
	"math"

	"example.com/groupmembership/membership"
)

// maxChunkBytes is the most bytes of deltas one chunk of a group holds. A
// few hundred bytes keep an insert's scan and copy short, while a group of
// a million needs a few thousand chunks.
const maxChunkBytes = 384

// fillChunkBytes is how full chunks are built when a group is filled in
// bulk, leaving room for later inserts before a chunk must split.
const fillChunkBytes = maxChunkBytes * 3 / 4

// Members is a group's sorted set of uids: bit-packed while they are a few
// (inline.go), else pairs of group 0 in packed chunks. A member in a chunk
// costs the bytes of its distance from the one before, listing needs no
// sort, and finding a uid is a binary search over the chunks and a scan of
// one. A Members is in the smallest form its uids fit.
type Members struct {
	// big holds the members that do not fit small; nil while they do.
	big *heapSet
	// small holds the members, packed, while big is nil.
	small [smallWords]uint64
}

// heapSet is a Members that does not fit its struct: packed in the
// struct's words and its own while its uids fit them (24 bytes in all: a
// group of ten), else in chunks.
type heapSet struct {
	words   [mediumWords - smallWords]uint64
	chunked *chunked // nil while the uids are packed in words
}

// chunked is a Members in chunks, each of at most maxChunkBytes of deltas.
type chunked struct {
	set
	size int
}

// packedForm returns m's uids packed, nil when they are in chunks: those
// packed in m and its heap set copied into buf.
func (m *Members) packedForm(buf *[mediumWords]uint64) packed {
	switch {
	case m.big == nil:
		return m.small[:]
	case m.big.chunked == nil:
		copy(buf[:], m.small[:])
		copy(buf[smallWords:], m.big.words[:])
		return buf[:]
	}
	return nil
}

// Add adds uid and reports whether it was new.
func (m *Members) Add(uid membership.UID) bool {
	var words [mediumWords]uint64
	p := m.packedForm(&words)
	if p == nil {
		c := m.big.chunked
		added, _ := c.add(Pair{User: uid}, maxChunkBytes)
		if added {
			c.size++
		}
		return added
	}
	at, found := p.search(uid)
	if found {
		return false
	}
	var buf [maxPacked + 1]membership.UID
	uids := p.uids(buf[:0])
	uids = append(uids, 0)
	copy(uids[at+1:], uids[at:])
	uids[at] = uid
	m.place(uids, nil)
	return true
}

// Fill fills an empty set from uids, which must be sorted and distinct, in
// chunks of fillChunkBytes with no spare room.
func (m *Members) Fill(uids []membership.UID) { m.FillFrom(uids, nil) }

// FillFrom is Fill with scratch as room for the uids as pairs: it returns
// scratch, grown when it was short, for the next call.
func (m *Members) FillFrom(uids []membership.UID, scratch []Pair) []Pair {
	return m.place(uids, scratch)
}

// place makes uids, sorted and distinct, m's uids, in the smallest form
// they fit, keeping m's heap set if it has one and needs one still; it
// returns scratch as FillFrom does.
func (m *Members) place(uids []membership.UID, scratch []Pair) []Pair {
	if fits(uids, smallWords) {
		*m = Members{}
		packed(m.small[:]).pack(uids)
		return scratch
	}
	if m.big == nil {
		m.big = &heapSet{}
	}
	m.small = [smallWords]uint64{}
	if fits(uids, mediumWords) {
		var words [mediumWords]uint64
		packed(words[:]).pack(uids)
		copy(m.small[:], words[:])
		copy(m.big.words[:], words[smallWords:])
		m.big.chunked = nil
		return scratch
	}
	if cap(scratch) < len(uids) {
		scratch = make([]Pair, len(uids))
	}
	ps := scratch[:len(uids)]
	for i, uid := range uids {
		ps[i] = Pair{User: uid}
	}
	m.big.words = [mediumWords - smallWords]uint64{}
	c := &chunked{size: len(uids)}
	c.fill(ps, fillChunkBytes)
	m.big.chunked = c
	return scratch
}

// Remove removes uid and reports whether it was a member. Members left
// few enough are packed again.
func (m *Members) Remove(uid membership.UID) bool {
	var words [mediumWords]uint64
	if p := m.packedForm(&words); p != nil {
		at, found := p.search(uid)
		if !found {
			return false
		}
		var buf [maxPacked]membership.UID
		uids := p.uids(buf[:0])
		m.place(append(uids[:at], uids[at+1:]...), nil)
		return true
	}
	c := m.big.chunked
	removed, _ := c.remove(Pair{User: uid}, maxChunkBytes)
	if !removed {
		return false
	}
	c.size--
	if c.size <= maxPacked {
		var buf [maxPacked]membership.UID
		if uids := m.AppendTo(buf[:0]); fits(uids, mediumWords) {
			m.place(uids, nil)
		}
	}
	return true
}

// All yields the uids in ascending order.
func (m *Members) All(yield func(membership.UID) bool) {
	var words [mediumWords]uint64
	if p := m.packedForm(&words); p != nil {
		p.each(0, func(_ int, uid membership.UID) bool { return yield(uid) })
		return
	}
	for i := range m.big.chunked.chunks {
		c := &m.big.chunked.chunks[i]
		uid := c.first.User
		if !yield(uid) {
			return
		}
		if c.w == 0 {
			continue
		}
		// Members have group 0: a delta is the distance alone.
		rest, w := c.rest[:cap(c.rest)], int(c.w)
		mask := ^uint64(0) >> (64 - 8*uint(w))
		for off := 0; off < len(c.rest); off += w {
			uid += membership.UID(binary.LittleEndian.Uint64(rest[off:]) & mask)
			if !yield(uid) {
				return
			}
		}
	}
}

// EachAbove calls yield with the uids above after, in ascending order,
// until it returns false. Finding where to start is a binary search and
// the scan of one chunk, however deep the page.
func (m *Members) EachAbove(after membership.UID, yield func(membership.UID) bool) {
	var words [mediumWords]uint64
	if p := m.packedForm(&words); p != nil {
		p.each(0, func(_ int, uid membership.UID) bool { return uid <= after || yield(uid) })
		return
	}
	// One loop over the chunks, not an iterator of pairs: a list of a
	// million members spends its time here.
	chunks := m.big.chunked.chunks
	for i := m.big.chunked.chunkFor(Pair{User: after}); i < len(chunks); i++ {
		c := &chunks[i]
		uid := c.first.User
		// Members have group 0: a delta is the distance alone.
		rest, w := c.rest[:cap(c.rest)], int(c.w)
		mask := ^uint64(0) >> (64 - 8*uint(w))
		for off := 0; ; off += w {
			if uid > after && !yield(uid) {
				return
			}
			if off >= len(c.rest) {
				break
			}
			uid += membership.UID(binary.LittleEndian.Uint64(rest[off:]) & mask)
		}
	}
}

// Cursor reads a Members in ascending order, one uid at a time, as a
// merge of many sets needs. It is valid while its set is not changed.
type Cursor struct {
	m   *Members
	i   int // the chunk, or the index of the uid in a packed set
	off int // where the next delta of the chunk is
	uid membership.UID
	ok  bool
}

// From returns a cursor at the first member above after. Finding it is a
// binary search and the scan of one chunk, as EachAbove's.
func (m *Members) From(after membership.UID) Cursor {
	if after == math.MaxInt64 {
		return Cursor{m: m}
	}
	var words [mediumWords]uint64
	if p := m.packedForm(&words); p != nil {
		i, _ := p.search(after + 1)
		if i == p.len() {
			return Cursor{m: m}
		}
		return Cursor{m: m, i: i, uid: p.at(i), ok: true}
	}
	chunks := m.big.chunked.chunks
	i := m.big.chunked.chunkFor(Pair{User: after})
	ch := &chunks[i]
	if ch.first.User > after {
		return Cursor{m: m, i: i, uid: ch.first.User, ok: true}
	}
	if off, _, at := ch.scan(Pair{User: after + 1}); off < len(ch.rest) {
		return Cursor{m: m, i: i, off: off + int(ch.w), uid: at.User, ok: true}
	}
	if i+1 < len(chunks) {
		return Cursor{m: m, i: i + 1, uid: chunks[i+1].first.User, ok: true}
	}
	return Cursor{m: m}
}

// Ok reports whether the cursor is at a member: false past the last.
func (c *Cursor) Ok() bool { return c.ok }

// UID returns the member the cursor is at.
func (c *Cursor) UID() membership.UID { return c.uid }

// Next moves the cursor to the next member.
func (c *Cursor) Next() {
	var words [mediumWords]uint64
	if p := c.m.packedForm(&words); p != nil {
		c.i++
		if c.ok = c.i < p.len(); c.ok {
			c.uid = p.at(c.i)
		}
		return
	}
	chunks := c.m.big.chunked.chunks
	ch := &chunks[c.i]
	if c.off < len(ch.rest) {
		w := int(ch.w)
		mask := ^uint64(0) >> (64 - 8*uint(w))
		c.uid += membership.UID(binary.LittleEndian.Uint64(ch.rest[c.off:cap(ch.rest)]) & mask)
		c.off += w
		return
	}
	c.i++
	if c.i >= len(chunks) {
		c.ok = false
		return
	}
	c.uid, c.off = chunks[c.i].first.User, 0
}

// Len returns how many members there are.
func (m *Members) Len() int {
	var words [mediumWords]uint64
	if p := m.packedForm(&words); p != nil {
		return p.len()
	}
	return m.big.chunked.size
}

// AppendTo appends the uids, in ascending order, to buf.
func (m *Members) AppendTo(buf []membership.UID) []membership.UID {
	var words [mediumWords]uint64
	if p := m.packedForm(&words); p != nil {
		return p.uids(buf)
	}
	for i := range m.big.chunked.chunks {
		c := &m.big.chunked.chunks[i]
		uid := c.first.User
		buf = append(buf, uid)
		rest, w := c.rest[:cap(c.rest)], int(c.w)
		mask := ^uint64(0) >> (64 - 8*uint(w))
		for off := 0; off < len(c.rest); off += w {
			uid += membership.UID(binary.LittleEndian.Uint64(rest[off:]) & mask)
			buf = append(buf, uid)
		}
	}
	return buf
}

// Contains reports whether uid is a member.
func (m *Members) Contains(uid membership.UID) bool {
	var words [mediumWords]uint64
	if p := m.packedForm(&words); p != nil {
		_, found := p.search(uid)
		return found
	}
	return m.big.chunked.contains(Pair{User: uid})
}

// Diff returns the uids of sorted, distinct uids that old (nil: none) does
// not hold, and how many of old's uids are not in uids.
func Diff(old *Members, uids []membership.UID) (added []membership.UID, removed int) {
	EachDifferent(old, uids, func(uid membership.UID, in bool) bool {
		if in {
			added = append(added, uid)
		} else {
			removed++
		}
		return true
	})
	return added, removed
}

// EachDifferent calls fn, in ascending order, with each uid that is in
// exactly one of old (nil: none) and uids (sorted, distinct), and whether it
// is in uids, until fn returns false.
func EachDifferent(old *Members, uids []membership.UID, fn func(uid membership.UID, inNew bool) bool) {
	i := 0
	if old != nil {
		for uid := range old.All {
			for i < len(uids) && uids[i] < uid {
				if !fn(uids[i], true) {
					return
				}
				i++
			}
			if i < len(uids) && uids[i] == uid {
				i++
				continue
			}
			if !fn(uid, false) {
				return
			}
		}
	}
	for ; i < len(uids); i++ {
		if !fn(uids[i], true) {
			return
		}
	}
}
