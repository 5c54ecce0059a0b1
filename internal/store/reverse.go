package store

import (
	"cmp"
	"iter"
	"slices"
	"sort"
	"strings"

	"example.com/groupmembership/membership"
)

// reverseIndex maps users to the groups they are in. Group ids are interned
// as numbers, and every membership is one (uid, group number) pair in a
// sorted set of chunks, ordered by uid and then by group id bytes: a user's
// groups lie together, in the order they are listed, and a page is found by
// binary search.
type reverseIndex struct {
	names   []string          // group number to group id; "" for a free number
	numbers map[string]uint32 // group id to number
	free    []uint32          // numbers of deleted groups, for reuse

	chunks [][]pair // non-empty, ordered, at most maxChunk pairs each
}

type pair struct {
	uid   membership.UID
	group uint32
}

func newReverseIndex() *reverseIndex {
	return &reverseIndex{numbers: make(map[string]uint32)}
}

// number returns the number of groupID, giving it one if it has none.
func (r *reverseIndex) number(groupID string) uint32 {
	if n, ok := r.numbers[groupID]; ok {
		return n
	}
	var n uint32
	if len(r.free) > 0 {
		n = r.free[len(r.free)-1]
		r.free = r.free[:len(r.free)-1]
		r.names[n] = groupID
	} else {
		n = uint32(len(r.names))
		r.names = append(r.names, groupID)
	}
	r.numbers[groupID] = n
	return n
}

// release frees the number of a group that has no members left.
func (r *reverseIndex) release(groupID string) {
	if n, ok := r.numbers[groupID]; ok {
		delete(r.numbers, groupID)
		r.names[n] = ""
		r.free = append(r.free, n)
	}
}

// compare orders p against the key (uid, name).
func (r *reverseIndex) compare(p pair, uid membership.UID, name string) int {
	if c := cmp.Compare(p.uid, uid); c != 0 {
		return c
	}
	return strings.Compare(r.names[p.group], name)
}

// position returns where the first pair >= (uid, name) is or would go:
// chunk i, index j. With no chunks it returns 0, 0.
func (r *reverseIndex) position(uid membership.UID, name string) (i, j int) {
	if len(r.chunks) == 0 {
		return 0, 0
	}
	i = sort.Search(len(r.chunks), func(i int) bool {
		c := r.chunks[i]
		return r.compare(c[len(c)-1], uid, name) >= 0
	})
	if i == len(r.chunks) {
		return i - 1, len(r.chunks[i-1]) // after everything
	}
	c := r.chunks[i]
	j = sort.Search(len(c), func(j int) bool { return r.compare(c[j], uid, name) >= 0 })
	return i, j
}

// add records that uid is in group number n.
func (r *reverseIndex) add(uid membership.UID, n uint32) {
	p := pair{uid: uid, group: n}
	if len(r.chunks) == 0 {
		r.chunks = [][]pair{{p}}
		return
	}
	i, j := r.position(uid, r.names[n])
	c := r.chunks[i]
	if j < len(c) && c[j] == p {
		return
	}
	if len(c) == cap(c) {
		grown := make([]pair, len(c), len(c)+len(c)/8+4)
		copy(grown, c)
		c = grown
	}
	c = slices.Insert(c, j, p)
	if len(c) > maxChunk {
		half := len(c) / 2
		r.chunks[i] = slices.Clip(slices.Clone(c[:half]))
		r.chunks = slices.Insert(r.chunks, i+1, slices.Clone(c[half:]))
	} else {
		r.chunks[i] = c
	}
}

// remove forgets that uid is in group number n.
func (r *reverseIndex) remove(uid membership.UID, n uint32) {
	if len(r.chunks) == 0 {
		return
	}
	i, j := r.position(uid, r.names[n])
	c := r.chunks[i]
	if j == len(c) || c[j] != (pair{uid: uid, group: n}) {
		return
	}
	c = slices.Delete(c, j, j+1)
	switch {
	case len(c) == 0:
		r.chunks = slices.Delete(r.chunks, i, i+1)
	case len(c) < maxChunk/4 && i+1 < len(r.chunks) && len(c)+len(r.chunks[i+1]) <= maxChunk/2:
		r.chunks[i] = slices.Concat(c, r.chunks[i+1])
		r.chunks = slices.Delete(r.chunks, i+1, i+2)
	default:
		r.chunks[i] = c
	}
}

// groups yields the ids of uid's groups after the group id after ("" for
// all), in byte order, and returns how many groups uid is in.
func (r *reverseIndex) groups(uid membership.UID, after string) (total int, ids iter.Seq[string]) {
	i, j := r.position(uid, "")
	for k, l := i, j; k < len(r.chunks); k, l = k+1, 0 {
		c := r.chunks[k]
		for l < len(c) && c[l].uid == uid {
			total++
			l++
		}
		if l < len(c) {
			break
		}
	}
	if after != "" {
		i, j = r.position(uid, after)
	}
	return total, func(yield func(string) bool) {
		for k, l := i, j; k < len(r.chunks); k, l = k+1, 0 {
			c := r.chunks[k]
			for ; l < len(c); l++ {
				p := c[l]
				if p.uid != uid {
					return
				}
				if name := r.names[p.group]; name > after || after == "" {
					if !yield(name) {
						return
					}
				}
			}
		}
	}
}
