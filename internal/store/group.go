package store

import (
	"slices"
	"sort"

	"example.com/groupmembership/membership"
)

// maxChunk is the most uids one chunk holds. A few hundred keeps an insert's
// copy within a few kilobytes while a group of a million needs a few
// thousand chunks.
const maxChunk = 512

// fillChunk is how full chunks are built when a group is filled in bulk,
// leaving room for later inserts before a chunk must split.
const fillChunk = maxChunk * 3 / 4

// members is a sorted set of uids, kept as a list of sorted chunks: a member
// costs about 8 bytes, listing needs no sort, and finding a uid is a binary
// search over the chunks and then within one.
type members struct {
	// chunks are non-empty and ordered: every uid of chunks[i] is below every
	// uid of chunks[i+1]. Each holds at most maxChunk+1 uids while it is being
	// split, maxChunk otherwise.
	chunks [][]membership.UID
	size   int
}

// chunkFor returns the index of the chunk that holds uid or would: the first
// whose last uid is >= uid, or the last chunk.
func (m *members) chunkFor(uid membership.UID) int {
	i := sort.Search(len(m.chunks), func(i int) bool {
		c := m.chunks[i]
		return c[len(c)-1] >= uid
	})
	return min(i, len(m.chunks)-1)
}

// add adds uid and reports whether it was new.
func (m *members) add(uid membership.UID) bool {
	if len(m.chunks) == 0 {
		m.chunks = [][]membership.UID{make([]membership.UID, 1, 4)}
		m.chunks[0][0] = uid
		m.size = 1
		return true
	}
	i := m.chunkFor(uid)
	c := m.chunks[i]
	j, found := slices.BinarySearch(c, uid)
	if found {
		return false
	}
	m.chunks = insertAt(m.chunks, i, j, uid, maxChunk)
	m.size++
	return true
}

// fill fills an empty set from uids, which must be sorted and distinct, in
// chunks of fillChunk with no spare capacity.
func (m *members) fill(uids []membership.UID) {
	for len(uids) > 0 {
		n := min(len(uids), fillChunk)
		m.chunks = append(m.chunks, slices.Clone(uids[:n]))
		uids = uids[n:]
		m.size += n
	}
}

// remove removes uid and reports whether it was a member.
func (m *members) remove(uid membership.UID) bool {
	if len(m.chunks) == 0 {
		return false
	}
	i := m.chunkFor(uid)
	c := m.chunks[i]
	j, found := slices.BinarySearch(c, uid)
	if !found {
		return false
	}
	m.chunks = deleteAt(m.chunks, i, j, maxChunk)
	m.size--
	return true
}

// all yields the uids in ascending order.
func (m *members) all(yield func(membership.UID) bool) {
	for _, c := range m.chunks {
		for _, uid := range c {
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
	_, found := slices.BinarySearch(m.chunks[m.chunkFor(uid)], uid)
	return found
}

// positionAfter returns where the first uid above uid is: chunk i, index j
// (i == len(m.chunks) when there is none). Finding it is two binary
// searches, however many come before it.
func (m *members) positionAfter(uid membership.UID) (i, j int) {
	if len(m.chunks) == 0 {
		return 0, 0
	}
	i = m.chunkFor(uid)
	c := m.chunks[i]
	if c[len(c)-1] <= uid {
		return i + 1, 0 // every uid of chunk i is <= uid
	}
	j = sort.Search(len(c), func(j int) bool { return c[j] > uid })
	return i, j
}
