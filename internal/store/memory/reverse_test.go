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
			_, err := storetest.Add(context.Background(), m, g, []membership.User{{UID: uid}})
			require.NoError(t, err)
			want[uid][g] = true
		} else {
			_, err := storetest.Remove(context.Background(), m, g, []membership.UID{uid})
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
	live := 0
	for i := range m.shards {
		for g := range m.shards[i].groups.All {
			live++
			assert.Less(t, g.Number/uint32(len(m.shards)), uint32(len(groups)), "numbers of deleted groups are reused")
		}
	}
	assert.NotZero(t, live)
}

func TestUserGroupsPaging(t *testing.T) {
	m := New()
	ctx := context.Background()
	var ids []string
	for i := range 25 {
		id := fmt.Sprintf("grp-%02d", i)
		ids = append(ids, id)
		_, err := storetest.Add(ctx, m, id, []membership.User{{UID: 7}, {UID: 8}})
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
