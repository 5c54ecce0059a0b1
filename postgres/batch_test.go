package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/internal/store/storetest/batchtest"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/postgres/internal/pgtest"
)

func TestPostgresBatches(t *testing.T) {
	batchtest.Contract(t, func(t *testing.T) membership.Store { return openTest(t, membership.DefaultChangesKeep) })
}

func TestBatchColumnRoundTrip(t *testing.T) {
	ws := []membership.Write{
		{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{storetest.Nicknamed(3, "Ann"), {UID: 9223372036854775807}, {UID: 1, HasNickname: true}}},
		{Op: membership.OpRemove, GroupID: "team/b", UIDs: []membership.UID{9, 2}, If: membership.Precondition{Revisions: []membership.Revision{1<<64 - 1, 7}}},
		{Op: membership.OpReplace, GroupID: "ü", If: membership.Precondition{Empty: true}},
		{Op: membership.OpDeleteGroup, GroupID: "g", If: membership.Precondition{Exists: true, Revisions: []membership.Revision{5}}},
	}
	got, err := decodeBatch(appendBatch(nil, ws))
	require.NoError(t, err)
	assert.Equal(t, ws, got)
	for _, bad := range [][]byte{
		{},
		{1},
		{1, 5, 0, 1, 1},            // remove_user
		{1, 6, 0},                  // a batch in a batch
		{1, 4, 1, 'g', 0},          // trailing bytes
		{1, 0x84, 1, 'g', 0, 0},    // a precondition that requires nothing
		{1, 2, 1, 'g', 1, 0},       // uid 0
		{1, 1, 1, 'g', 1, 1, 2},    // a nickname flag of 2
		{1, 1, 1, 'g', 100, 1, 0},  // more users than the column holds
		{2, 4, 1, 'g'},             // cut short
		{1, 0x84, 1, 'g', 4, 1, 1}, // unknown precondition flags
	} {
		_, err := decodeBatch(bad)
		assert.Error(t, err, "% x", bad)
	}
}

// storeOf returns the store of two that i names, for writers that take
// turns.
func storeOf(stores []*Store, i int) *Store { return stores[i%len(stores)] }

// Batches written on two instances at once are applied alike by both, and
// by an instance started afterwards: lists, revisions, indexes and feed.
func TestTwoInstancesAgreeAfterConcurrentBatches(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	stores := []*Store{a, b}
	groups := []string{"a", "b", "c", "d"}
	const writers, batches = 4, 15
	var latest atomic.Uint64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range batches {
				uid := membership.UID(1 + (w*batches+i)%10)
				from, to := groups[(w+i)%len(groups)], groups[(w+i+1)%len(groups)]
				ws := []membership.Write{
					{Op: membership.OpRemove, GroupID: from, UIDs: []membership.UID{uid}},
					{Op: membership.OpAdd, GroupID: to, Users: []membership.User{storetest.Nicknamed(uid, fmt.Sprintf("w%d-%d", w, i))}}, // a new nickname: it changes something
				}
				if i%5 == 4 {
					ws = append(ws, membership.Write{Op: membership.OpReplace, GroupID: groups[i%len(groups)], Users: storetest.UsersOf(uid, uid+1)})
				}
				if i%7 == 6 {
					ws = append(ws, membership.Write{Op: membership.OpDeleteGroup, GroupID: from})
				}
				res, err := storeOf(stores, w).Batch(ctx, membership.Batch{Writes: ws, Actor: membership.UID(w + 1)})
				if !assert.NoError(t, err) {
					return
				}
				for {
					seen := latest.Load()
					if uint64(res.Revision) <= seen || latest.CompareAndSwap(seen, uint64(res.Revision)) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	untilApplied(t, a, membership.Revision(latest.Load()))
	untilApplied(t, b, membership.Revision(latest.Load()))
	var uids []membership.UID
	for uid := range membership.UID(11) {
		uids = append(uids, uid+1)
	}
	want := snapshotOf(t, a, groups, uids)
	batchesInFeed := 0
	for _, c := range want.Feed {
		if c.Op == membership.OpBatch {
			batchesInFeed++
		}
	}
	assert.Equal(t, writers*batches, batchesInFeed, "every batch is one change")
	assert.Equal(t, want, snapshotOf(t, b, groups, uids), "the other instance")
	assert.Equal(t, storetest.AllChanges(t, a, 0), storetest.AllChanges(t, b, 0), "times and actors included")
	c := openOn(t, url, membership.DefaultChangesKeep)
	assert.Equal(t, want, snapshotOf(t, c, groups, uids), "an instance started afterwards")
	for _, s := range []*Store{a, b, c} {
		storetest.ReverseAgrees(t, s, groups, uids)
	}
}

// A reader on one instance never sees part of a batch written on another
// that moves 1,000 users between two groups: at every revision it reads
// (CheckMembers answers at one), each user is in exactly one of them.
func TestAReaderOnAnotherInstanceNeverSeesPartOfABatch(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	writer, reader := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	var all []membership.UID
	var checks []membership.Check
	for uid := membership.UID(1); uid <= 1000; uid++ {
		all = append(all, uid)
		checks = append(checks, membership.Check{GroupID: "left", UID: uid}, membership.Check{GroupID: "right", UID: uid})
	}
	first, err := storetest.Add(ctx, writer, "left", storetest.UsersOf(all...))
	require.NoError(t, err)
	untilApplied(t, reader, first.Revision)

	var done atomic.Bool
	var torn, reads atomic.Int64
	revisions := sync.Map{}
	var wg sync.WaitGroup
	wg.Go(func() {
		for !done.Load() {
			found, rev, err := reader.CheckMembers(ctx, checks)
			if !assert.NoError(t, err) {
				return
			}
			reads.Add(1)
			revisions.Store(rev, true)
			for i := 0; i < len(found); i += 2 {
				if found[i] == found[i+1] {
					torn.Add(1)
					break
				}
			}
		}
	})
	from, to := "left", "right"
	var last membership.Revision
	for range 10 {
		res, err := writer.Batch(ctx, membership.Batch{Writes: []membership.Write{
			{Op: membership.OpDeleteGroup, GroupID: from},
			{Op: membership.OpAdd, GroupID: to, Users: storetest.UsersOf(all...)},
		}})
		require.NoError(t, err)
		last = res.Revision
		from, to = to, from
	}
	untilApplied(t, reader, last)
	done.Store(true)
	wg.Wait()
	assert.Zero(t, torn.Load(), "a reader saw a user in both groups or in neither")
	distinct := 0
	revisions.Range(func(any, any) bool { distinct++; return true })
	t.Logf("%d reads at %d revisions", reads.Load(), distinct)
	assert.Positive(t, reads.Load())
}

// Two batches on two instances with the same stale-to-be If-Match on one
// group: in every round exactly one wins, on both instances alike, and the
// other fails whole, naming its write and the winner's revision, having
// changed none of its groups.
func TestOneOfTwoConflictingBatchesWins(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	stores := []*Store{a, b}
	for round := range 8 {
		setup, err := storetest.Add(ctx, a, "g", storetest.UsersOf(membership.UID(1+round)))
		require.NoError(t, err)
		untilApplied(t, b, setup.Revision)
		ifMatch := membership.Precondition{Revisions: []membership.Revision{setup.Revision}}
		results := make([]membership.BatchResult, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 2 {
			side := fmt.Sprintf("side-%d-%d", round, i)
			wg.Go(func() {
				<-start
				results[i], errs[i] = stores[i].Batch(ctx, membership.Batch{Writes: []membership.Write{
					{Op: membership.OpAdd, GroupID: side, Users: storetest.UsersOf(100)},
					{Op: membership.OpAdd, GroupID: "g", Users: storetest.UsersOf(membership.UID(1000 + 10*round + i)), If: ifMatch}, // new to g: it changes g
				}})
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				assert.Equal(t, -1, winner, "round %d: both won", round)
				winner = i
			}
		}
		require.NotEqual(t, -1, winner, "round %d: neither won: %v", round, errs)
		won := results[winner].Revision
		assert.Equal(t, setup.Revision+1, won, "round %d", round)
		loser := 1 - winner
		var failed *membership.Error
		if assert.ErrorAs(t, errs[loser], &failed, "round %d", round) {
			assert.Equal(t, membership.CodePreconditionFailed, failed.Code)
			assert.Equal(t, won, failed.Revision, "round %d: the failure names the winner's revision", round)
			assert.Contains(t, failed.Message, "element 1")
		}
		untilApplied(t, a, won)
		untilApplied(t, b, won)
		groups := []string{"g", fmt.Sprintf("side-%d-0", round), fmt.Sprintf("side-%d-1", round)}
		want := snapshotOf(t, a, groups, nil)
		assert.Equal(t, want, snapshotOf(t, b, groups, nil), "round %d", round)
		assert.Empty(t, want.Lists[fmt.Sprintf("side-%d-%d", round, loser)], "round %d: the losing batch changed nothing", round)
		assert.Len(t, want.Lists[fmt.Sprintf("side-%d-%d", round, winner)], 1, "round %d", round)
	}
}

// A batch's row that cannot be read stops the instance, as an unknown op
// does: it is never applied in part, nor skipped.
func TestAnUnreadableBatchStopsTheInstance(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a := openOn(t, url, membership.DefaultChangesKeep)
	res, err := storetest.Add(ctx, a, "g", storetest.UsersOf(1))
	require.NoError(t, err)
	_, err = a.pool.Exec(ctx, "INSERT INTO membership_changes (ticket, op, group_id, uids, batch) VALUES (1, 6, '', '{}', '\\x0105')")
	require.NoError(t, err)
	a.kickSequencer()
	untilWritable(t, a, false)
	assert.Contains(t, a.Writable().Error(), "a batch that cannot be read")
	rev, err := a.Revision(ctx, "g")
	require.NoError(t, err)
	assert.Equal(t, res.Revision, rev, "nothing more applied")
}
