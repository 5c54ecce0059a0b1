// Package feedtest is the part of the store contract about revisions and
// the change feed: one revision per change, the changes kept and dropped,
// waits for the next change, and followers that rebuild every list from a
// list and the feed.
package feedtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// Contract checks revisions and the change feed; newStore(t, keep)
// returns an empty store whose feed keeps keep changes, for t to use.
func Contract(t *testing.T, newStore func(t *testing.T, keep int) membership.Store) {
	keepsDefault := func(t *testing.T) membership.Store { return newStore(t, membership.DefaultChangesKeep) }
	storetest.Run(t, keepsDefault, []storetest.Case[membership.Store]{
		{Name: "one revision per change that alters the store, none for the rest", Test: testOneRevisionPerChange},
		{Name: "a group's revision is its last change's", Test: testGroupRevision},
		{Name: "after and limit page through the feed", Test: testFeedPages},
	})
	t.Run("changes no longer kept are gone, with the oldest kept", func(t *testing.T) {
		testChangesGone(t, context.Background(), newStore(t, 3))
	})
	t.Run("a revision beyond the latest is gone: another history", func(t *testing.T) {
		testRevisionBeyondLatest(t, context.Background(), keepsDefault(t))
	})
	t.Run("a feed that keeps nothing still counts", func(t *testing.T) {
		testFeedKeepingNothing(t, context.Background(), newStore(t, 0))
	})
	storetest.Run(t, keepsDefault, []storetest.Case[membership.Store]{
		{Name: "a wait ends at the first change after it", Test: testWaitEnds},
		{Name: "a wait ends empty with its context", Test: testWaitEndsEmpty},
		{Name: "concurrent writers: a Follower sees every change once, in order", Test: testFollowerConcurrentWriters},
		{Name: "followers that start from listed states reproduce every list", Test: testFollowersReproduceEveryList},
		{Name: "no group's revision is older than a nickname change the feed shows", Test: testNicknameRevisionsAreNeverBehindTheFeed},
	})
	t.Run("a Follower knows every nickname it lists", func(t *testing.T) { testFollowerScenarios(t, keepsDefault) })
}

func testOneRevisionPerChange(t *testing.T, ctx context.Context, s membership.Store) {
	since := time.Now()
	add := func(group string, users ...membership.User) membership.Write {
		return membership.Write{Op: membership.OpAdd, GroupID: group, Users: users}
	}
	remove := func(group string, uids ...membership.UID) membership.Write {
		return membership.Write{Op: membership.OpRemove, GroupID: group, UIDs: uids}
	}
	steps := []struct {
		name    string
		w       membership.Write
		want    membership.Result
		changed bool
	}{
		{"add two", add("g", membership.User{UID: 3}, storetest.Nicknamed(1, "Ann")), membership.Result{Count: 2, Revision: 1}, true},
		{"add them again", add("g", membership.User{UID: 1}, membership.User{UID: 3}), membership.Result{Count: 0, Revision: 1}, false},
		{"same nickname again", add("g", storetest.Nicknamed(1, "Ann")), membership.Result{Count: 0, Revision: 1}, false},
		{"a nickname and a member in one call: one revision", add("g", storetest.Nicknamed(1, "Anne"), membership.User{UID: 2}),
			membership.Result{Count: 1, Revision: 2}, true},
		{"no users, to an unknown group", add("h", []membership.User{}...), membership.Result{Count: 0, Revision: 2}, false},
		{"remove a non-member", remove("g", 9), membership.Result{Count: 0, Revision: 2}, false},
		{"remove from an unknown group", remove("nobody", 1), membership.Result{Count: 0, Revision: 2}, false},
		{"remove two", remove("g", 3, 2, 3), membership.Result{Count: 2, Revision: 3}, true},
		{"nickname change of a member", add("g", storetest.Nicknamed(1, "A"), storetest.Nicknamed(1, "")), membership.Result{Count: 0, Revision: 4}, true},
		{"the last nickname given wins, and here changes nothing", add("g", storetest.Nicknamed(1, "B"), storetest.Nicknamed(1, "")),
			membership.Result{Count: 0, Revision: 4}, false},
		{"empty the group", remove("g", 1), membership.Result{Count: 1, Revision: 5}, true},
	}
	for _, st := range steps {
		before, _, err := s.Changes(ctx, membership.ChangeOptions{})
		require.NoError(t, err)
		got, err := s.Write(ctx, st.w)
		require.NoError(t, err, st.name)
		assert.Equal(t, st.want, got, st.name)
		after, _, err := s.Changes(ctx, membership.ChangeOptions{})
		require.NoError(t, err)
		if st.changed {
			assert.Len(t, after, len(before)+1, st.name)
		} else {
			assert.Equal(t, before, after, st.name)
		}
	}
	assert.Equal(t, []membership.Change{
		{Revision: 1, Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{1, 3}, Nicknames: []membership.Member{{UID: 1, Nickname: "Ann"}}},
		{Revision: 2, Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{2}, Nicknames: []membership.Member{{UID: 1, Nickname: "Anne"}}},
		{Revision: 3, Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{2, 3}},
		{Revision: 4, Op: membership.OpAdd, GroupID: "g", Nicknames: []membership.Member{{UID: 1, Nickname: ""}}},
		{Revision: 5, Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{1}},
	}, storetest.Untimed(t, storetest.AllChanges(t, s, 0), since))
	rev := storetest.Revision(t, s, "g")
	assert.Equal(t, membership.Revision(5), rev, "an emptied group's revision is that of its emptying")
}

func testGroupRevision(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustAdd(t, s, "a", []membership.User{{UID: 1}})
	storetest.MustAdd(t, s, "b", []membership.User{{UID: 2}})
	for group, want := range map[string]membership.Revision{"a": 1, "b": 2} {
		rev := storetest.Revision(t, s, group)
		assert.Equal(t, want, rev, group)
		_, listed := storetest.ListAll(t, s, group)
		assert.Equal(t, want, listed, group)
	}
}

func testFeedPages(t *testing.T, ctx context.Context, s membership.Store) {
	for uid := range membership.UID(5) {
		storetest.MustAdd(t, s, "g", []membership.User{{UID: uid + 1}})
	}
	changes, latest, err := s.Changes(ctx, membership.ChangeOptions{After: 1, Limit: 2})
	require.NoError(t, err)
	assert.Equal(t, membership.Revision(5), latest)
	require.Len(t, changes, 2)
	assert.Equal(t, []membership.Revision{2, 3}, []membership.Revision{changes[0].Revision, changes[1].Revision})
	changes, _, err = s.Changes(ctx, membership.ChangeOptions{After: 5})
	require.NoError(t, err)
	assert.Empty(t, changes, "nothing after the latest")
}

func testChangesGone(t *testing.T, ctx context.Context, s membership.Store) {
	for uid := range membership.UID(5) {
		storetest.MustAdd(t, s, "g", []membership.User{{UID: uid + 1}})
	}
	for _, after := range []membership.Revision{0, 1} {
		_, latest, err := s.Changes(ctx, membership.ChangeOptions{After: after})
		assert.Equal(t, membership.CodeChangesGone, membership.ErrorCode(err), "after %d", after)
		var e *membership.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, membership.Revision(3), e.OldestRevision)
		assert.Equal(t, membership.Revision(5), latest)
	}
	changes, _, err := s.Changes(ctx, membership.ChangeOptions{After: 2})
	require.NoError(t, err)
	assert.Len(t, changes, 3, "after the one before the oldest kept: all kept")
}

func testRevisionBeyondLatest(t *testing.T, ctx context.Context, s membership.Store) {
	_, _, err := s.Changes(ctx, membership.ChangeOptions{After: 1})
	assert.Equal(t, membership.CodeChangesGone, membership.ErrorCode(err))
	assert.Contains(t, err.Error(), "beyond the latest")
}

func testFeedKeepingNothing(t *testing.T, ctx context.Context, s membership.Store) {
	res := storetest.MustAdd(t, s, "g", []membership.User{{UID: 1}})
	assert.Equal(t, membership.Revision(1), res.Revision)
	changes, latest, err := s.Changes(ctx, membership.ChangeOptions{After: 1})
	require.NoError(t, err)
	assert.Empty(t, changes)
	assert.Equal(t, membership.Revision(1), latest)
	_, _, err = s.Changes(ctx, membership.ChangeOptions{After: 0})
	var e *membership.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, membership.Revision(2), e.OldestRevision, "none kept: the oldest is the next to come")
}

func testWaitEnds(t *testing.T, ctx context.Context, s membership.Store) {
	got := make(chan []membership.Change)
	go func() {
		changes, _, err := s.Changes(ctx, membership.ChangeOptions{After: 0, Wait: true})
		assert.NoError(t, err)
		got <- changes
	}()
	select {
	case <-got:
		t.Fatal("the wait ended before any change")
	case <-time.After(50 * time.Millisecond):
	}
	storetest.MustAdd(t, s, "g", []membership.User{{UID: 7}})
	changes := <-got
	require.Len(t, changes, 1)
	assert.Equal(t, []membership.UID{7}, changes[0].UIDs)
}

func testWaitEndsEmpty(t *testing.T, ctx context.Context, s membership.Store) {
	wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	changes, latest, err := s.Changes(wctx, membership.ChangeOptions{Wait: true})
	require.NoError(t, err)
	assert.Empty(t, changes)
	assert.Equal(t, membership.Revision(0), latest)
}

func testFollowerConcurrentWriters(t *testing.T, ctx context.Context, s membership.Store) {
	const writers, perWriter = 8, 150
	var wg sync.WaitGroup
	results := make(chan membership.Result, writers*perWriter)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				group := fmt.Sprint("g", i%3)
				uid := membership.UID(w*1000 + i%20 + 1)
				var res membership.Result
				var err error
				if i%4 == 3 {
					res, err = storetest.Remove(ctx, s, group, []membership.UID{uid})
				} else {
					res, err = storetest.Add(ctx, s, group, []membership.User{{UID: uid}})
				}
				if !assert.NoError(t, err) {
					return
				}
				if res.Count > 0 {
					results <- res
				}
			}
		})
	}
	done := make(chan struct{})
	var writersDone atomic.Bool
	var seen []membership.Change
	go func() {
		defer close(done)
		var after membership.Revision
		for {
			// Read before the poll: an empty poll that began after the
			// writers were done means there is nothing left.
			finished := writersDone.Load()
			wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			changes, _, err := s.Changes(wctx, membership.ChangeOptions{After: after, Limit: 7, Wait: true})
			cancel()
			if !assert.NoError(t, err) {
				return
			}
			if len(changes) == 0 {
				if finished {
					return
				}
				continue
			}
			seen = append(seen, changes...)
			after = changes[len(changes)-1].Revision
		}
	}()
	wg.Wait()
	writersDone.Store(true)
	close(results)
	<-done
	acknowledged := map[membership.Revision]bool{}
	for res := range results {
		assert.False(t, acknowledged[res.Revision], "revision %d given twice", res.Revision)
		acknowledged[res.Revision] = true
	}
	require.Len(t, seen, len(acknowledged), "every change seen once")
	for i, c := range seen {
		assert.Equal(t, membership.Revision(i+1), c.Revision, "in revision order with no gaps")
		assert.True(t, acknowledged[c.Revision])
	}
	checkFeedGivesState(t, s, seen)
}

// checkFeedGivesState checks that replaying the changes seen, adds and
// removes, gives every group's members in s.
func checkFeedGivesState(t *testing.T, s membership.Store, seen []membership.Change) {
	state := storetest.Replayed{}
	for _, c := range seen {
		state.Apply(c)
	}
	for group, members := range state {
		got, _ := storetest.ListAll(t, s, group)
		for _, m := range got {
			assert.True(t, members[m.UID], "group %s member %d", group, m.UID)
		}
		assert.Len(t, got, len(members), group)
	}
}

// testFollowersReproduceEveryList runs a concurrent random mix of adds (with
// and without nicknames, "" among them), removes, and now and then a
// replace, a group deletion or a user removed everywhere, on a few groups and
// users, so that users often fall out of every group and come back; beside
// it, followers each wait for a random revision, note the latest, list
// every group one at a time in a random order while the writes go on, then
// apply the feed from the noted revision. At the end every Follower's lists
// must be the store's, nicknames included: a user's nickname must not
// outlive every membership and reappear on an add that the feed shows
// without it.
func testFollowersReproduceEveryList(t *testing.T, ctx context.Context, s membership.Store) {
	groups := []string{"a", "b", "c"}
	nicknames := []string{"", "Eve", "Bo", "Al"}
	const users = 24
	const writers, perWriter, followers = 4, 300, 8
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for range perWriter {
				err := writeAtRandom(ctx, s, rng, groups, nicknames, users)
				if !assert.NoError(t, err) {
					return
				}
			}
		})
	}
	var writersDone atomic.Bool
	results := make([]*storetest.Follower, followers)
	var fwg sync.WaitGroup
	for i := range followers {
		fwg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			results[i] = followWhileWriting(t, ctx, s, rng, groups, writers*perWriter, &writersDone)
		})
	}
	wg.Wait()
	writersDone.Store(true)
	fwg.Wait()
	for i, f := range results {
		require.NotNil(t, f, "Follower %d failed", i)
		for _, group := range groups {
			want, _ := storetest.ListAll(t, s, group)
			assert.Equal(t, want, f.ListOf(group), "Follower %d, group %s", i, group)
		}
	}
}

// writeAtRandom makes one write of the mix of
// testFollowersReproduceEveryList on groups and users 1 to users: mostly
// adds (a nickname now and then) and removes of one to three users, and
// now and then a replace, a group deletion or a user removed everywhere.
func writeAtRandom(ctx context.Context, s membership.Store, rng *rand.Rand, groups, nicknames []string, users int) error {
	group := groups[rng.IntN(len(groups))]
	n := 1 + rng.IntN(3)
	randomUsers := func(m int) []membership.User {
		var us []membership.User
		for range m {
			u := membership.User{UID: membership.UID(1 + rng.IntN(users))}
			if rng.IntN(8) == 0 { // rare: a nickname lasts, and users in no group keep one
				u.Nickname, u.HasNickname = nicknames[rng.IntN(len(nicknames))], true
			}
			us = append(us, u)
		}
		return us
	}
	var err error
	switch k := rng.IntN(40); {
	case k == 0:
		_, err = s.Write(ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: group})
	case k == 1:
		_, err = s.Write(ctx, membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{membership.UID(1 + rng.IntN(users))}})
	case k < 5:
		_, err = s.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: group, Users: randomUsers(2 * n)})
	case k%2 == 0:
		_, err = storetest.Add(ctx, s, group, randomUsers(n))
	default:
		var uids []membership.UID
		for range n {
			uids = append(uids, membership.UID(1+rng.IntN(users)))
		}
		_, err = storetest.Remove(ctx, s, group, uids)
	}
	return err
}

// followWhileWriting is a follower of testFollowersReproduceEveryList: it
// waits for a random revision up to most (or for the writers to be done),
// notes the latest, lists every group one at a time in a random order
// while the writes go on, then applies the feed from the noted revision
// until the writers are done and it has seen every change. It returns nil
// if a read failed.
func followWhileWriting(t *testing.T, ctx context.Context, s membership.Store, rng *rand.Rand, groups []string, most int, writersDone *atomic.Bool) *storetest.Follower {
	f := storetest.NewFollower()
	// Wait for a random revision, or for the writers to end.
	target := membership.Revision(rng.IntN(most))
	var noted membership.Revision
	for {
		finished := writersDone.Load()
		_, latest, err := s.Changes(ctx, membership.ChangeOptions{After: 0, Limit: 1})
		if !assert.NoError(t, err) {
			return nil
		}
		if latest >= target || finished {
			noted = latest
			break
		}
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, _, err = s.Changes(wctx, membership.ChangeOptions{After: latest, Limit: 1, Wait: true})
		cancel()
		if !assert.NoError(t, err) {
			return nil
		}
	}
	for _, k := range rng.Perm(len(groups)) {
		if !assert.NoError(t, f.Relist(s, groups[k])) {
			return nil
		}
		// Let the writes go on between two lists: wait for the
		// next change (the wait's deadline only bounds it).
		_, latest, err := s.Changes(ctx, membership.ChangeOptions{After: 0, Limit: 1})
		if !assert.NoError(t, err) {
			return nil
		}
		if !writersDone.Load() {
			wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			_, _, err = s.Changes(wctx, membership.ChangeOptions{After: latest, Limit: 1, Wait: true})
			cancel()
			if !assert.NoError(t, err) {
				return nil
			}
		}
	}
	after := noted
	for {
		finished := writersDone.Load()
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		changes, _, err := s.Changes(wctx, membership.ChangeOptions{After: after, Limit: 1 + rng.IntN(20), Wait: true})
		cancel()
		if !assert.NoError(t, err) {
			return nil
		}
		if len(changes) == 0 {
			if finished {
				break
			}
			continue
		}
		f.ApplyAll(changes)
		after = changes[len(changes)-1].Revision
	}
	return f
}

// testFollowerScenarios plays, one step at a time, the cases where a
// Follower could list another nickname than the store: a user forgotten,
// then added again without a nickname; and a
// user who moves from a group the Follower lists late to one it listed
// early, carrying a nickname set before the Follower began.
func testFollowerScenarios(t *testing.T, newStore func(t *testing.T) membership.Store) {
	ctx := context.Background()
	eve := []membership.User{{UID: 900001, Nickname: "Eve", HasNickname: true}}
	plain := []membership.User{{UID: 900001}}
	type step struct {
		op    string // add, remove, note (the latest revision), list
		group string
		users []membership.User
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a user in no group is forgotten", []step{
			{"add", "na", eve}, {"remove", "na", plain},
			{"note", "", nil}, {"list", "na", nil}, {"list", "nb", nil},
			{"add", "nb", plain},
		}},
		{"a user who escaped every list brings its nickname", []step{
			{"add", "a", eve},
			{"note", "", nil}, {"list", "b", nil},
			{"add", "b", plain}, {"remove", "a", plain},
			{"list", "a", nil},
		}},
		{"a nickname cleared by a remove, then given again", []step{
			{"add", "a", eve}, {"note", "", nil}, {"list", "a", nil},
			{"remove", "a", plain}, {"add", "b", eve},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			f := storetest.NewFollower()
			var noted membership.Revision
			groups := map[string]bool{}
			for _, st := range tt.steps {
				var err error
				switch st.op {
				case "add":
					_, err = storetest.Add(ctx, s, st.group, st.users)
				case "remove":
					_, err = storetest.Remove(ctx, s, st.group, []membership.UID{st.users[0].UID})
				case "note":
					_, noted, err = s.Changes(ctx, membership.ChangeOptions{Limit: 1})
				case "list":
					err = f.Relist(s, st.group)
				}
				require.NoError(t, err)
				groups[st.group] = st.group != ""
			}
			f.ApplyAll(storetest.AllChanges(t, s, noted))
			for group, ok := range groups {
				if ok {
					want, _ := storetest.ListAll(t, s, group)
					assert.Equal(t, want, f.ListOf(group), group)
				}
			}
		})
	}
}

// testNicknameRevisionsAreNeverBehindTheFeed changes user 7's nickname
// through group g, again and again, while readers follow the feed and, as
// each revision appears, read group h's, which holds 7 too: every change is
// a nickname change, which moves every group's revision, so h's can never
// be behind what the feed showed before, not even in a list, or a 304,
// served from the list cache. The readers wait on the feed rather than
// poll it, so that they cost what the writes cost.
func testNicknameRevisionsAreNeverBehindTheFeed(t *testing.T, ctx context.Context, s membership.Store) {
	res := storetest.MustAdd(t, s, "h", []membership.User{{UID: 7}})
	// follow ends the readers' last wait once the writes are done.
	follow, stop := context.WithCancel(ctx)
	defer stop()
	checked := make([]int, 2)
	var wg sync.WaitGroup
	for r := range checked {
		wg.Go(func() {
			seen := res.Revision
			for {
				_, latest, err := s.Changes(follow, membership.ChangeOptions{After: seen, Limit: 1, Wait: true})
				if !assert.NoError(t, err) || latest == seen {
					return // stopped: no change came
				}
				rev, err := s.Revision(ctx, "h")
				if !assert.NoError(t, err) || !assert.GreaterOrEqual(t, rev, latest, "h's revision is behind the feed") {
					return
				}
				checked[r]++
				seen = latest
			}
		})
	}
	for i := range 3000 {
		storetest.MustAdd(t, s, "g", []membership.User{{UID: 7, Nickname: fmt.Sprint("n", i), HasNickname: true}})
	}
	stop()
	wg.Wait()
	for r, n := range checked {
		assert.Positive(t, n, "reader %d saw no revision", r)
	}
}
