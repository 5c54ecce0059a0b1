package memory

import (
	"context"
	"iter"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// TestReviewPagingAtChunkBoundaries lists pages of a large group after
// every chunk's first and last uid, and one either side, before and after
// a snapshot round trip (whose fill makes other chunks), with uids near 1
// and math.MaxInt64.
func TestReviewPagingAtChunkBoundaries(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 9))
	m := New()
	set := map[membership.UID]bool{}
	var users []membership.User
	for len(set) < 6000 {
		var u membership.UID
		switch rng.IntN(3) {
		case 0:
			u = membership.UID(1 + rng.Int64N(4000))
		case 1:
			u = membership.UID(math.MaxInt64 - rng.Int64N(4000))
		default:
			u = membership.UID(1 + rng.Int64N(math.MaxInt64))
		}
		if !set[u] {
			set[u] = true
			users = append(users, membership.User{UID: u})
		}
	}
	for b := range slices.Chunk(users, 100) {
		_, err := m.AddMembers(ctx, "big", b)
		require.NoError(t, err)
	}
	want := make([]membership.UID, 0, len(set))
	for u := range set {
		want = append(want, u)
	}
	slices.Sort(want)
	check := func(m *Store) {
		g := m.shardOf("big").groups["big"]
		require.Greater(t, len(g.members.chunks), 10)
		var afters []membership.UID
		for i := range g.members.chunks {
			c := &g.members.chunks[i]
			for _, u := range []membership.UID{c.first.user, c.last().user} {
				afters = append(afters, u-1, u, u+1)
			}
		}
		afters = append(afters, 0, math.MaxInt64, math.MaxInt64-1)
		for _, after := range afters {
			for _, limit := range []int{0, 1, 3} {
				var got []membership.UID
				_, err := m.ListMembers(ctx, "big", membership.ListOptions{After: after, Limit: limit}, func(_ int, ms iter.Seq[membership.Member]) {
					for mb := range ms {
						got = append(got, mb.UID)
					}
				})
				require.NoError(t, err)
				i := len(want)
				if after < math.MaxInt64 {
					i, _ = slices.BinarySearch(want, after+1)
				}
				w := want[i:]
				if limit > 0 && len(w) > limit {
					w = w[:limit]
				}
				if len(w) == 0 {
					require.Empty(t, got, "after %d limit %d", after, limit)
				} else {
					require.Equal(t, w, got, "after %d limit %d", after, limit)
				}
			}
			_, ok, err := m.Member(ctx, "big", after)
			require.NoError(t, err)
			require.Equal(t, set[after], ok, "member %d", after)
		}
	}
	check(m)
	check(roundTrip(t, m, DefaultShards, func(*Store) {}))
}
