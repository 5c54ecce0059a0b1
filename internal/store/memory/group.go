package memory

import (
	"encoding/binary"

	"example.com/groupmembership/membership"
)

// maxChunkBytes is the most bytes of deltas one chunk of a group holds. A
// few hundred bytes keep an insert's scan and copy short, while a group of
// a million needs a few thousand chunks.
const maxChunkBytes = 384

// fillChunkBytes is how full chunks are built when a group is filled in
// bulk, leaving room for later inserts before a chunk must split.
const fillChunkBytes = maxChunkBytes * 3 / 4

// members is a group's sorted set of uids: pairs of group 0 in packed
// chunks (packed.go). A member costs the bytes of its distance from the one
// before, listing needs no sort, and finding a uid is a binary search over
// the chunks and a scan of one.
type members struct {
	// Each chunk holds at most maxChunkBytes of deltas.
	packedSet
	size int
}

// add adds uid and reports whether it was new.
func (m *members) add(uid membership.UID) bool {
	added, _ := m.packedSet.add(pair{user: uid}, maxChunkBytes)
	if added {
		m.size++
	}
	return added
}

// fill fills an empty set from uids, which must be sorted and distinct, in
// chunks of fillChunkBytes with no spare room.
func (m *members) fill(uids []membership.UID) { m.fillFrom(uids, nil) }

// fillFrom is fill with scratch as room for the uids as pairs: it returns
// scratch, grown when it was short, for the next call.
func (m *members) fillFrom(uids []membership.UID, scratch []pair) []pair {
	if cap(scratch) < len(uids) {
		scratch = make([]pair, len(uids))
	}
	ps := scratch[:len(uids)]
	for i, uid := range uids {
		ps[i] = pair{user: uid}
	}
	m.packedSet.fill(ps, fillChunkBytes)
	m.size = len(uids)
	return scratch
}

// remove removes uid and reports whether it was a member.
func (m *members) remove(uid membership.UID) bool {
	removed, _ := m.packedSet.remove(pair{user: uid}, maxChunkBytes)
	if removed {
		m.size--
	}
	return removed
}

// all yields the uids in ascending order.
func (m *members) all(yield func(membership.UID) bool) {
	for i := range m.chunks {
		c := &m.chunks[i]
		uid := c.first.user
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

// appendTo appends the uids, in ascending order, to buf.
func (m *members) appendTo(buf []membership.UID) []membership.UID {
	for i := range m.chunks {
		c := &m.chunks[i]
		uid := c.first.user
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

// contains reports whether uid is a member.
func (m *members) contains(uid membership.UID) bool {
	return m.packedSet.contains(pair{user: uid})
}
