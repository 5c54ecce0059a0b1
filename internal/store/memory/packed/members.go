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

// Members is a group's sorted set of uids: pairs of group 0 in packed
// chunks. A member costs the bytes of its distance from the one
// before, listing needs no sort, and finding a uid is a binary search over
// the chunks and a scan of one.
type Members struct {
	// Each chunk holds at most maxChunkBytes of deltas.
	set
	size int
}

// Add adds uid and reports whether it was new.
func (m *Members) Add(uid membership.UID) bool {
	added, _ := m.set.add(Pair{User: uid}, maxChunkBytes)
	if added {
		m.size++
	}
	return added
}

// Fill fills an empty set from uids, which must be sorted and distinct, in
// chunks of fillChunkBytes with no spare room.
func (m *Members) Fill(uids []membership.UID) { m.FillFrom(uids, nil) }

// FillFrom is Fill with scratch as room for the uids as pairs: it returns
// scratch, grown when it was short, for the next call.
func (m *Members) FillFrom(uids []membership.UID, scratch []Pair) []Pair {
	if cap(scratch) < len(uids) {
		scratch = make([]Pair, len(uids))
	}
	ps := scratch[:len(uids)]
	for i, uid := range uids {
		ps[i] = Pair{User: uid}
	}
	m.set.fill(ps, fillChunkBytes)
	m.size = len(uids)
	return scratch
}

// Remove removes uid and reports whether it was a member.
func (m *Members) Remove(uid membership.UID) bool {
	removed, _ := m.set.remove(Pair{User: uid}, maxChunkBytes)
	if removed {
		m.size--
	}
	return removed
}

// All yields the uids in ascending order.
func (m *Members) All(yield func(membership.UID) bool) {
	for i := range m.chunks {
		c := &m.chunks[i]
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
	if len(m.chunks) == 0 {
		return
	}
	// One loop over the chunks, not an iterator of pairs: a list of a
	// million members spends its time here.
	for i := m.chunkFor(Pair{User: after}); i < len(m.chunks); i++ {
		c := &m.chunks[i]
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
	i   int // the chunk
	off int // where the next delta of the chunk is
	uid membership.UID
	ok  bool
}

// From returns a cursor at the first member above after. Finding it is a
// binary search and the scan of one chunk, as EachAbove's.
func (m *Members) From(after membership.UID) Cursor {
	if len(m.chunks) == 0 || after == math.MaxInt64 {
		return Cursor{m: m}
	}
	i := m.chunkFor(Pair{User: after})
	ch := &m.chunks[i]
	if ch.first.User > after {
		return Cursor{m: m, i: i, uid: ch.first.User, ok: true}
	}
	if off, _, at := ch.scan(Pair{User: after + 1}); off < len(ch.rest) {
		return Cursor{m: m, i: i, off: off + int(ch.w), uid: at.User, ok: true}
	}
	if i+1 < len(m.chunks) {
		return Cursor{m: m, i: i + 1, uid: m.chunks[i+1].first.User, ok: true}
	}
	return Cursor{m: m}
}

// Ok reports whether the cursor is at a member: false past the last.
func (c *Cursor) Ok() bool { return c.ok }

// UID returns the member the cursor is at.
func (c *Cursor) UID() membership.UID { return c.uid }

// Next moves the cursor to the next member.
func (c *Cursor) Next() {
	ch := &c.m.chunks[c.i]
	if c.off < len(ch.rest) {
		w := int(ch.w)
		mask := ^uint64(0) >> (64 - 8*uint(w))
		c.uid += membership.UID(binary.LittleEndian.Uint64(ch.rest[c.off:cap(ch.rest)]) & mask)
		c.off += w
		return
	}
	c.i++
	if c.i >= len(c.m.chunks) {
		c.ok = false
		return
	}
	c.uid, c.off = c.m.chunks[c.i].first.User, 0
}

// Len returns how many members there are.
func (m *Members) Len() int { return m.size }

// AppendTo appends the uids, in ascending order, to buf.
func (m *Members) AppendTo(buf []membership.UID) []membership.UID {
	for i := range m.chunks {
		c := &m.chunks[i]
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
	return m.set.contains(Pair{User: uid})
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
