package postgres

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/postgres/internal/pgtest"
)

// snapshot is all a store shows of some groups and users.
type snapshot struct {
	Lists      map[string][]membership.Member
	Revisions  map[string]membership.Revision
	Groups     []membership.GroupSize
	GroupTotal int
	UserGroups map[membership.UID][]string
	Feed       []membership.Change
}

// snapshotOf reads s's groups, users and whole feed, without the
// changes' times (two stores give them different ones), which it checks
// are times as stores give them.
func snapshotOf(t *testing.T, s membership.Store, groups []string, uids []membership.UID) snapshot {
	t.Helper()
	ctx := context.Background()
	sn := snapshot{Lists: map[string][]membership.Member{}, Revisions: map[string]membership.Revision{},
		UserGroups: map[membership.UID][]string{}, Feed: storetest.Untimed(t, storetest.AllChanges(t, s, 0), time.Time{})}
	for _, g := range groups {
		list, rev := storetest.ListAll(t, s, g)
		sn.Lists[g] = list
		r, err := s.Revision(ctx, g)
		require.NoError(t, err)
		require.Equal(t, rev, r, "group %s: Revision and ListMembers agree", g)
		sn.Revisions[g] = rev
	}
	_, err := s.Groups(ctx, membership.GroupsOptions{}, func(total int, gs iter.Seq[membership.GroupSize]) {
		sn.GroupTotal = total
		for g := range gs {
			sn.Groups = append(sn.Groups, g)
		}
	})
	require.NoError(t, err)
	for _, uid := range uids {
		sn.UserGroups[uid], _ = storetest.UserGroups(t, s, uid, membership.GroupListOptions{})
	}
	return sn
}

// logRows counts the rows of the log.
func logRows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	require.NoError(t, s.pool.QueryRow(context.Background(), "SELECT count(*) FROM membership_changes").Scan(&n))
	return n
}

// untilApplied waits, up to a minute, until s has applied revision rev.
func untilApplied(t *testing.T, s *Store, rev membership.Revision) {
	t.Helper()
	if rev == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		// The latest it has, then a wait for the next: asking for the
		// changes after rev-1 of an instance further behind is an error
		// (they are beyond its latest), not a wait.
		_, latest, err := s.Changes(ctx, membership.ChangeOptions{})
		require.NoError(t, err)
		if latest >= rev {
			return
		}
		_, _, err = s.Changes(ctx, membership.ChangeOptions{After: latest, Limit: 1, Wait: true})
		require.NoError(t, err)
		require.NoError(t, ctx.Err(), "the instance reaches revision %d", rev)
	}
}

// Every op, with and without a precondition, answers on one instance
// exactly as the memory store does, which it applies the log to: results,
// errors and the revision a failure names, lists, indexes and feed. The
// writes whose outcome the instance knows for sure write no row.
// opCase is a write, made when the case runs (it may read what the cases
// before it wrote), and whether the log takes a row for it.
type opCase struct {
	name    string
	write   func() membership.Write
	wantRow bool
}

// answerAsMemory runs each case's write on mem and then on s, in order,
// and checks that s answers as mem does, with an error of errCode when it
// fails ("" for any), and writes a row to its log exactly when the case
// says.
func answerAsMemory(t *testing.T, s *Store, mem *memory.Store, cases []opCase, errCode membership.Code) {
	t.Helper()
	ctx := context.Background()
	for _, tt := range cases {
		w := tt.write()
		wantRes, wantErr := mem.Write(ctx, w)
		before := logRows(t, s)
		res, err := s.Write(ctx, w)
		assert.Equal(t, wantRes, res, tt.name)
		assert.Equal(t, wantErr, err, tt.name)
		if wantErr != nil && errCode != "" {
			assert.Equal(t, errCode, membership.ErrorCode(err), tt.name)
		}
		rows := 0
		if tt.wantRow {
			rows = 1
		}
		assert.Equal(t, before+rows, logRows(t, s), "%s: rows written", tt.name)
	}
}

func TestEveryOpAnswersAsMemoryDoes(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, membership.DefaultChangesKeep)
	mem := memory.New()
	rev := func(g string) membership.Revision {
		r, err := mem.Revision(ctx, g)
		require.NoError(t, err)
		return r
	}
	var r1 membership.Revision // g's revision after the first add
	tests := []opCase{
		{"add", func() membership.Write {
			return membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{storetest.Nicknamed(1, "one"), {UID: 2}, {UID: 3}}}
		}, true},
		{"add to another group", func() membership.Write {
			r1 = rev("g")
			return membership.Write{Op: membership.OpAdd, GroupID: "h", Users: []membership.User{{UID: 1}, storetest.Nicknamed(4, "four")}}
		}, true},
		{"replace", func() membership.Write {
			return membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{{UID: 2}, storetest.Nicknamed(4, "FOUR"), {UID: 5}, {UID: 5}}}
		}, true},
		{"replace by the same, a no-op", func() membership.Write {
			return membership.Write{Op: membership.OpReplace, GroupID: "g", Users: storetest.UsersOf(5, 4, 2)}
		}, true},
		{"replace with a stale If-Match: fails for good, here", func() membership.Write {
			return membership.Write{Op: membership.OpReplace, GroupID: "g", Users: storetest.UsersOf(9), If: membership.Precondition{Revisions: []membership.Revision{r1}}}
		}, false},
		{"replace with a future If-Match: fails, once the log is read to its end", func() membership.Write {
			return membership.Write{Op: membership.OpReplace, GroupID: "g", Users: storetest.UsersOf(9), If: membership.Precondition{Revisions: []membership.Revision{rev("g") + 10}}}
		}, false},
		{"delete with the current If-Match", func() membership.Write {
			return membership.Write{Op: membership.OpDeleteGroup, GroupID: "g", If: membership.Precondition{Revisions: []membership.Revision{r1, rev("g")}}}
		}, true},
		{"delete an empty group", func() membership.Write {
			return membership.Write{Op: membership.OpDeleteGroup, GroupID: "g"}
		}, false},
		{"delete an empty group If-Match: *", func() membership.Write {
			return membership.Write{Op: membership.OpDeleteGroup, GroupID: "g", If: membership.Precondition{Exists: true}}
		}, false},
		{"add If-None-Match: * to an empty group", func() membership.Write {
			return membership.Write{Op: membership.OpAdd, GroupID: "g", Users: storetest.UsersOf(7), If: membership.Precondition{Empty: true}}
		}, true},
		{"add If-None-Match: * to a group with members", func() membership.Write {
			return membership.Write{Op: membership.OpAdd, GroupID: "g", Users: storetest.UsersOf(8), If: membership.Precondition{Empty: true}}
		}, false},
		{"add nobody with the current If-Match", func() membership.Write {
			return membership.Write{Op: membership.OpAdd, GroupID: "h", If: membership.Precondition{Revisions: []membership.Revision{rev("h")}}}
		}, false},
		{"add nobody", func() membership.Write {
			return membership.Write{Op: membership.OpAdd, GroupID: "h"}
		}, false},
		{"remove nobody", func() membership.Write {
			return membership.Write{Op: membership.OpRemove, GroupID: "h"}
		}, false},
		{"remove a user everywhere", func() membership.Write {
			return membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{1}}
		}, true},
		{"remove a user in no group", func() membership.Write {
			return membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{1}}
		}, false},
		{"add back without a nickname: forgotten", func() membership.Write {
			return membership.Write{Op: membership.OpAdd, GroupID: "h", Users: storetest.UsersOf(1)}
		}, true},
		{"remove If-Match: *", func() membership.Write {
			return membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{7}, If: membership.Precondition{Exists: true}}
		}, true},
		{"replace by nobody", func() membership.Write {
			return membership.Write{Op: membership.OpReplace, GroupID: "h", If: membership.Precondition{Exists: true}}
		}, true},
		{"replace into a new group", func() membership.Write {
			return membership.Write{Op: membership.OpReplace, GroupID: "k", Users: []membership.User{storetest.Nicknamed(4, ""), {UID: 6}}}
		}, true},
	}
	answerAsMemory(t, s, mem, tests, membership.CodePreconditionFailed)
	groups := []string{"g", "h", "k", "x"}
	uids := []membership.UID{1, 2, 3, 4, 5, 6, 7, 8, 9}
	want := snapshotOf(t, mem, groups, uids)
	assert.Equal(t, want, snapshotOf(t, s, groups, uids))
	assert.Empty(t, want.Lists["g"], "the script does what it says")
	assert.Empty(t, want.Lists["h"], "the script does what it says")
	assert.Equal(t, []membership.Member{{UID: 4}, {UID: 6}}, want.Lists["k"], "the script does what it says")
}

// A write whose precondition holds here but not when the log reaches it
// fails at apply: its writer gets CodePreconditionFailed with the group's
// revision, and it takes no revision.
func TestAPreconditionFailedInTheLogTakesNoRevision(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, membership.DefaultChangesKeep)
	res, err := storetest.Add(ctx, s, "g", storetest.UsersOf(1))
	require.NoError(t, err)
	c, err := changeOf(membership.Write{Op: membership.OpDeleteGroup, GroupID: "g",
		If: membership.Precondition{Revisions: []membership.Revision{res.Revision + 1}}})
	require.NoError(t, err)
	_, err = s.commit(ctx, c) // past answerHere, as if this instance lagged
	require.Error(t, err)
	assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err))
	var failed *membership.Error
	require.ErrorAs(t, err, &failed)
	assert.Equal(t, res.Revision, failed.Revision)
	next, err := storetest.Add(ctx, s, "g", storetest.UsersOf(2))
	require.NoError(t, err)
	assert.Equal(t, res.Revision+1, next.Revision, "the failed change took no revision")
	got, _ := storetest.ListAll(t, s, "g")
	assert.Equal(t, []membership.Member{{UID: 1}, {UID: 2}}, got)
}

// An instance that lags behind the log answers, without the log, only
// what no change still to come could alter; once it has read the log to
// its end, what it knows.
func TestALaggingInstanceAnswersOnlyWhatItKnows(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a := openOn(t, url, membership.DefaultChangesKeep)
	r1, err := storetest.Add(ctx, a, "g", storetest.UsersOf(1))
	require.NoError(t, err)
	b, err := openStill(ctx, url, Options{}) // it does not follow the log
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	r2, err := storetest.Add(ctx, a, "g", storetest.UsersOf(2))
	require.NoError(t, err)
	r3, err := storetest.Add(ctx, a, "h", storetest.UsersOf(3))
	require.NoError(t, err)
	ifMatch := func(rev membership.Revision) membership.Precondition {
		return membership.Precondition{Revisions: []membership.Revision{rev}}
	}
	type answer struct {
		res      membership.Result
		answered bool
		err      error
	}
	ask := func(w membership.Write) answer {
		res, answered, err := b.answerHere(ctx, w)
		return answer{res, answered, err}
	}
	removeUser3 := membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{3}}
	deleteX := membership.Write{Op: membership.OpDeleteGroup, GroupID: "x"}
	behind := []struct {
		name string
		w    membership.Write
		want answer
	}{
		{"a user in no group here", removeUser3, answer{}},
		{"an empty group here", deleteX, answer{}},
		{"a revision this instance has not seen", membership.Write{Op: membership.OpAdd, GroupID: "g", Users: storetest.UsersOf(9), If: ifMatch(r2.Revision)}, answer{}},
		{"the revision here", membership.Write{Op: membership.OpAdd, GroupID: "g", Users: storetest.UsersOf(9), If: ifMatch(r1.Revision)}, answer{}},
		{"a revision below the group's", membership.Write{Op: membership.OpAdd, GroupID: "g", Users: storetest.UsersOf(9), If: ifMatch(r1.Revision - 1)},
			answer{answered: true, err: membership.PreconditionFailed(r1.Revision)}},
		{"nobody to add", membership.Write{Op: membership.OpAdd, GroupID: "g"}, answer{answered: true, res: membership.Result{Revision: r1.Revision}}},
	}
	for _, tt := range behind {
		assert.Equal(t, tt.want, ask(tt.w), "behind the log: %s", tt.name)
	}
	require.NoError(t, b.catchUp(ctx, b.pool))
	caughtUp := []struct {
		name string
		w    membership.Write
		want answer
	}{
		{"a user in no group", membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{4}}, answer{answered: true, res: membership.Result{Revision: r3.Revision}}},
		{"a user in a group", removeUser3, answer{}},
		{"an empty group", deleteX, answer{answered: true}}, // no group was ever deleted: revision 0
		{"a stale revision", membership.Write{Op: membership.OpAdd, GroupID: "g", Users: storetest.UsersOf(9), If: ifMatch(r1.Revision)},
			answer{answered: true, err: membership.PreconditionFailed(r2.Revision)}},
		{"a revision to come", membership.Write{Op: membership.OpAdd, GroupID: "g", Users: storetest.UsersOf(9), If: ifMatch(r3.Revision + 1)},
			answer{answered: true, err: membership.PreconditionFailed(r2.Revision)}},
		{"the current revision", membership.Write{Op: membership.OpAdd, GroupID: "g", Users: storetest.UsersOf(9), If: ifMatch(r2.Revision)}, answer{}},
	}
	for _, tt := range caughtUp {
		assert.Equal(t, tt.want, ask(tt.w), "caught up: %s", tt.name)
	}
}

// writeRandomly has writers on each of stores write random ops, half of
// them conditional on what their instance lists, and returns the latest
// revision acknowledged.
func writeRandomly(t *testing.T, stores []*Store, groups []string, nUsers int) membership.Revision {
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var latest membership.Revision
	for w := range 6 {
		s := stores[w%len(stores)]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 26))
			for range 40 {
				res, err := s.Write(ctx, randomWrite(ctx, rng, s, groups, nUsers))
				if err != nil && !assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err), "%v", err) {
					return
				}
				mu.Lock()
				latest = max(latest, res.Revision)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return latest
}

// randomWrite returns a random write to one of groups, of users 1 to
// nUsers, conditional half the time on what s lists.
func randomWrite(ctx context.Context, rng *rand.Rand, s membership.Store, groups []string, nUsers int) membership.Write {
	w := membership.Write{GroupID: groups[rng.IntN(len(groups))]}
	someUsers := func() []membership.User {
		var us []membership.User
		for range rng.IntN(4) {
			u := membership.User{UID: membership.UID(1 + rng.IntN(nUsers))}
			if rng.IntN(3) == 0 {
				u.Nickname, u.HasNickname = fmt.Sprint("n", rng.IntN(4)), true
			}
			us = append(us, u)
		}
		return us
	}
	switch rng.IntN(6) {
	case 0, 1:
		w.Op, w.Users = membership.OpAdd, someUsers()
	case 2:
		w.Op = membership.OpRemove
		for range 1 + rng.IntN(3) {
			w.UIDs = append(w.UIDs, membership.UID(1+rng.IntN(nUsers)))
		}
	case 3:
		w.Op, w.Users = membership.OpReplace, someUsers()
	case 4:
		w.Op = membership.OpDeleteGroup
	case 5:
		return membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{membership.UID(1 + rng.IntN(nUsers))}}
	}
	switch rng.IntN(4) {
	case 0:
		rev, _ := s.Revision(ctx, w.GroupID)
		w.If.Revisions = []membership.Revision{rev}
	case 1:
		w.If.Exists = true
	}
	return w
}

// Two instances agree on every list, index, revision and the feed after
// concurrent writers on both replace groups, delete them and remove users
// everywhere, with and without preconditions; an instance started
// afterwards rebuilds the same from the log.
func TestTwoInstancesAgreeOnWholeGroupOps(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	groups := []string{"a", "b", "c", "d"}
	const nUsers = 12
	latest := writeRandomly(t, []*Store{a, b}, groups, nUsers)
	require.NotZero(t, latest)
	untilApplied(t, a, latest)
	untilApplied(t, b, latest)
	var uids []membership.UID
	for uid := range membership.UID(nUsers) {
		uids = append(uids, uid+1)
	}
	c := openOn(t, url, membership.DefaultChangesKeep)
	want := snapshotOf(t, a, groups, uids)
	ops := map[membership.Op]int{}
	for _, ch := range want.Feed {
		ops[ch.Op]++
	}
	for _, op := range []membership.Op{membership.OpAdd, membership.OpRemove, membership.OpReplace, membership.OpDeleteGroup, membership.OpRemoveUser} {
		assert.NotZero(t, ops[op], "the feed has %s changes", op)
	}
	assert.Equal(t, want, snapshotOf(t, b, groups, uids), "the other instance")
	assert.Equal(t, want, snapshotOf(t, c, groups, uids), "an instance started afterwards")
	for _, s := range []*Store{a, b, c} {
		storetest.ReverseAgrees(t, s, groups, uids)
	}
}

// Writers on two instances race to change one group with the same
// If-Match: in every round exactly one wins, on both instances alike; the
// others get CodePreconditionFailed naming the winner's revision.
func TestOneIfMatchWinsAcrossInstances(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	stores := []*Store{a, b}
	const rounds, writers = 10, 8
	for round := range rounds {
		setup, err := storetest.Add(ctx, a, "g", storetest.UsersOf(membership.UID(1+round)))
		require.NoError(t, err)
		untilApplied(t, b, setup.Revision)
		ifMatch := membership.Precondition{Revisions: []membership.Revision{setup.Revision}}
		results := make([]membership.Result, writers)
		errs := make([]error, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range writers {
			w := membership.Write{GroupID: "g", If: ifMatch}
			uid := membership.UID(1000 + 100*round + i) // new to g: each write changes it
			switch i % 3 {
			case 0:
				w.Op, w.Users = membership.OpAdd, storetest.UsersOf(uid)
			case 1:
				w.Op, w.Users = membership.OpReplace, storetest.UsersOf(uid)
			case 2:
				w.Op = membership.OpDeleteGroup
			}
			wg.Go(func() {
				<-start
				results[i], errs[i] = stores[i%2].Write(ctx, w)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				assert.Equal(t, -1, winner, "round %d: writers %d and %d both won", round, winner, i)
				winner = i
			}
		}
		require.NotEqual(t, -1, winner, "round %d: nobody won", round)
		won := results[winner].Revision
		assert.Equal(t, setup.Revision+1, won, "round %d", round)
		for i, err := range errs {
			if i == winner {
				continue
			}
			assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err), "round %d, writer %d: %v", round, i, err)
			var failed *membership.Error
			if assert.ErrorAs(t, err, &failed) {
				assert.Equal(t, won, failed.Revision, "round %d, writer %d: the failure names the winner's revision", round, i)
			}
		}
		var inLog int
		require.NoError(t, a.pool.QueryRow(ctx, "SELECT count(*) FROM membership_changes WHERE if_revisions = $1", []int64{int64(setup.Revision)}).Scan(&inLog))
		t.Logf("round %d: %d of %d writers reached the log", round, inLog, writers)
		untilApplied(t, a, won)
		untilApplied(t, b, won)
		want := snapshotOf(t, a, []string{"g"}, nil)
		assert.Equal(t, want, snapshotOf(t, b, []string{"g"}, nil), "round %d", round)
		assert.Equal(t, won, want.Revisions["g"], "round %d", round)
	}
}

// An instance opened again replays the log to the same state, revisions
// and feed, preconditions that failed in the log included.
func TestRestartReplaysWrites(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a := openOn(t, url, membership.DefaultChangesKeep)
	groups := []string{"a", "b", "c"}
	const nUsers = 8
	writeRandomly(t, []*Store{a}, groups, nUsers)
	res, err := storetest.Add(ctx, a, "a", []membership.User{storetest.Nicknamed(1, "x")})
	require.NoError(t, err)
	c, err := changeOf(membership.Write{Op: membership.OpReplace, GroupID: "a", Users: storetest.UsersOf(5),
		If: membership.Precondition{Revisions: []membership.Revision{res.Revision - 1}}})
	require.NoError(t, err)
	_, err = a.commit(ctx, c) // into the log, to fail there
	require.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err), "%v", err)
	_, err = a.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: "b", Users: storetest.UsersOf(2, 3), If: membership.Precondition{Exists: true}})
	if err != nil {
		require.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err), "%v", err)
	}
	var uids []membership.UID
	for uid := range membership.UID(nUsers) {
		uids = append(uids, uid+1)
	}
	want := snapshotOf(t, a, groups, uids)
	require.NoError(t, a.Close())
	again := openOn(t, url, membership.DefaultChangesKeep)
	assert.Equal(t, want, snapshotOf(t, again, groups, uids))
}

// A log written before migration 0002 applies as it did, and takes the
// new ops after it.
func TestALogOfVersion1AppliesAsBefore(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	ms, err := readMigrations()
	require.NoError(t, err)
	_, err = migrate(ctx, pool, ms[:1])
	require.NoError(t, err)
	// As the build before 0002 wrote them, placed.
	_, err = pool.Exec(ctx, `INSERT INTO membership_changes (pos, ticket, op, group_id, uids, nicknames) VALUES
		(1, 1, 1, 'g', '{1,2,3}', ARRAY['one'::bytea, NULL, '']),
		(2, 2, 2, 'g', '{2}', NULL),
		(3, 3, 1, 'h', '{3}', NULL)`)
	require.NoError(t, err)
	s := openOn(t, url, membership.DefaultChangesKeep)
	mem := memory.New()
	for _, w := range []membership.Write{
		{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{storetest.Nicknamed(1, "one"), {UID: 2}, storetest.Nicknamed(3, "")}},
		{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{2}},
		{Op: membership.OpAdd, GroupID: "h", Users: storetest.UsersOf(3)},
	} {
		_, err := mem.Write(ctx, w)
		require.NoError(t, err)
	}
	groups, uids := []string{"g", "h"}, []membership.UID{1, 2, 3}
	assert.Equal(t, snapshotOf(t, mem, groups, uids), snapshotOf(t, s, groups, uids))
	w := membership.Write{Op: membership.OpReplace, GroupID: "g", Users: storetest.UsersOf(4), If: membership.Precondition{Revisions: []membership.Revision{2}}}
	want, err := mem.Write(ctx, w)
	require.NoError(t, err)
	got, err := s.Write(ctx, w)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// A change of an op this build does not know (a newer build's) stops the
// instance taking changes, as a gap does, rather than be skipped: skipped,
// it would leave this instance's state apart from the others'.
func TestAnUnknownOpStopsTheInstance(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a := openOn(t, url, membership.DefaultChangesKeep)
	res, err := storetest.Add(ctx, a, "g", storetest.UsersOf(1))
	require.NoError(t, err)
	// As a newer build, with the op after this build's last, would (as
	// this build's op 7, expire, is to a build before it).
	unknown := len(ops)
	_, err = a.pool.Exec(ctx, "ALTER TABLE membership_changes DROP CONSTRAINT membership_changes_op_check")
	require.NoError(t, err)
	_, err = a.pool.Exec(ctx, "INSERT INTO membership_changes (ticket, op, group_id, uids) VALUES (1, $1, 'g', '{}')", unknown)
	require.NoError(t, err)
	a.kickSequencer()
	untilWritable(t, a, false)
	assert.Contains(t, a.Writable().Error(), fmt.Sprintf("op %d, which this build does not know", unknown))
	rev, err := a.Revision(ctx, "g")
	require.NoError(t, err)
	assert.Equal(t, res.Revision, rev, "nothing more applied")
	_, err = Open(ctx, url, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("op %d, which this build does not know", unknown))
}
