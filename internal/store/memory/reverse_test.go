package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

func TestReverseIndexAgainstAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	m := New()
	want := map[membership.UID]map[string]bool{}
	groups := []string{"a", "b", "ab", "b/c", "é", "Z", "a b", "zz", "0"}
	for step := range 20000 {
		uid := membership.UID(rng.IntN(40) + 1)
		g := groups[rng.IntN(len(groups))]
		if want[uid] == nil {
			want[uid] = map[string]bool{}
		}
		if rng.IntN(3) != 0 {
			_, err := m.AddMembers(context.Background(), g, []membership.User{{UID: uid}})
			require.NoError(t, err)
			want[uid][g] = true
		} else {
			_, err := m.RemoveMembers(context.Background(), g, []membership.UID{uid})
			require.NoError(t, err)
			delete(want[uid], g)
		}
		if step%997 == 0 || step == 19999 {
			for u, gs := range want {
				var expect []string
				for g := range gs {
					expect = append(expect, g)
				}
				sort.Strings(expect)
				got, total := storetest.UserGroups(t, m, u, membership.GroupListOptions{})
				if len(expect) == 0 {
					assert.Empty(t, got, "uid %d", u)
				} else {
					assert.Equal(t, expect, got, "uid %d", u)
				}
				assert.Equal(t, len(expect), total)
			}
		}
	}
	assert.LessOrEqual(t, len(m.groupNumbers.names), len(groups), "numbers of deleted groups are reused")
}

func TestUserGroupsPaging(t *testing.T) {
	m := New()
	ctx := context.Background()
	var ids []string
	for i := range 25 {
		id := fmt.Sprintf("grp-%02d", i)
		ids = append(ids, id)
		_, err := m.AddMembers(ctx, id, []membership.User{{UID: 7}, {UID: 8}})
		require.NoError(t, err)
	}
	got, total := storetest.UserGroups(t, m, 7, membership.GroupListOptions{Limit: 10})
	assert.Equal(t, 25, total)
	assert.Equal(t, ids[:10], got)
	got, _ = storetest.UserGroups(t, m, 7, membership.GroupListOptions{After: ids[9], Limit: 10})
	assert.Equal(t, ids[10:20], got)
	got, _ = storetest.UserGroups(t, m, 7, membership.GroupListOptions{After: "grp-195"}) // between grp-19 and grp-20
	assert.Equal(t, ids[20:], got)
	got, _ = storetest.UserGroups(t, m, 7, membership.GroupListOptions{After: ids[24]})
	assert.Empty(t, got)
	got, total = storetest.UserGroups(t, m, 9, membership.GroupListOptions{})
	assert.Empty(t, got)
	assert.Zero(t, total)
	assert.True(t, slices.IsSorted(ids))
}

// add and remove tell whether the pair was a uid's first or last, across
// chunk boundaries, as a map of each uid's pairs does; the chunks hold
// exactly the pairs of the map, in order, each within its bytes. Small
// spans put many pairs on each uid; the large one needs the longest
// varints.
func TestPairSetTellsFirstAndLastOfAUID(t *testing.T) {
	for _, span := range []struct {
		uids   int64
		groups uint32
	}{{300, 20}, {1 << 62, 1<<32 - 1}} {
		t.Run(fmt.Sprint(span.uids), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 8))
			var s pairSet
			have := map[pair]bool{}
			count := map[membership.UID]int{}
			var probes []membership.UID
			for step := range 20000 {
				p := pair{user: membership.UID(1 + rng.Int64N(span.uids)), group: rng.Uint32N(span.groups)}
				if len(probes) > 0 && rng.IntN(2) == 0 {
					p.user = probes[rng.IntN(len(probes))] // another group of a uid seen
				}
				probes = append(probes, p.user)
				if (step < 12000) == (rng.IntN(3) != 0) {
					first := !have[p] && count[p.user] == 0
					if !have[p] {
						have[p] = true
						count[p.user]++
					}
					require.Equal(t, first, s.add(p), "step %d: add %v", step, p)
				} else {
					wasLast := have[p] && count[p.user] == 1
					if have[p] {
						delete(have, p)
						count[p.user]--
					}
					require.Equal(t, wasLast, s.remove(p), "step %d: remove %v", step, p)
				}
				probe := probes[rng.IntN(len(probes))] + membership.UID(rng.IntN(2))
				require.Equal(t, count[probe] > 0, s.hasUser(probe), "step %d: has %d", step, probe)
				if step%1000 == 0 {
					checkPairs(t, &s, have)
				}
			}
			checkPairs(t, &s, have)
			require.Greater(t, len(s.chunks), 10, "the pairs spread over many chunks")
		})
	}
}

// checkPairs checks that s holds exactly the pairs of want, in order, each
// chunk within its bytes.
func checkPairs(t *testing.T, s *pairSet, want map[pair]bool) {
	t.Helper()
	checkHolds(t, &s.packedSet, maxPairChunkBytes, want)
}
