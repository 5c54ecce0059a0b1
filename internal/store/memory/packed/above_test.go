package packed

import (
	"iter"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// A page of a large group's members (a list's After and Limit) starts
// right after every chunk's first and last uid, and one either side, as
// added and after a fill (a snapshot's load, which makes other chunks),
// with uids near 1 and math.MaxInt64.
func TestPagesStartAtChunkBoundaries(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	var m Members
	set := map[membership.UID]bool{}
	var users []membership.UID
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
			users = append(users, u)
		}
	}
	for b := range slices.Chunk(users, 100) {
		for _, u := range b {
			m.Add(u)
		}
	}
	want := make([]membership.UID, 0, len(set))
	for u := range set {
		want = append(want, u)
	}
	slices.Sort(want)
	check := func(m *Members) {
		require.Greater(t, len(m.big.chunked.chunks), 10)
		var afters []membership.UID
		for i := range m.big.chunked.chunks {
			c := &m.big.chunked.chunks[i]
			for _, u := range []membership.UID{c.first.User, c.last().User} {
				afters = append(afters, u-1, u, u+1)
			}
		}
		afters = append(afters, 0, math.MaxInt64, math.MaxInt64-1)
		for _, after := range afters {
			for _, limit := range []int{0, 1, 3} {
				got := page(func(yield func(membership.UID) bool) { m.EachAbove(after, yield) }, limit)
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
			require.Equal(t, set[after], m.Contains(after), "member %d", after)
		}
	}
	check(&m)
	var loaded Members
	loaded.Fill(m.AppendTo(nil))
	check(&loaded)
}

// page returns at most limit (0: all) of uids.
func page(uids iter.Seq[membership.UID], limit int) []membership.UID {
	var got []membership.UID
	for uid := range uids {
		if limit > 0 && len(got) == limit {
			break
		}
		got = append(got, uid)
	}
	return got
}
