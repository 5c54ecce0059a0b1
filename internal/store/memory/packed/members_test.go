package packed

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// checkMembers checks m's invariants and that it holds exactly want, in
// the smallest form that holds them: packed in its struct, packed in its
// heap set, or in chunks.
func checkMembers(t *testing.T, m *Members, want map[membership.UID]bool) {
	t.Helper()
	var got []membership.UID
	var words [mediumWords]uint64
	if p := m.packedForm(&words); p != nil {
		got = p.uids(nil)
	} else {
		checkPacked(t, &m.big.chunked.set, maxChunkBytes)
		for i, c := range m.big.chunked.chunks {
			uids := []membership.UID{}
			for _, p := range c.pairs(nil) {
				require.Zero(t, p.Group, "chunk %d holds a member with a group", i)
				uids = append(uids, p.User)
			}
			if i > 0 {
				require.Less(t, got[len(got)-1], c.first.User, "chunks %d and %d overlap", i-1, i)
			}
			got = append(got, uids...)
		}
		require.Equal(t, len(want), m.big.chunked.size)
	}
	require.True(t, slices.IsSorted(got), "the uids are not sorted")
	require.Len(t, slices.Compact(slices.Clone(got)), len(got), "a uid is there twice")
	require.Equal(t, len(want), m.Len())
	require.Len(t, got, len(want))
	for _, uid := range got {
		require.True(t, want[uid], "uid %d is not a member", uid)
	}
	switch {
	case fits(got, smallWords):
		require.Nil(t, m.big, "%d members that fit the struct", len(got))
	case fits(got, mediumWords):
		require.NotNil(t, m.big, "%d members that fit the heap set's words", len(got))
		require.Nil(t, m.big.chunked, "%d members that fit the heap set's words", len(got))
	default:
		require.NotNil(t, m.big, "%d members in chunks", len(got))
		require.NotEmpty(t, m.big.chunked.chunks, "%d members in chunks", len(got))
		require.Equal(t, [smallWords]uint64{}, m.small, "no packed words beside chunks")
	}
	var yielded []membership.UID
	for uid := range m.All {
		yielded = append(yielded, uid)
	}
	require.Equal(t, got, yielded)
}

func TestMembersAgainstAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, span := range []int64{50, 3000, 1 << 62} {
		var m Members
		want := map[membership.UID]bool{}
		for step := range 20000 {
			uid := membership.UID(rng.Int64N(span) + 1)
			// Add more than remove at first, so chunks fill and split; then
			// remove more, so they thin out and merge.
			if (step < 12000) == (rng.IntN(4) != 0) {
				assert.Equal(t, !want[uid], m.Add(uid), "add(%d)", uid)
				want[uid] = true
			} else {
				assert.Equal(t, want[uid], m.Remove(uid), "remove(%d)", uid)
				delete(want, uid)
			}
			if step%1000 == 0 {
				checkMembers(t, &m, want)
			}
		}
		checkMembers(t, &m, want)
	}
}

func TestMembersFillThenChange(t *testing.T) {
	var m Members
	var uids []membership.UID
	want := map[membership.UID]bool{}
	for uid := membership.UID(10); uid <= 20000; uid += 10 {
		uids = append(uids, uid)
		want[uid] = true
	}
	m.Fill(uids)
	checkMembers(t, &m, want)
	for _, uid := range []membership.UID{1, 15, 20001, 5005} {
		assert.True(t, m.Add(uid))
		want[uid] = true
	}
	for _, uid := range []membership.UID{10, 20000, 7} {
		assert.Equal(t, want[uid], m.Remove(uid))
		delete(want, uid)
	}
	checkMembers(t, &m, want)
}

func TestMembersEmpty(t *testing.T) {
	var m Members
	assert.False(t, m.Remove(1))
	for range m.All {
		t.Fatal("an empty set yields nothing")
	}
	assert.True(t, m.Add(1))
	assert.True(t, m.Remove(1))
	assert.Equal(t, Members{}, m)
}
