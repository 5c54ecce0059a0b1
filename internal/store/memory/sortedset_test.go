package memory

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// A sortedSet agrees with a sorted slice through random inserts, removals,
// pops from the front and cursor walks, for both of its codecs.
func TestSortedSetAgreesWithASortedSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	t.Run("due keys", func(t *testing.T) {
		testSortedSet[dueKey, dueCodec](t, rng, func() dueKey {
			// Few times and groups, so that runs share them.
			return dueKey{at: 1e12 + rng.Int64N(20), group: uint32(rng.IntN(5)), uid: membership.UID(rng.Int64N(1e9) + 1)}
		})
	})
	t.Run("expiries", func(t *testing.T) {
		testSortedSet[memberExpiry, expiryCodec](t, rng, func() memberExpiry {
			return memberExpiry{uid: membership.UID(rng.Int64N(5000) + 1), at: 1e12 + rng.Int64N(1e9) - 5e8}
		})
	})
}

func testSortedSet[T comparable, C orderedCodec[T]](t *testing.T, rng *rand.Rand, random func() T) {
	var c C
	var set sortedSet[T, C]
	var want []T // sorted, by c.compare, distinct under it
	maxChunks := 0
	find := func(v T) (int, bool) { return slices.BinarySearchFunc(want, v, c.compare) }
	check := func() {
		t.Helper()
		require.Equal(t, len(want), set.size)
		var got []T
		for v := range set.all {
			got = append(got, v)
		}
		if len(want) == 0 {
			require.Empty(t, got)
			return
		}
		require.Equal(t, want, got)
	}
	for step := range 20_000 {
		v := random()
		// Mostly inserts in the first half, so that the set grows over many
		// chunks; mostly removals and pops in the second.
		op := rng.IntN(10)
		if step < 10_000 && op >= 5 && rng.IntN(4) != 0 {
			op = 0
		}
		switch {
		case op < 5:
			i, found := find(v)
			assert.Equal(t, !found, set.insert(v))
			if !found {
				want = slices.Insert(want, i, v)
			}
		case op < 8:
			if len(want) > 0 && rng.IntN(2) == 0 {
				v = want[rng.IntN(len(want))]
			}
			i, found := find(v)
			old, removed := set.remove(v)
			require.Equal(t, found, removed)
			if found {
				assert.Equal(t, want[i], old)
				want = slices.Delete(want, i, i+1)
			}
		case op < 9:
			got, ok := set.get(v)
			i, found := find(v)
			require.Equal(t, found, ok)
			if found {
				assert.Equal(t, want[i], got)
			}
			// A cursor from v walks what follows, in step with seeks.
			cur := set.cursor(v)
			for _, w := range want[i:min(i+50, len(want))] {
				cur.seekTo(w)
				require.True(t, cur.ok)
				require.Equal(t, w, cur.v)
			}
		default:
			// Pop a few from the front, or none.
			n := rng.IntN(40)
			var popped []T
			set.popWhile(func(v T) bool {
				if len(popped) == n {
					return false
				}
				popped = append(popped, v)
				return true
			})
			k := min(n, len(want))
			require.Len(t, popped, k)
			if k > 0 {
				require.Equal(t, want[:k], popped)
			}
			want = slices.Clone(want[k:])
		}
		maxChunks = max(maxChunks, len(set.chunks))
		if step%500 == 0 {
			check()
		}
	}
	check()
	require.Greater(t, maxChunks, 10, "the set must have grown over many chunks to test their splits and merges")
	// A chunk holds at most its limit, and a set emptied holds nothing.
	for _, ch := range set.chunks {
		assert.LessOrEqual(t, len(ch.rest), c.maxBytes())
	}
	for len(want) > 0 {
		_, ok := set.remove(want[0])
		require.True(t, ok)
		want = want[1:]
	}
	assert.Empty(t, set.chunks)
	assert.Zero(t, set.size)
}

// fill builds the set a sequence of inserts would.
func TestSortedSetFill(t *testing.T) {
	var keys []dueKey
	for i := range 5000 {
		keys = append(keys, dueKey{at: 1e12 + int64(i/1000), group: uint32(i % 7), uid: membership.UID(i*37 + 1)})
	}
	slices.SortFunc(keys, dueCodec{}.compare)
	keys = slices.Compact(keys)
	var filled sortedSet[dueKey, dueCodec]
	filled.fill(keys)
	var got []dueKey
	for k := range filled.all {
		got = append(got, k)
	}
	assert.Equal(t, keys, got)
	assert.Equal(t, len(keys), filled.size)
}
