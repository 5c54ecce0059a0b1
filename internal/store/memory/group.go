package memory

import (
	"encoding/binary"
	"slices"

	"example.com/groupmembership/membership"
)

// maxChunkBytes is the most bytes of deltas one chunk of a group holds. A
// few hundred bytes keep an insert's scan and copy short, while a group of
// a million needs a few thousand chunks.
const maxChunkBytes = 384

// fillChunkBytes is how full chunks are built when a group is filled in
// bulk, leaving room for later inserts before a chunk must split.
const fillChunkBytes = maxChunkBytes * 3 / 4

// members is a sorted set of uids, kept as a list of delta-encoded chunks
// (see chunk.go): a member costs the bytes of its distance from the one
// before, listing needs no sort, and finding a uid is a binary search over
// the chunks and a scan of one.
type members struct {
	// chunks are ordered: every uid of chunks[i] is below chunks[i+1].first.
	// Each holds at most maxChunkBytes of deltas, a few more while it is
	// being split.
	chunks []chunk[membership.UID]
	size   int
}

// uidCodec encodes a uid as the uvarint of its distance from the one before.
type uidCodec struct{}

func (uidCodec) put(buf []byte, prev, v membership.UID) []byte {
	return binary.AppendUvarint(buf, uint64(v-prev))
}

func (uidCodec) next(rest []byte, off int, prev membership.UID) (membership.UID, int) {
	d, off := uvarint(rest, off)
	return prev + membership.UID(d), off
}

// chunkFor returns the index of the chunk that holds uid or would: the last
// whose first uid is <= uid, or the first chunk. There must be one.
func (m *members) chunkFor(uid membership.UID) int {
	lo, hi := 1, len(m.chunks) // chunks[lo-1].first <= uid or lo == 1; chunks[hi:] are above
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if m.chunks[mid].first <= uid {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}

// find scans c for uid, which is above c.first: off is where the first uid
// >= uid is encoded (len(c.rest) when none is), prev the uid before it, and
// at and end that uid and the offset after it (end == off when none).
func find(c *chunk[membership.UID], uid membership.UID) (off int, prev, at membership.UID, end int) {
	prev = c.first
	for off < len(c.rest) {
		d, e := uvarint(c.rest, off)
		at = prev + membership.UID(d)
		if at >= uid {
			return off, prev, at, e
		}
		prev, off = at, e
	}
	return off, prev, 0, off
}

// add adds uid and reports whether it was new.
func (m *members) add(uid membership.UID) bool {
	if len(m.chunks) == 0 {
		m.chunks = []chunk[membership.UID]{{first: uid}}
		m.size = 1
		return true
	}
	i := m.chunkFor(uid)
	c := &m.chunks[i]
	var buf [maxEncoded]byte
	switch {
	case uid == c.first:
		return false
	case uid < c.first: // a new smallest uid
		c.rest = splice(c.rest, 0, 0, binary.AppendUvarint(buf[:0], uint64(c.first-uid)))
		c.first = uid
	default:
		off, prev, at, end := find(c, uid)
		if end > off && at == uid {
			return false
		}
		repl := binary.AppendUvarint(buf[:0], uint64(uid-prev))
		if end > off {
			repl = binary.AppendUvarint(repl, uint64(at-uid))
		}
		c.rest = splice(c.rest, off, end, repl)
	}
	m.size++
	if len(c.rest) > maxChunkBytes {
		m.chunks = splitChunk[membership.UID, uidCodec](m.chunks, i)
	}
	return true
}

// fill fills an empty set from uids, which must be sorted and distinct, in
// chunks of fillChunkBytes with no spare room.
func (m *members) fill(uids []membership.UID) {
	m.chunks = fillChunks[membership.UID, uidCodec](uids, fillChunkBytes)
	m.size = len(uids)
}

// remove removes uid and reports whether it was a member.
func (m *members) remove(uid membership.UID) bool {
	if len(m.chunks) == 0 {
		return false
	}
	i := m.chunkFor(uid)
	c := &m.chunks[i]
	switch {
	case uid < c.first:
		return false
	case uid == c.first && len(c.rest) == 0:
		m.chunks = slices.Delete(m.chunks, i, i+1)
		m.size--
		return true
	case uid == c.first: // the next uid becomes the first
		d, end := uvarint(c.rest, 0)
		c.first += membership.UID(d)
		c.rest = splice(c.rest, 0, end, nil)
	default:
		off, prev, at, end := find(c, uid)
		if end == off || at != uid {
			return false
		}
		// The uid after it, if any, is now encoded from prev.
		var repl []byte
		if end < len(c.rest) {
			var next membership.UID
			next, end = uidCodec{}.next(c.rest, end, at)
			var buf [maxEncoded]byte
			repl = binary.AppendUvarint(buf[:0], uint64(next-prev))
		}
		c.rest = splice(c.rest, off, end, repl)
	}
	m.size--
	m.chunks = thinChunk[membership.UID, uidCodec](m.chunks, i, maxChunkBytes)
	return true
}

// all yields the uids in ascending order.
func (m *members) all(yield func(membership.UID) bool) {
	for i := range m.chunks {
		c := &m.chunks[i]
		uid := c.first
		if !yield(uid) {
			return
		}
		for off := 0; off < len(c.rest); {
			var d uint64
			d, off = uvarint(c.rest, off)
			uid += membership.UID(d)
			if !yield(uid) {
				return
			}
		}
	}
}

// contains reports whether uid is a member.
func (m *members) contains(uid membership.UID) bool {
	if len(m.chunks) == 0 {
		return false
	}
	c := &m.chunks[m.chunkFor(uid)]
	if uid <= c.first {
		return uid == c.first
	}
	off, _, at, end := find(c, uid)
	return end > off && at == uid
}
