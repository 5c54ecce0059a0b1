package client_test

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/client"
	"example.com/groupmembership/membershiptest"
)

// nestingCopy is what a follower of the feed keeps: each group's members
// and subgroups, applied from the changes as the reference says.
type nestingCopy struct {
	members map[string]map[int64]bool
	subs    map[string]map[string]bool
}

func newNestingCopy() *nestingCopy {
	return &nestingCopy{members: map[string]map[int64]bool{}, subs: map[string]map[string]bool{}}
}

func setOf[K comparable](m map[string]map[K]bool, key string) map[K]bool {
	if m[key] == nil {
		m[key] = map[K]bool{}
	}
	return m[key]
}

func (f *nestingCopy) apply(t *testing.T, c client.Change) {
	switch c.Op {
	case client.OpAdd:
		for _, uid := range c.UIDs {
			setOf(f.members, c.Group)[uid] = true
		}
	case client.OpRemove, client.OpExpire:
		for _, uid := range c.UIDs {
			delete(setOf(f.members, c.Group), uid)
		}
	case client.OpReplace:
		f.members[c.Group] = map[int64]bool{}
		for _, uid := range c.UIDs {
			f.members[c.Group][uid] = true
		}
	case client.OpDeleteGroup:
		delete(f.members, c.Group)
		delete(f.subs, c.Group)
		for _, subs := range f.subs {
			delete(subs, c.Group)
		}
	case client.OpRemoveUser:
		for _, members := range f.members {
			delete(members, c.UIDs[0])
		}
	case client.OpAddGroups:
		for _, g := range c.Groups {
			setOf(f.subs, c.Group)[g.Group] = true
		}
	case client.OpRemoveGroups, client.OpExpireGroups:
		for _, g := range c.Groups {
			delete(setOf(f.subs, c.Group), g.Group)
		}
	case client.OpReplaceGroups:
		f.subs[c.Group] = map[string]bool{}
		for _, g := range c.Groups {
			f.subs[c.Group][g.Group] = true
		}
	case client.OpBatch:
		for _, sub := range c.Changes {
			f.apply(t, sub)
		}
	default:
		t.Fatalf("an op the follower does not know: %s", c.Op)
	}
}

// below returns every group below g, g excluded, by a walk of the copy.
func (f *nestingCopy) below(g string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(g string) {
		for s := range f.subs[g] {
			if !seen[s] {
				seen[s] = true
				walk(s)
			}
		}
	}
	walk(g)
	return append([]string{}, slices.Sorted(maps.Keys(seen))...)
}

// transitiveMembers returns the users of g and of every group below it.
func (f *nestingCopy) transitiveMembers(g string) []int64 {
	users := map[int64]bool{}
	for _, h := range append(f.below(g), g) {
		for uid := range f.members[h] {
			users[uid] = true
		}
	}
	return append([]int64{}, slices.Sorted(maps.Keys(users))...)
}

// TestAFollowerRebuildsTransitiveAnswersFromTheFeed writes random
// nestings and memberships (cycles refused on the way), nestings that end
// on the fake clock, deletions and batches, then rebuilds every group's
// transitive members and subgroups from /changes alone, and compares them
// with what the service answers.
func TestAFollowerRebuildsTransitiveAnswersFromTheFeed(t *testing.T) {
	srv := membershiptest.NewServer(t, membershiptest.WithClock(t0))
	c, ctx := srv.Client, t.Context()
	rng := rand.New(rand.NewPCG(46, 1))
	groups := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	group := func() string { return groups[rng.IntN(len(groups))] }
	pick := func(n int) []string {
		var out []string
		for range n {
			out = append(out, group())
		}
		return out
	}
	refused := 0
	for i := range 300 {
		var err error
		switch rng.IntN(10) {
		case 0, 1:
			_, err = c.Add(ctx, group(), client.Users(rng.Int64N(20)+1, rng.Int64N(20)+1))
		case 2:
			_, err = c.Remove(ctx, group(), []int64{rng.Int64N(20) + 1})
		case 3, 4:
			sub := client.NewSubgroup(group())
			if rng.IntN(3) == 0 {
				sub = sub.WithExpiry(client.ExpiresAfter(time.Duration(rng.IntN(5)+1) * time.Minute))
			}
			_, err = c.AddSubgroups(ctx, group(), []client.Subgroup{sub})
		case 5:
			_, err = c.RemoveSubgroups(ctx, group(), pick(2))
		case 6:
			_, err = c.ReplaceSubgroups(ctx, group(), client.Subgroups(pick(rng.IntN(3))...))
		case 7:
			if rng.IntN(4) == 0 {
				_, err = c.DeleteGroup(ctx, group())
			}
		case 8:
			_, err = c.Batch(ctx, []client.BatchChange{
				{Op: client.OpAddGroups, Group: group(), Groups: client.Subgroups(group())},
				{Op: client.OpAdd, Group: group(), Users: client.Users(rng.Int64N(20) + 1)},
				{Op: client.OpRemoveGroups, Group: group(), Groups: client.Subgroups(group())},
			})
		case 9:
			srv.Advance(time.Minute)
		}
		if client.IsCycle(err) {
			refused++
			continue
		}
		require.NoError(t, err, "step %d", i)
	}
	require.Greater(t, refused, 0, "some writes made cycles: the test covers them")

	follower := newNestingCopy()
	ops := map[client.Op]int{}
	var after client.Revision
	for {
		page, err := c.Changes(ctx, client.ChangesOptions{After: after})
		require.NoError(t, err)
		if len(page.Changes) == 0 {
			break
		}
		for _, ch := range page.Changes {
			follower.apply(t, ch)
			ops[ch.Op]++
			after = ch.Revision
		}
	}
	for _, op := range []client.Op{client.OpAddGroups, client.OpRemoveGroups, client.OpReplaceGroups, client.OpExpireGroups, client.OpDeleteGroup, client.OpBatch} {
		assert.Positive(t, ops[op], "the feed has %s changes: %v", op, ops)
	}
	nested := 0
	for _, g := range groups {
		members, err := collect(c.Members(ctx, g, client.ListOptions{Transitive: true, Limit: 7}))
		require.NoError(t, err)
		assert.Equal(t, follower.transitiveMembers(g), uidsOf(members), "the users of %s and below", g)
		below, err := collect(c.Subgroups(ctx, g, client.PageOptions{Transitive: true, Limit: 3}))
		require.NoError(t, err)
		ids := []string{}
		for _, b := range below {
			ids = append(ids, b.Group)
		}
		assert.Equal(t, follower.below(g), ids, "the groups below %s", g)
		nested += len(ids)
		for _, uid := range follower.transitiveMembers(g) {
			_, via, ok, err := c.TransitiveMember(ctx, g, uid)
			require.NoError(t, err)
			require.True(t, ok, "%d in %s", uid, g)
			assert.True(t, follower.members[via[len(via)-1]][uid], "via %v ends at a group that holds %d", via, uid)
			for j := 1; j < len(via); j++ {
				assert.True(t, follower.subs[via[j-1]][via[j]], "via %v: %s holds %s", via, via[j-1], via[j])
			}
		}
	}
	assert.Greater(t, nested, len(groups), "the nesting is not trivial: "+strconv.Itoa(nested))
}
