// Package memberstest is the part of the store contract about
// memberships: adds and removes and their counts, nicknames, lists and
// their paging, revisions of a group, the reverse index, whole-group
// writes and their preconditions, member checks, the actor, principal
// and time of a change, Idempotency-Keys, each its principal's, and the
// lists of groups within a set (Within).
package memberstest

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// Contract checks the behaviour every membership.Store must have.
// newStore(t) returns an empty store, for the (sub)test t to use and close.
// Every store runs it: memory.Store, durable.Store, and the PostgreSQL store.
func Contract(t *testing.T, newStore func(t *testing.T) membership.Store) {
	t.Run("whole-group writes", func(t *testing.T) { testWrites(t, newStore) })
	t.Run("check members", func(t *testing.T) { testCheckMembers(t, newStore) })
	t.Run("every change carries its actor and time", func(t *testing.T) { testStamps(t, newStore(t)) })
	t.Run("idempotency keys", func(t *testing.T) { testIdempotencyKeys(t, newStore) })
	t.Run("principals", func(t *testing.T) { testPrincipals(t, newStore) })
	storetest.Run(t, newStore, []storetest.Case[membership.Store]{
		{Name: "groups and a user's groups within a set", Test: testWithin},
		{Name: "unknown group lists empty, not nil", Test: func(t *testing.T, _ context.Context, s membership.Store) {
			got, _ := storetest.ListAll(t, s, "nobody")
			assert.NotNil(t, got)
			assert.Empty(t, got)
		}},
		{Name: "add counts only new members, repeats count once", Test: testAddCounts},
		{Name: "list is sorted by uid", Test: func(t *testing.T, ctx context.Context, s membership.Store) {
			storetest.MustAdd(t, s, "g", storetest.UsersOf(30, 9223372036854775807, 1, 20))
			got, _ := storetest.ListAll(t, s, "g")
			assert.Equal(t, []membership.Member{{UID: 1}, {UID: 20}, {UID: 30}, {UID: 9223372036854775807}}, got)
		}},
		{Name: "nicknames: last write wins, kept when not given, cleared by empty", Test: testNicknames},
		{Name: "a nickname belongs to the user in every group", Test: testNicknameInEveryGroup},
		{Name: "remove counts only members, and only in its group", Test: testRemoveCounts},
		{Name: "remove from an unknown group removes nothing", Test: func(t *testing.T, ctx context.Context, s membership.Store) {
			n, err := storetest.Count(storetest.Remove(ctx, s, "nobody", []membership.UID{1}))
			require.NoError(t, err)
			assert.Equal(t, 0, n)
		}},
		{Name: "an emptied group lists empty and can be refilled", Test: testEmptiedGroup},
		{Name: "a nickname outlives a removal while the user is in another group", Test: testNicknameOutlivesRemoval},
		{Name: "a bulk add to an empty group counts distinct users", Test: testBulkAdd},
		{Name: "revisions change with what the list shows, and only then", Test: testRevisions},
		{Name: "keyset paging and member lookup", Test: testPagingAndLookup},
		{Name: "a list never shows a nickname newer than its revision", Test: testNicknameRevisions},
		{Name: "counts stay exact under contention", Test: testCountsUnderContention},
	})
}

func testAddCounts(t *testing.T, ctx context.Context, s membership.Store) {
	n, err := storetest.Count(storetest.Add(ctx, s, "g", storetest.UsersOf(3, 1, 3)))
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	n, err = storetest.Count(storetest.Add(ctx, s, "g", storetest.UsersOf(1, 2)))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

func testNicknames(t *testing.T, ctx context.Context, s membership.Store) {
	_, err := storetest.Add(ctx, s, "g", []membership.User{
		{UID: 1, Nickname: "a", HasNickname: true},
		{UID: 1, Nickname: "b", HasNickname: true},
		{UID: 2, Nickname: "x", HasNickname: true},
		{UID: 3, Nickname: "y", HasNickname: true},
	})
	require.NoError(t, err)
	storetest.MustAdd(t, s, "g", []membership.User{{UID: 2}, {UID: 3, Nickname: "", HasNickname: true}})
	got, _ := storetest.ListAll(t, s, "g")
	assert.Equal(t, []membership.Member{{UID: 1, Nickname: "b"}, {UID: 2, Nickname: "x"}, {UID: 3, Nickname: ""}}, got)
}

func testNicknameInEveryGroup(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustAdd(t, s, "a", []membership.User{{UID: 1, Nickname: "Ann", HasNickname: true}})
	storetest.MustAdd(t, s, "b", storetest.UsersOf(1))
	got, _ := storetest.ListAll(t, s, "b")
	assert.Equal(t, []membership.Member{{UID: 1, Nickname: "Ann"}}, got)
}

func testRemoveCounts(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustAdd(t, s, "a", storetest.UsersOf(1, 2, 3))
	storetest.MustAdd(t, s, "b", storetest.UsersOf(1, 2))
	n, err := storetest.Count(storetest.Remove(ctx, s, "a", []membership.UID{1, 1, 4}))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	got, _ := storetest.ListAll(t, s, "a")
	assert.Equal(t, []membership.Member{{UID: 2}, {UID: 3}}, got)
	got, _ = storetest.ListAll(t, s, "b")
	assert.Equal(t, []membership.Member{{UID: 1}, {UID: 2}}, got)
}

func testEmptiedGroup(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustAdd(t, s, "g", []membership.User{{UID: 1, Nickname: "a", HasNickname: true}})
	n, err := storetest.Count(storetest.Remove(ctx, s, "g", []membership.UID{1}))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	got, _ := storetest.ListAll(t, s, "g")
	assert.Empty(t, got)
	n, err = storetest.Count(storetest.Add(ctx, s, "g", storetest.UsersOf(1)))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	got, _ = storetest.ListAll(t, s, "g")
	assert.Equal(t, []membership.Member{{UID: 1, Nickname: ""}}, got, "a user in no group is forgotten, nickname included")
}

func testNicknameOutlivesRemoval(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustAdd(t, s, "a", []membership.User{{UID: 1, Nickname: "Eve", HasNickname: true}, {UID: 2, Nickname: "Bo", HasNickname: true}})
	storetest.MustAdd(t, s, "b", storetest.UsersOf(1))
	_, err := storetest.Remove(ctx, s, "a", []membership.UID{1, 2})
	require.NoError(t, err)
	got, _ := storetest.ListAll(t, s, "b")
	assert.Equal(t, []membership.Member{{UID: 1, Nickname: "Eve"}}, got, "1 is still in b")
	_, err = storetest.Remove(ctx, s, "b", []membership.UID{1})
	require.NoError(t, err)
	storetest.MustAdd(t, s, "c", storetest.UsersOf(1, 2))
	got, _ = storetest.ListAll(t, s, "c")
	assert.Equal(t, []membership.Member{{UID: 1}, {UID: 2}}, got, "both were in no group: forgotten")
}

func testBulkAdd(t *testing.T, ctx context.Context, s membership.Store) {
	var us []membership.User
	for i := range 300 {
		us = append(us, membership.User{UID: membership.UID(1000 - i%200)})
	}
	n, err := storetest.Count(storetest.Add(ctx, s, "g", us))
	require.NoError(t, err)
	assert.Equal(t, 200, n)
	got, _ := storetest.ListAll(t, s, "g")
	require.Len(t, got, 200)
	assert.Equal(t, membership.UID(801), got[0].UID)
	assert.Equal(t, membership.UID(1000), got[199].UID)
}

func testRevisions(t *testing.T, ctx context.Context, s membership.Store) {
	revision := func(group string) membership.Revision {
		r := storetest.Revision(t, s, group)
		_, listed := storetest.ListAll(t, s, group)
		require.Equal(t, r, listed, "Revision and ListMembers must agree")
		return r
	}
	r0 := revision("g")
	storetest.MustAdd(t, s, "g", storetest.UsersOf(1, 2))
	r1 := revision("g")
	assert.NotEqual(t, r0, r1, "an add changes the revision")

	storetest.MustAdd(t, s, "g", storetest.UsersOf(1))
	_, err := storetest.Remove(ctx, s, "g", []membership.UID{9})
	require.NoError(t, err)
	storetest.MustAdd(t, s, "other", storetest.UsersOf(5))
	assert.Equal(t, r1, revision("g"), "changes that alter nothing in g keep its revision")

	storetest.MustAdd(t, s, "other", []membership.User{{UID: 1, Nickname: "Ann", HasNickname: true}})
	r2 := revision("g")
	assert.NotEqual(t, r1, r2, "a member's nickname set through another group changes g's list")
	storetest.MustAdd(t, s, "other", []membership.User{{UID: 1, Nickname: "Ann", HasNickname: true}})
	assert.Equal(t, r2, revision("g"), "the same nickname again changes nothing")

	_, err = storetest.Remove(ctx, s, "g", []membership.UID{2})
	require.NoError(t, err)
	r3 := revision("g")
	assert.NotEqual(t, r2, r3, "a remove changes the revision")

	_, err = storetest.Remove(ctx, s, "g", []membership.UID{1})
	require.NoError(t, err)
	r4 := revision("g")
	assert.NotEqual(t, r3, r4, "emptying the group changes the revision")

	storetest.MustAdd(t, s, "g", storetest.UsersOf(1))
	assert.NotEqual(t, r4, revision("g"), "refilling the group changes the revision")
}

func testPagingAndLookup(t *testing.T, ctx context.Context, s membership.Store) {
	var us []membership.User
	for uid := membership.UID(2); uid <= 2000; uid += 2 {
		us = append(us, membership.User{UID: uid})
	}
	storetest.MustAdd(t, s, "g", us)
	page := func(after membership.UID, limit int) (total int, uids []membership.UID) {
		_, err := s.ListMembers(ctx, "g", membership.ListOptions{After: after, Limit: limit}, func(n int, members iter.Seq[membership.Member]) {
			total = n
			for m := range members {
				uids = append(uids, m.UID)
			}
		})
		require.NoError(t, err)
		return total, uids
	}
	total, uids := page(0, 3)
	assert.Equal(t, 1000, total)
	assert.Equal(t, []membership.UID{2, 4, 6}, uids)
	_, uids = page(999, 2)
	assert.Equal(t, []membership.UID{1000, 1002}, uids)
	_, uids = page(1000, 2)
	assert.Equal(t, []membership.UID{1002, 1004}, uids)
	_, uids = page(1996, 0)
	assert.Equal(t, []membership.UID{1998, 2000}, uids)
	_, uids = page(2000, 5)
	assert.Empty(t, uids)
	// Walk every page: each member once, in order.
	var all []membership.UID
	for after := membership.UID(0); ; {
		_, uids := page(after, 7)
		if len(uids) == 0 {
			break
		}
		all = append(all, uids...)
		after = uids[len(uids)-1]
	}
	require.Len(t, all, 1000)
	assert.True(t, slices.IsSorted(all))

	storetest.MustAdd(t, s, "g", []membership.User{{UID: 4, Nickname: "Dee", HasNickname: true}})
	m, ok, err := s.Member(ctx, "g", 4)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, membership.Member{UID: 4, Nickname: "Dee"}, m)
	_, ok, err = s.Member(ctx, "g", 5)
	require.NoError(t, err)
	assert.False(t, ok)
	_, ok, err = s.Member(ctx, "nobody", 4)
	require.NoError(t, err)
	assert.False(t, ok)
}

func testCountsUnderContention(t *testing.T, ctx context.Context, s membership.Store) {
	const workers, perWorker = 16, 200
	var wg sync.WaitGroup
	added := make([]int, workers)
	removed := make([]int, workers)
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				group := fmt.Sprintf("g%d", i%4)
				uid := membership.UID(i%50 + 1)
				n, err := storetest.Count(storetest.Add(ctx, s, group, storetest.UsersOf(uid, uid+1)))
				if err != nil {
					errs <- err
					return
				}
				added[w] += n
				if i%3 == 0 {
					n, err := storetest.Count(storetest.Remove(ctx, s, group, []membership.UID{uid}))
					if err != nil {
						errs <- err
						return
					}
					removed[w] += n
				}
				if _, err := s.ListMembers(ctx, group, membership.ListOptions{}, func(int, iter.Seq[membership.Member]) {}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	total := 0
	for g := range 4 {
		got, _ := storetest.ListAll(t, s, fmt.Sprintf("g%d", g))
		total += len(got)
	}
	sum := func(xs []int) int {
		n := 0
		for _, x := range xs {
			n += x
		}
		return n
	}
	assert.Equal(t, sum(added)-sum(removed), total, "every add and remove counted exactly once")
	assert.Positive(t, sum(removed), "the test must exercise removal")
}
