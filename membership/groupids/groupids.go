// Package groupids is sets of group ids, of exact ids and of prefixes,
// kept as sorted, disjoint ranges of ids in byte order: a look-up is a
// binary search, and a store counts and pages the groups of a set as
// ranges of its index. It knows nothing of what a valid id is: whoever
// makes a set checks its ids first (membership.ValidateGroupID).
package groupids

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Range is the ids from Start, included, up to End, excluded, in byte
// order; an End of "" has no end.
type Range struct {
	Start, End string
}

// contains reports whether id is in r.
func (r Range) contains(id string) bool {
	return id >= r.Start && (r.End == "" || id < r.End)
}

// Intersect returns the ids both r and o hold, and false when there are
// none.
func (r Range) Intersect(o Range) (Range, bool) {
	out := Range{Start: max(r.Start, o.Start), End: r.End}
	if out.End == "" || o.End != "" && o.End < out.End {
		out.End = o.End
	}
	return out, out.End == "" || out.Start < out.End
}

// PrefixRange returns the range of the ids that start with prefix: every
// id for "".
func PrefixRange(prefix string) Range {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return Range{Start: prefix, End: string(b[:i+1])}
		}
	}
	return Range{Start: prefix} // "", or only 0xff bytes: no end
}

// exactRange returns the range of id alone: no group id holds a control
// character, so id followed by a NUL byte is the next string after it.
func exactRange(id string) Range { return Range{Start: id, End: id + "\x00"} }

// Set is a set of group ids. The zero Set is empty.
type Set struct {
	ranges []Range // sorted by Start, disjoint, none empty
}

// New returns the set of the ids exact and of every id that starts with
// one of prefixes ("" starts every id). No id may hold a control
// character.
func New(exact, prefixes []string) Set {
	ranges := make([]Range, 0, len(exact)+len(prefixes))
	for _, id := range exact {
		ranges = append(ranges, exactRange(id))
	}
	for _, p := range prefixes {
		ranges = append(ranges, PrefixRange(p))
	}
	return Set{ranges: merge(ranges)}
}

// All returns the set of every id.
func All() Set { return Set{ranges: []Range{{}}} }

// merge returns ranges sorted, with those that overlap or touch made one.
func merge(ranges []Range) []Range {
	slices.SortFunc(ranges, func(a, b Range) int { return strings.Compare(a.Start, b.Start) })
	var out []Range
	for _, r := range ranges {
		if n := len(out); n > 0 && (out[n-1].End == "" || r.Start <= out[n-1].End) {
			if out[n-1].End != "" && (r.End == "" || r.End > out[n-1].End) {
				out[n-1].End = r.End
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// Contains reports whether id is in s.
func (s Set) Contains(id string) bool {
	i, _ := slices.BinarySearchFunc(s.ranges, id, func(r Range, id string) int { return strings.Compare(r.Start, id) })
	// ranges[i-1] is the last range that starts before id.
	if i < len(s.ranges) && s.ranges[i].Start == id {
		return true
	}
	return i > 0 && s.ranges[i-1].contains(id)
}

// All reports whether s holds every id.
func (s Set) All() bool {
	return len(s.ranges) == 1 && s.ranges[0] == Range{}
}

// Ranges returns the ranges of s, sorted and disjoint. The caller must not
// change them.
func (s Set) Ranges() []Range { return s.ranges }

// Digest returns 16 hex digits that tell s from another set: the same
// for the same ids, however the set was given.
func (s Set) Digest() string {
	h := sha256.New()
	for _, r := range s.ranges {
		fmt.Fprintf(h, "%q %q\n", r.Start, r.End)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
