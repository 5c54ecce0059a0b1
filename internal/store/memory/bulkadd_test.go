package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory/reverse"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// An add of at least reverse.ParallelAdd users new to the group records them in
// the reverse index shard by shard on every core: into an empty group and into one
// with members, with users new to the store and users already in other
// groups, it leaves the reverse index and the count of users exactly as
// the same adds a few users at a time do.
func TestBulkAddsKeepTheReverseIndexAndCounts(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 1024))
	users := func(n int) []membership.User {
		us := make([]membership.User, n)
		for i := range us {
			us[i] = membership.User{UID: membership.UID(1 + rng.IntN(20000))}
		}
		return us
	}
	distinct := func(n, step int) []membership.User { // n users, none repeated
		us := make([]membership.User, n)
		for i := range us {
			us[i] = membership.User{UID: membership.UID(step*i + 1)}
		}
		return us
	}
	type add struct {
		group string
		users []membership.User
	}
	adds := []add{
		{"a", users(50)},
		{"b", users(3 * reverse.ParallelAdd)},     // an empty group, filled
		{"a", users(2 * reverse.ParallelAdd)},     // a group with members
		{"c", distinct(reverse.ParallelAdd, 7)},   // exactly the threshold
		{"b", users(reverse.ParallelAdd + 17)},    // many already members
		{"d", distinct(reverse.ParallelAdd-1, 5)}, // one under it
	}
	bulk, small := New(), New()
	ctx := context.Background()
	for _, a := range adds {
		res, err := storetest.Add(ctx, bulk, a.group, a.users)
		require.NoError(t, err)
		count := 0
		for chunk := range slices.Chunk(a.users, 7) {
			r, err := storetest.Add(ctx, small, a.group, chunk)
			require.NoError(t, err)
			count += r.Count
		}
		assert.Equal(t, count, res.Count, "the users %s gained", a.group)
	}
	groups := []string{"a", "b", "c", "d"}
	uids := make([]membership.UID, 0, 20001)
	for uid := range membership.UID(20001) {
		uids = append(uids, uid)
	}
	storetest.ReverseAgrees(t, bulk, groups, uids)
	for _, g := range groups {
		want, _ := storetest.ListAll(t, small, g)
		got, _ := storetest.ListAll(t, bulk, g)
		assert.Equal(t, want, got, g)
	}
	for _, uid := range uids[:3000] {
		want, _ := storetest.UserGroups(t, small, uid, membership.GroupListOptions{})
		got, _ := storetest.UserGroups(t, bulk, uid, membership.GroupListOptions{})
		require.Equal(t, want, got, fmt.Sprint(uid))
	}
	assert.Equal(t, small.Stats().Users, bulk.Stats().Users, "users in at least one group")
	assert.Equal(t, small.Stats().Members, bulk.Stats().Members)
}
