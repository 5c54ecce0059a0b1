package packed

import (
	"maps"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// checkPacked checks the invariants of s's chunks: each within limit bytes
// and limit/2 deltas, a whole number of deltas of its width with the room of a load
// after them, its width the fewest bytes its largest delta needs or more,
// and the chunks in order.
func checkPacked(t *testing.T, s *set, limit int) {
	t.Helper()
	for i := range s.chunks {
		c := &s.chunks[i]
		require.LessOrEqual(t, len(c.rest), limit, "chunk %d is over its limit", i)
		require.LessOrEqual(t, c.len(), limit/2, "chunk %d holds too many deltas", i)
		if len(c.rest) == 0 {
			require.Zero(t, c.w, "chunk %d has a width and no deltas", i)
			continue
		}
		require.NotZero(t, c.w, "chunk %d has deltas and no width", i)
		require.Zero(t, len(c.rest)%int(c.w), "chunk %d holds part of a delta", i)
		require.GreaterOrEqual(t, cap(c.rest), len(c.rest)+loadSlack, "chunk %d has no room for the load of its last delta", i)
		ps := c.pairs(nil)
		for j := 1; j < len(ps); j++ {
			require.Negative(t, ComparePairs(ps[j-1], ps[j]), "chunk %d is out of order at %d", i, j)
			require.LessOrEqual(t, bits.Len32(ps[j].Group), int(c.g), "chunk %d: a group over its bits", i)
		}
		if i > 0 {
			require.Negative(t, ComparePairs(s.chunks[i-1].last(), c.first), "chunks %d and %d overlap", i-1, i)
		}
	}
}

// checkHolds checks s's invariants (checkPacked) and that it holds exactly
// the pairs of want, in order.
func checkHolds(t *testing.T, s *set, limit int, want map[Pair]bool) {
	t.Helper()
	checkPacked(t, s, limit)
	got := pairsOf(s)
	wanted := slices.SortedFunc(maps.Keys(want), ComparePairs)
	require.Equal(t, wanted, got)
}

// TestPackedSetWidths adds and removes pairs whose deltas need every width
// from one byte to eight, with groups of every size, beside a map: a delta
// that does not fit its chunk repacks it, and the set stays exact.
func TestPackedSetWidths(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var s set
	want := map[Pair]bool{}
	// Users from a few clusters far apart (the distances between them need
	// eight bytes), near each other within a cluster.
	bases := []membership.UID{1, 1 << 20, 1 << 40, math.MaxInt64 / 2, math.MaxInt64 - 1<<30}
	randomPair := func() Pair {
		u := bases[rng.IntN(len(bases))] + membership.UID(rng.Int64N(1<<uint(rng.IntN(29)+1)))
		g := uint32(rng.Uint64N(1 << uint(rng.IntN(33))))
		if rng.IntN(2) == 0 {
			g = uint32(rng.IntN(4))
		}
		return Pair{User: u, Group: g}
	}
	// present holds want's pairs in an order the steps alone decide (a
	// map's is random), so that the pair removed is the rng's choice.
	var present []Pair
	at := map[Pair]int{} // a pair's index in present
	for step := range 40_000 {
		p := randomPair()
		if step%3 == 2 && len(present) > 0 { // remove one that is there
			p = present[rng.IntN(len(present))]
		}
		if want[p] {
			removed, _ := s.remove(p, 64)
			require.True(t, removed, "step %d: remove %v", step, p)
			delete(want, p)
			i, last := at[p], present[len(present)-1]
			present[i], at[last] = last, i
			present = present[:len(present)-1]
			delete(at, p)
		} else {
			added, _ := s.add(p, 64)
			require.True(t, added, "step %d: add %v", step, p)
			want[p] = true
			at[p] = len(present)
			present = append(present, p)
		}
		added, _ := s.add(p, 64)
		require.Equal(t, !want[p], added, "step %d: add %v again", step, p)
		if !want[p] {
			removed, _ := s.remove(p, 64)
			require.True(t, removed)
		}
		require.Equal(t, want[p], s.contains(p))
		if step%2000 == 0 {
			checkPacked(t, &s, 64)
		}
	}
	checkHolds(t, &s, 64, want)
	widths := map[uint8]bool{}
	for _, c := range s.chunks {
		widths[c.w] = true
	}
	require.True(t, widths[8] && widths[1], "the chunks' widths: %v", widths)
}

// TestPackChunksEndsWhereADeltaCannotFit fills a set whose neighbours are
// too far apart for their delta and group bits to share eight bytes: each
// such pair starts a chunk of its own.
func TestPackChunksEndsWhereADeltaCannotFit(t *testing.T) {
	ps := []Pair{{User: 1, Group: math.MaxUint32}, {User: math.MaxInt64 - 1, Group: math.MaxUint32}, {User: math.MaxInt64, Group: 0}}
	chunks := packChunks(ps, 1000)
	require.Len(t, chunks, 2)
	s := set{chunks: chunks}
	checkPacked(t, &s, 1000)
	require.Equal(t, ps, pairsOf(&s))
}

// pairsOf returns the pairs of s, in order.
func pairsOf(s *set) []Pair {
	var ps []Pair
	for i := range s.chunks {
		ps = s.chunks[i].pairs(ps)
	}
	return ps
}
