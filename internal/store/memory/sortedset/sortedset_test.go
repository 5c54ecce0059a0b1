package sortedset_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory/expiry"
	"example.com/groupmembership/internal/store/memory/sortedset"
	"example.com/groupmembership/membership"
)

// A Set agrees with a sorted slice through random inserts, removals, pops
// from the front and cursor walks, for both of the codecs of package
// expiry.
func TestSortedSetAgreesWithASortedSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	t.Run("due keys", func(t *testing.T) {
		testSortedSet(t, rng, new(expiry.DueSet), func() expiry.Key {
			// Few times and groups, so that runs share them.
			return expiry.Key{At: 1e12 + rng.Int64N(20), Group: uint32(rng.IntN(5)), UID: membership.UID(rng.Int64N(1e9) + 1)}
		})
	})
	t.Run("expiries", func(t *testing.T) {
		testSortedSet(t, rng, new(expiry.MemberSet), func() expiry.Member {
			return expiry.Member{UID: membership.UID(rng.Int64N(5000) + 1), At: 1e12 + rng.Int64N(1e9) - 5e8}
		})
	})
}

func testSortedSet[T comparable, C sortedset.Codec[T]](t *testing.T, rng *rand.Rand, set *sortedset.Set[T, C], random func() T) {
	var c C
	var want []T // sorted, by c.Compare, distinct under it
	maxChunks := 0
	find := func(v T) (int, bool) { return slices.BinarySearchFunc(want, v, c.Compare) }
	check := func() {
		t.Helper()
		require.Equal(t, len(want), set.Len())
		var got []T
		for v := range set.All {
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
			assert.Equal(t, !found, set.Insert(v))
			if !found {
				want = slices.Insert(want, i, v)
			}
		case op < 8:
			if len(want) > 0 && rng.IntN(2) == 0 {
				v = want[rng.IntN(len(want))]
			}
			i, found := find(v)
			old, removed := set.Remove(v)
			require.Equal(t, found, removed)
			if found {
				assert.Equal(t, want[i], old)
				want = slices.Delete(want, i, i+1)
			}
		case op < 9:
			got, ok := set.Get(v)
			i, found := find(v)
			require.Equal(t, found, ok)
			if found {
				assert.Equal(t, want[i], got)
			}
			// A cursor from v walks what follows, in step with seeks.
			cur := set.Cursor(v)
			for _, w := range want[i:min(i+50, len(want))] {
				cur.SeekTo(w)
				require.True(t, cur.Ok())
				require.Equal(t, w, cur.Value())
			}
		default:
			// Pop a few from the front, or none.
			n := rng.IntN(40)
			var popped []T
			set.PopWhile(func(v T) bool {
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
		maxChunks = max(maxChunks, len(sortedset.ChunkBytes(set)))
		if step%500 == 0 {
			check()
		}
	}
	check()
	require.Greater(t, maxChunks, 10, "the set must have grown over many chunks to test their splits and merges")
	// A chunk holds at most its limit, and a set emptied holds nothing.
	for _, n := range sortedset.ChunkBytes(set) {
		assert.LessOrEqual(t, n, c.MaxBytes())
	}
	for len(want) > 0 {
		_, ok := set.Remove(want[0])
		require.True(t, ok)
		want = want[1:]
	}
	assert.Empty(t, sortedset.ChunkBytes(set))
	assert.Zero(t, set.Len())
}

// Fill builds the set a sequence of inserts would.
func TestSortedSetFill(t *testing.T) {
	var keys []expiry.Key
	for i := range 5000 {
		keys = append(keys, expiry.Key{At: 1e12 + int64(i/1000), Group: uint32(i % 7), UID: membership.UID(i*37 + 1)})
	}
	slices.SortFunc(keys, expiry.CompareKeys)
	keys = slices.Compact(keys)
	var filled expiry.DueSet
	filled.Fill(keys)
	var got []expiry.Key
	for k := range filled.All {
		got = append(got, k)
	}
	assert.Equal(t, keys, got)
	assert.Equal(t, len(keys), filled.Len())
}
