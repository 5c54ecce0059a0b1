// Package batchtest is the part of the store contract about batches: many
// writes to many groups, applied all or nothing as one change with one
// revision.
package batchtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// Contract checks Batch: many writes to many groups, applied all or nothing
// as one change with one revision.
func Contract(t *testing.T, newStore func(t *testing.T) membership.Store) {
	storetest.Run(t, newStore, []storetest.Case[membership.Store]{
		{Name: "a batch is one change with one revision, its writes in order", Test: testOneChange},
		{Name: "a user moved in a batch keeps its nickname", Test: testMoveKeepsNickname},
		{Name: "a precondition that fails refuses the whole batch, naming the write", Test: testPreconditionRefusesBatch},
		{Name: "a batch that would remove too many members is refused whole", Test: testTooManyRemovedRefused},
		{Name: "a batch that changes nothing takes no revision", Test: testNoChangeNoRevision},
		{Name: "readers never see a batch's move half done", Test: testMoveNeverHalfDone},
		{Name: "a follower reproduces every list after batches", Test: testFollowerAfterBatches},
	})
}

func testOneChange(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustAdd(t, s, "a", []membership.User{storetest.Nicknamed(1, "Ann"), {UID: 2}})
	storetest.MustAdd(t, s, "gone", storetest.UsersOf(9))
	before := storetest.Latest(t, s)
	res := storetest.MustBatch(t, s, membership.Batch{Actor: 42, Writes: []membership.Write{
		{Op: membership.OpRemove, GroupID: "a", UIDs: []membership.UID{1}},
		{Op: membership.OpAdd, GroupID: "b", Users: storetest.UsersOf(1, 3)},
		{Op: membership.OpReplace, GroupID: "c", Users: storetest.UsersOf(4)},
		{Op: membership.OpDeleteGroup, GroupID: "gone"},
		{Op: membership.OpAdd, GroupID: "d", Users: storetest.UsersOf(5)},
		{Op: membership.OpDeleteGroup, GroupID: "d"},
	}})
	assert.Equal(t, before+1, res.Revision)
	assert.Equal(t, []membership.Result{
		{Count: 1, Revision: before + 1}, {Count: 2, Revision: before + 1}, {Count: 1, Revision: before + 1},
		{Count: 1, Revision: before + 1}, {Count: 1, Revision: before + 1}, {Count: 1, Revision: before + 1},
	}, res.Results)
	for group, want := range map[string][]membership.Member{
		"a": {{UID: 2}}, "b": {{UID: 1, Nickname: "Ann"}, {UID: 3}}, "c": {{UID: 4}}, "gone": {}, "d": {},
	} {
		got, _ := storetest.ListAll(t, s, group)
		assert.Equal(t, want, got, group)
	}
	changes := storetest.AllChanges(t, s, before)
	require.Len(t, changes, 1)
	c := changes[0]
	assert.Equal(t, membership.OpBatch, c.Op)
	assert.Equal(t, before+1, c.Revision)
	assert.Equal(t, membership.UID(42), c.Actor, "the batch's actor")
	assert.False(t, c.Time.IsZero(), "the batch's time")
	ops := []membership.Op{}
	for _, sub := range c.Changes {
		ops = append(ops, sub.Op)
	}
	assert.Equal(t, []membership.Op{membership.OpRemove, membership.OpAdd, membership.OpReplace,
		membership.OpDeleteGroup, membership.OpAdd, membership.OpDeleteGroup}, ops)
	storetest.ReverseAgrees(t, s, []string{"a", "b", "c", "d", "gone"}, []membership.UID{1, 2, 3, 4, 5, 9})
}

func testMoveKeepsNickname(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustAdd(t, s, "from", []membership.User{storetest.Nicknamed(7, "Sev")})
	storetest.MustBatch(t, s, membership.Batch{Writes: []membership.Write{
		{Op: membership.OpRemove, GroupID: "from", UIDs: []membership.UID{7}},
		{Op: membership.OpAdd, GroupID: "to", Users: storetest.UsersOf(7)},
	}})
	got, _ := storetest.ListAll(t, s, "to")
	assert.Equal(t, []membership.Member{{UID: 7, Nickname: "Sev"}}, got)
	f := storetest.NewFollower()
	f.ApplyAll(storetest.AllChanges(t, s, 0))
	assert.Equal(t, got, f.ListOf("to"), "a follower knows the nickname too")
}

func testPreconditionRefusesBatch(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustAdd(t, s, "a", storetest.UsersOf(1))
	rev := storetest.Revision(t, s, "a")
	storetest.MustAdd(t, s, "b", storetest.UsersOf(1))
	stale := storetest.Revision(t, s, "b")
	storetest.MustAdd(t, s, "b", storetest.UsersOf(2))
	current := storetest.Revision(t, s, "b")
	before := storetest.Latest(t, s)
	_, err := s.Batch(ctx, membership.Batch{Writes: []membership.Write{
		{Op: membership.OpAdd, GroupID: "a", Users: storetest.UsersOf(5), If: membership.Precondition{Revisions: []membership.Revision{rev}}},
		{Op: membership.OpDeleteGroup, GroupID: "b", If: membership.Precondition{Revisions: []membership.Revision{stale}}},
	}})
	var e *membership.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, membership.CodePreconditionFailed, e.Code)
	assert.Equal(t, current, e.Revision)
	assert.Contains(t, e.Message, "element 1")
	assert.Equal(t, before, storetest.Latest(t, s), "nothing applied")
	got, _ := storetest.ListAll(t, s, "a")
	assert.Equal(t, []membership.Member{{UID: 1}}, got)
}

func testTooManyRemovedRefused(t *testing.T, ctx context.Context, s membership.Store) {
	big := storetest.UIDsOf(storetest.UserRange(1, 100_000))
	for g := range 6 {
		for first := 0; first < len(big); first += 10_000 {
			storetest.MustAdd(t, s, fmt.Sprint("big", g), storetest.UsersOf(big[first:first+10_000]...))
		}
	}
	before := storetest.Latest(t, s)
	var ws []membership.Write
	for range 2 {
		for g := range 6 {
			ws = append(ws, membership.Write{Op: membership.OpDeleteGroup, GroupID: fmt.Sprint("big", g)})
		}
	}
	_, err := s.Batch(ctx, membership.Batch{Writes: ws[:10]}) // 1,000,000: the most
	require.NoError(t, err)
	for g := range 6 {
		storetest.MustAdd(t, s, fmt.Sprint("big", g), storetest.UsersOf(big[:10_000]...))
	}
	for g := range 6 { // whole again: with "small", 1,000,001 members in all, one too many
		for first := 10_000; first < len(big); first += 10_000 {
			storetest.MustAdd(t, s, fmt.Sprint("big", g), storetest.UsersOf(big[first:first+10_000]...))
		}
	}
	storetest.MustAdd(t, s, "small", storetest.UsersOf(1))
	mid := storetest.Latest(t, s)
	_, err = s.Batch(ctx, membership.Batch{Writes: append(ws[:10:10], membership.Write{Op: membership.OpDeleteGroup, GroupID: "small"})})
	assert.Equal(t, membership.CodeTooManyChanges, membership.ErrorCode(err))
	assert.Equal(t, mid, storetest.Latest(t, s), "nothing changed")
	assert.Less(t, before, mid)
}

func testNoChangeNoRevision(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustAdd(t, s, "a", storetest.UsersOf(1))
	before := storetest.Latest(t, s)
	res := storetest.MustBatch(t, s, membership.Batch{Writes: []membership.Write{
		{Op: membership.OpAdd, GroupID: "a", Users: storetest.UsersOf(1)},
		{Op: membership.OpRemove, GroupID: "b", UIDs: []membership.UID{1}},
		{Op: membership.OpDeleteGroup, GroupID: "c"},
	}})
	assert.Equal(t, before, storetest.Latest(t, s))
	for _, r := range res.Results {
		assert.Zero(t, r.Count)
	}
}

func testMoveNeverHalfDone(t *testing.T, ctx context.Context, s membership.Store) {
	all := storetest.UIDsOf(storetest.UserRange(1, 1000))
	storetest.MustAdd(t, s, "left", storetest.UsersOf(all...))
	var done atomic.Bool
	var wg sync.WaitGroup
	var torn atomic.Int64
	for range 2 {
		wg.Go(func() {
			checks := make([]membership.Check, 0, 2*len(all))
			for _, uid := range all {
				checks = append(checks, membership.Check{GroupID: "left", UID: uid}, membership.Check{GroupID: "right", UID: uid})
			}
			for !done.Load() {
				found, _, err := s.CheckMembers(ctx, checks)
				if !assert.NoError(t, err) {
					return
				}
				for i := 0; i < len(found); i += 2 {
					if found[i] == found[i+1] {
						torn.Add(1)
					}
				}
			}
		})
	}
	from, to := "left", "right"
	for range 20 {
		storetest.MustBatch(t, s, membership.Batch{Writes: []membership.Write{
			{Op: membership.OpDeleteGroup, GroupID: from},
			{Op: membership.OpAdd, GroupID: to, Users: storetest.UsersOf(all...)},
		}})
		from, to = to, from
	}
	done.Store(true)
	wg.Wait()
	assert.Zero(t, torn.Load(), "a reader saw a user in both groups or in neither")
}

func testFollowerAfterBatches(t *testing.T, ctx context.Context, s membership.Store) {
	f := storetest.NewFollower()
	batches := [][]membership.Write{
		{{Op: membership.OpAdd, GroupID: "a", Users: []membership.User{storetest.Nicknamed(1, "Ann"), {UID: 2}}}, {Op: membership.OpAdd, GroupID: "b", Users: storetest.UsersOf(2)}},
		{{Op: membership.OpRemove, GroupID: "a", UIDs: []membership.UID{1}}, {Op: membership.OpAdd, GroupID: "c", Users: storetest.UsersOf(1)}},
		{{Op: membership.OpDeleteGroup, GroupID: "a"}, {Op: membership.OpReplace, GroupID: "b", Users: storetest.UsersOf(3)}},
		{{Op: membership.OpRemove, GroupID: "c", UIDs: []membership.UID{1}}},
		{{Op: membership.OpAdd, GroupID: "a", Users: storetest.UsersOf(1)}},
	}
	after := membership.Revision(0)
	for i, ws := range batches {
		storetest.MustBatch(t, s, membership.Batch{Writes: ws})
		for _, c := range storetest.AllChanges(t, s, after) {
			f.Apply(c)
			after = c.Revision
		}
		for _, g := range []string{"a", "b", "c"} {
			want, _ := storetest.ListAll(t, s, g)
			assert.Equal(t, want, f.ListOf(g), fmt.Sprintf("after batch %d, group %s", i, g))
		}
	}
}
