package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/expiry"
	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/internal/store/storetest/expirytest"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/postgres/internal/pgtest"
)

func TestPostgresExpiries(t *testing.T) {
	expirytest.Contract(t, func(t *testing.T) store.Expiring { return openTest(t, membership.DefaultChangesKeep) })
}

// ahead is a time an hour ahead of the wall clock, to the millisecond:
// expiries ahead of it are ones the service takes, and come due on the
// tests' clocks.
func ahead() time.Time { return time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour) }

// expiryState is what a store says of its expiries besides its lists:
// how many there are, and the writes that would end them all, each
// group's with its earliest expiry.
type expiryState struct {
	Count int64
	Due   []store.Due
}

// expiryStateOf returns s's expiryState. It takes every expiry from s's
// queue, and gives them back (RequeueExpiries): those of its queue that no
// longer hold (NextExpiry may name one) are dropped.
func expiryStateOf(s store.Expiring) expiryState {
	due := s.DueExpiries(time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC), 1<<30)
	s.RequeueExpiries(due)
	return expiryState{Count: s.ExpiryCount(), Due: due}
}

// expireChanges returns the expire changes of a feed, by group.
func expireChanges(feed []membership.Change) map[string][]membership.Change {
	out := map[string][]membership.Change{}
	for _, c := range feed {
		if c.Op == membership.OpExpire {
			out[c.GroupID] = append(out[c.GroupID], c)
		}
	}
	return out
}

// expireRows counts the expire rows of the log (op 7).
func expireRows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	require.NoError(t, s.pool.QueryRow(context.Background(), "SELECT count(*) FROM membership_changes WHERE op = 7").Scan(&n))
	return n
}

// Expiries set on one instance, by an add, a replace and a batch, as
// times, TTLs or made permanent, go through the log: another instance,
// and one started afterwards, list them with their Expires, and would end
// them at the same times. A TTL is a time in the log, counted from when
// the writer's instance took the write.
func TestExpiriesSetOnOneInstanceAreListedOnAnother(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	t0 := ahead()
	const ttl = 2 * time.Hour
	start := time.Now()
	_, err := storetest.Add(ctx, a, "g", []membership.User{storetest.ExpiresAt(1, t0), storetest.Nicknamed(2, "two"), storetest.ExpiresAt(3, t0.Add(time.Minute)), storetest.ExpiresIn(4, ttl)})
	require.NoError(t, err)
	_, err = a.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: "h", Users: []membership.User{storetest.ExpiresAt(5, t0), {UID: 6}, storetest.ExpiresIn(7, ttl)}})
	require.NoError(t, err)
	last, err := a.Batch(ctx, membership.Batch{Writes: []membership.Write{
		{Op: membership.OpAdd, GroupID: "k", Users: []membership.User{storetest.ExpiresAt(8, t0), storetest.ExpiresIn(9, ttl)}},
		{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{storetest.ExpiresAt(3, time.Time{}), {UID: 1}}}, // 3 made permanent, 1 kept
	}})
	require.NoError(t, err)
	end := time.Now()
	untilApplied(t, b, last.Revision)

	list, _ := storetest.ListAll(t, a, "g")
	require.Len(t, list, 4)
	ttlAt := list[3].Expires
	assert.False(t, ttlAt.Before(start.Add(ttl).Truncate(time.Millisecond)), "%s", ttlAt)
	assert.False(t, ttlAt.After(end.Add(ttl)), "%s", ttlAt)
	assert.Equal(t, []membership.Member{{UID: 1, Expires: t0}, {UID: 2, Nickname: "two"}, {UID: 3}, {UID: 4, Expires: ttlAt}}, list)

	groups, uids := []string{"g", "h", "k"}, []membership.UID{1, 2, 3, 4, 5, 6, 7, 8, 9}
	want := snapshotOf(t, a, groups, uids)
	assert.Equal(t, want, snapshotOf(t, b, groups, uids), "the other instance lists them alike")
	assert.Equal(t, expiryStateOf(a), expiryStateOf(b))
	st := expiryStateOf(b)
	assert.Equal(t, int64(6), st.Count)
	assert.Len(t, st.Due, 3, "g, h and k")
	c := openOn(t, url, membership.DefaultChangesKeep) // from the log alone
	assert.Equal(t, want, snapshotOf(t, c, groups, uids), "an instance started afterwards lists them alike")
	assert.Equal(t, expiryStateOf(a), expiryStateOf(c))

	// The log holds times only: each TTL as the time it set.
	var expiries []*int64
	require.NoError(t, a.pool.QueryRow(ctx, "SELECT expiries FROM membership_changes WHERE pos = 1").Scan(&expiries))
	ms := func(t time.Time) *int64 { v := t.UnixMilli(); return &v }
	assert.Equal(t, []*int64{ms(t0), nil, ms(t0.Add(time.Minute)), ms(ttlAt)}, expiries, "NULL keeps a user's expiry")
	var batch []byte
	require.NoError(t, a.pool.QueryRow(ctx, "SELECT batch FROM membership_changes WHERE pos = 3").Scan(&batch))
	ws, err := decodeBatch(batch)
	require.NoError(t, err)
	for _, w := range ws {
		for _, u := range w.Users {
			assert.Zero(t, u.Expiry.TTL, "user %d", u.UID)
		}
	}
	assert.Equal(t, membership.Expiry{Set: true}, ws[1].Users[0].Expiry, "made permanent")
	assert.Equal(t, membership.Expiry{}, ws[1].Users[1].Expiry, "kept")
}

// Both instances run an expirer, on their own clocks: each membership ends
// once, in one expire change per group that both feeds show with one
// revision. A second instance's rows for expiries the first already ended
// change nothing and take no revision, whether they were found due before
// the first was applied there (forced here) or raced it.
// raceExpirers runs every expirer's ExpireDue rounds times, all at once,
// and returns how many memberships and nestings they ended in all.
func raceExpirers(t *testing.T, rounds int, expirers ...*expiry.Expirer) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	ended := 0
	for _, e := range expirers {
		wg.Go(func() {
			for range rounds {
				n, err := e.ExpireDue(context.Background())
				assert.NoError(t, err)
				mu.Lock()
				ended += n
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return ended
}

func TestTwoExpirersEndEachMembershipOnce(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	t0 := ahead()
	t1 := t0.Add(time.Minute)
	const groups = 8
	var last membership.Revision
	for i := range groups {
		at := t0
		if i%2 == 1 {
			at = t1
		}
		base := membership.UID(10 * i)
		res, err := storetest.Add(ctx, []*Store{a, b}[i%2], fmt.Sprint("g", i), []membership.User{
			storetest.ExpiresAt(base+1, at), storetest.ExpiresAt(base+2, at), {UID: base + 3}, storetest.ExpiresAt(base+4, t0.Add(time.Hour)),
		})
		require.NoError(t, err)
		last = max(last, res.Revision)
	}
	untilApplied(t, a, last)
	untilApplied(t, b, last)
	clockA, clockB := storetest.NewClock(t0.Add(-time.Second)), storetest.NewClock(t0.Add(-time.Second))
	ea, eb := expiry.New(a, clockA.Now, nil), expiry.New(b, clockB.Now, nil)
	n, err := ea.ExpireDue(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing is due yet")
	before := latestOf(t, a)

	// At t0, both find the even groups' expiries due before either has
	// applied the other's: b's rows come second, and change nothing.
	dueA, dueB := a.DueExpiries(t0, 1<<20), b.DueExpiries(t0, 1<<20)
	require.Len(t, dueA, groups/2)
	require.Equal(t, dueA, dueB, "both found the same due")
	ended := 0
	for _, d := range dueA {
		res, err := a.Write(ctx, d.Write)
		require.NoError(t, err)
		assert.Equal(t, 2, res.Count, d.Write.GroupID)
		ended += res.Count
	}
	for _, d := range dueB {
		res, err := b.Write(ctx, d.Write)
		require.NoError(t, err)
		assert.Zero(t, res.Count, "%s: ended already", d.Write.GroupID)
	}
	assert.Equal(t, before+groups/2, latestOf(t, b), "the second rows took no revision")
	assert.Equal(t, groups, expireRows(t, a), "both instances' rows are in the log")

	// At t1, both expirers run at once, again and again.
	clockA.Set(t1)
	clockB.Set(t1)
	ended += raceExpirers(t, 5, ea, eb)
	assert.Equal(t, 2*groups, ended, "each membership ended once, by either instance")
	t.Logf("%d expire rows for %d expire changes", expireRows(t, a), groups)

	settle(t, a, b)
	settle(t, b, a)
	feed := storetest.AllChanges(t, a, 0)
	assert.Equal(t, feed, storetest.AllChanges(t, b, 0), "one feed, with one revision and one time per change")
	byGroup := expireChanges(feed)
	require.Len(t, byGroup, groups)
	for i := range groups {
		g := fmt.Sprint("g", i)
		base := membership.UID(10 * i)
		if assert.Len(t, byGroup[g], 1, "%s: one expire change", g) {
			assert.Equal(t, []membership.UID{base + 1, base + 2}, byGroup[g][0].UIDs, g)
		}
		list, _ := storetest.ListAll(t, a, g)
		assert.Equal(t, []membership.Member{{UID: base + 3}, {UID: base + 4, Expires: t0.Add(time.Hour)}}, list, g)
	}
	var names []string
	var uids []membership.UID
	for i := range groups {
		names = append(names, fmt.Sprint("g", i))
		uids = append(uids, membership.UID(10*i+1), membership.UID(10*i+4))
	}
	want := snapshotOf(t, a, names, uids)
	assert.Equal(t, want, snapshotOf(t, b, names, uids))
	st := expiryStateOf(a)
	assert.Equal(t, int64(groups), st.Count)
	for _, d := range st.Due {
		assert.Equal(t, t0.Add(time.Hour), d.Earliest, d.Write.GroupID)
	}
	assert.Equal(t, expiryStateOf(a), expiryStateOf(b))
	c := openOn(t, url, membership.DefaultChangesKeep) // replays the duplicates as no-ops
	assert.Equal(t, want, snapshotOf(t, c, names, uids))
	assert.Equal(t, expiryStateOf(a), expiryStateOf(c))
}

// appendRow writes w to the log as an instance does, without placing it,
// waiting for it, or telling any sequencer: as an instance that is killed
// right after its row commits leaves it.
func appendRow(t *testing.T, s *Store, w membership.Write) {
	t.Helper()
	c, err := changeOf(w)
	require.NoError(t, err)
	_, err = s.pool.Exec(context.Background(), `INSERT INTO membership_changes
		(ticket, op, group_id, uids, nicknames, expiries, as_of) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		rand.Int64(), c.op, c.groupID, c.uids, c.nicknames, c.expiries, c.asOf)
	require.NoError(t, err)
}

// An instance lost while expiries are due (cut from the database, then
// killed, after it committed rows for some of them that it never placed
// nor applied): the other instance's expirer ends them all, each once; the
// lost instance's rows are placed and applied, and the other's rows for
// the same expiries change nothing.
func TestAnInstanceLostWhileExpiriesAreDueLosesNone(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	p := newProxy(t, fmt.Sprintf("%s:%d", cfg.Host, cfg.Port))
	a, err := Open(ctx, fmt.Sprintf("postgres://%s@%s/%s", cfg.User, p.ln.Addr(), cfg.Database),
		Options{ChangesKeep: membership.DefaultChangesKeep, CommitTimeout: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	b := openOn(t, url, membership.DefaultChangesKeep)
	t0 := ahead()
	const groups = 6
	var names []string
	var uids []membership.UID
	var last membership.Revision
	for i := range groups {
		g := fmt.Sprint("g", i)
		names = append(names, g)
		base := membership.UID(10 * i)
		uids = append(uids, base+1, base+2)
		res, err := storetest.Add(ctx, b, g, []membership.User{storetest.ExpiresAt(base+1, t0), storetest.ExpiresAt(base+2, t0), {UID: base + 3}})
		require.NoError(t, err)
		last = res.Revision
	}
	untilApplied(t, a, last)
	before := latestOf(t, b)

	// a finds them due, commits rows for half the groups, and is lost
	// before it places them: its expirer cannot write the rest.
	due := a.DueExpiries(t0, 1<<20)
	require.Len(t, due, groups)
	for _, d := range due[:groups/2] {
		appendRow(t, a, d.Write)
	}
	a.RequeueExpiries(due[groups/2:])
	p.cut()
	n, err := expiry.New(a, func() time.Time { return t0 }, nil).ExpireDue(ctx)
	assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err), "%v", err)
	assert.Zero(t, n)
	require.NoError(t, a.Close())
	require.Equal(t, groups/2, expireRows(t, b), "the lost instance's rows are in the log, unplaced")

	n, err = expiry.New(b, func() time.Time { return t0 }, nil).ExpireDue(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2*(groups-groups/2), n, "b's rows end what a's did not: its others come after a's, and change nothing")
	assert.Equal(t, groups+groups/2, expireRows(t, b))
	byGroup := expireChanges(storetest.AllChanges(t, b, before))
	for i, g := range names {
		if assert.Len(t, byGroup[g], 1, "%s: ended once", g) {
			base := membership.UID(10 * i)
			assert.Equal(t, []membership.UID{base + 1, base + 2}, byGroup[g][0].UIDs)
		}
		list, _ := storetest.ListAll(t, b, g)
		assert.Equal(t, []membership.Member{{UID: membership.UID(10*i + 3)}}, list, g)
	}
	assert.Equal(t, before+groups, latestOf(t, b), "one revision a group")
	assert.Zero(t, b.ExpiryCount())

	again := openOn(t, url, membership.DefaultChangesKeep) // a, restarted
	assert.Equal(t, snapshotOf(t, b, names, uids), snapshotOf(t, again, names, uids))
	n, err = expiry.New(again, func() time.Time { return t0 }, nil).ExpireDue(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing left to end")
}

// An instance started after expiries were due, when no instance ran to end
// them, ends them as it starts; one started after they were ended replays
// them to the same lists, revisions, feed and expiries.
func TestAnInstanceStartedAfterExpiriesReplaysThem(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a := openOn(t, url, membership.DefaultChangesKeep)
	t0 := ahead()
	_, err := storetest.Add(ctx, a, "g", []membership.User{storetest.ExpiresAt(1, t0), storetest.ExpiresAt(2, t0), storetest.ExpiresAt(3, t0.Add(time.Minute)), {UID: 4}})
	require.NoError(t, err)
	_, err = storetest.Add(ctx, a, "h", []membership.User{storetest.ExpiresAt(1, t0), storetest.ExpiresAt(5, t0.Add(time.Hour))})
	require.NoError(t, err)
	_, err = storetest.Add(ctx, a, "g", []membership.User{storetest.ExpiresAt(2, t0.Add(time.Hour))}) // extended
	require.NoError(t, err)
	require.NoError(t, a.Close()) // no instance runs

	b := openOn(t, url, membership.DefaultChangesKeep)
	n, err := expiry.New(b, func() time.Time { return t0.Add(time.Minute) }, nil).ExpireDue(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, n, "1 in g and h, 3 in g")
	groups, uids := []string{"g", "h"}, []membership.UID{1, 2, 3, 4, 5}
	want := snapshotOf(t, b, groups, uids)
	assert.Equal(t, []membership.Member{{UID: 2, Expires: t0.Add(time.Hour)}, {UID: 4}}, want.Lists["g"])
	assert.Equal(t, []membership.Member{{UID: 5, Expires: t0.Add(time.Hour)}}, want.Lists["h"])
	assert.Len(t, expireChanges(want.Feed), 2)

	c := openOn(t, url, membership.DefaultChangesKeep)
	assert.Equal(t, want, snapshotOf(t, c, groups, uids))
	assert.Equal(t, expiryStateOf(b), expiryStateOf(c))
	st := expiryStateOf(c)
	assert.Equal(t, int64(2), st.Count)
	for _, d := range st.Due {
		assert.Equal(t, t0.Add(time.Hour), d.Earliest, d.Write.GroupID)
	}
	n, err = expiry.New(c, func() time.Time { return t0.Add(time.Minute) }, nil).ExpireDue(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "ended once, by the first")
}

// Random writes with expiries on two instances, while both run an expirer
// on a clock that moves ahead: a follower of one instance's feed
// (/changes) reproduces the lists of both, Expires included, and so does
// an instance started afterwards.
func TestAFollowerOfAnInstanceReproducesListsAcrossExpiries(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	stores := []*Store{a, b}
	clock := storetest.NewClock(ahead())
	expirers := []*expiry.Expirer{expiry.New(a, clock.Now, nil), expiry.New(b, clock.Now, nil)}
	groups := []string{"a", "b", "c"}
	f := storetest.NewFollower()
	followed := membership.Revision(0)
	follow := func() {
		changes, _, err := b.Changes(ctx, membership.ChangeOptions{After: followed})
		require.NoError(t, err)
		for _, c := range changes {
			f.Apply(c)
			followed = c.Revision
		}
	}
	rng := rand.New(rand.NewPCG(28, 6))
	var wg sync.WaitGroup
	for w := range 4 {
		rng := rand.New(rand.NewPCG(uint64(w), rng.Uint64()))
		wg.Go(func() {
			for range 60 {
				s := stores[rng.IntN(2)]
				g := groups[rng.IntN(len(groups))]
				uid := membership.UID(rng.IntN(10) + 1)
				var u membership.User
				switch rng.IntN(5) {
				case 0:
					u = membership.User{UID: uid}
				case 1:
					u = storetest.ExpiresAt(uid, time.Time{})
				case 2:
					u = storetest.ExpiresIn(uid, time.Hour+time.Duration(rng.IntN(30))*time.Second)
				default:
					u = storetest.ExpiresAt(uid, clock.Now().Add(time.Duration(rng.IntN(20))*time.Second))
				}
				var err error
				switch rng.IntN(10) {
				case 0:
					_, err = storetest.Remove(ctx, s, g, []membership.UID{uid})
				case 1:
					_, err = s.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: g, Users: []membership.User{u, {UID: uid%10 + 1}}})
				case 2:
					_, err = s.Batch(ctx, membership.Batch{Writes: []membership.Write{
						{Op: membership.OpAdd, GroupID: g, Users: []membership.User{u}},
						{Op: membership.OpAdd, GroupID: groups[rng.IntN(len(groups))], Users: []membership.User{storetest.ExpiresAt(uid%10+1, clock.Now().Add(5*time.Second))}},
					}})
				default:
					_, err = storetest.Add(ctx, s, g, []membership.User{u})
				}
				if !assert.NoError(t, err) {
					return
				}
			}
		})
	}
	wg.Go(func() {
		// The expirers, on a clock that moves 3 s a round, past every
		// expiry but the TTLs'.
		for range 20 {
			clock.Set(clock.Now().Add(3 * time.Second))
			var round sync.WaitGroup
			for _, e := range expirers {
				round.Go(func() {
					_, err := e.ExpireDue(ctx)
					assert.NoError(t, err)
				})
			}
			round.Wait()
		}
	})
	for range 10 {
		follow()
	}
	wg.Wait()
	clock.Set(clock.Now().Add(2 * time.Hour)) // past the TTLs too
	for _, e := range expirers {
		_, err := e.ExpireDue(ctx)
		require.NoError(t, err)
	}
	settle(t, a, b)
	settle(t, b, a)
	follow()
	expired := 0
	for _, c := range storetest.AllChanges(t, b, 0) {
		if c.Op == membership.OpExpire {
			expired++
		}
	}
	assert.NotZero(t, expired, "memberships ended by themselves")
	c := openOn(t, url, membership.DefaultChangesKeep)
	for _, g := range groups {
		want := f.ListOf(g)
		for i, s := range []*Store{a, b, c} {
			got, _ := storetest.ListAll(t, s, g)
			if len(got) == 0 {
				got = []membership.Member{}
			}
			assert.Equal(t, want, got, "group %s, instance %d", g, i)
		}
	}
	assert.Zero(t, a.ExpiryCount())
	assert.Equal(t, expiryStateOf(a), expiryStateOf(b))
	assert.Equal(t, expiryStateOf(a), expiryStateOf(c))
}

// The log refuses expiries that do not go with uids one for one, go with
// an op other than add and replace, or are before 1970; an expire row
// without its time, and a time on another op.
func TestTheLogRefusesExpiriesItCannotApply(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, 0)
	for _, bad := range []struct {
		sql, constraint string
	}{
		{"INSERT INTO membership_changes (ticket, op, group_id, uids, expiries) VALUES (1, 1, 'g', '{1,2}', '{5}')", "membership_changes_expiries_check"},
		{"INSERT INTO membership_changes (ticket, op, group_id, uids, expiries) VALUES (1, 1, 'g', '{1}', '{-5}')", "membership_changes_expiries_check"},
		{"INSERT INTO membership_changes (ticket, op, group_id, uids, expiries) VALUES (1, 2, 'g', '{1}', '{5}')", "membership_changes_expiries_check"},
		{"INSERT INTO membership_changes (ticket, op, group_id, uids) VALUES (1, 7, 'g', '{1}')", "membership_changes_as_of_check"},
		{"INSERT INTO membership_changes (ticket, op, group_id, uids, as_of) VALUES (1, 2, 'g', '{1}', now())", "membership_changes_as_of_check"},
	} {
		_, err := s.pool.Exec(ctx, bad.sql)
		assert.ErrorContains(t, err, bad.constraint, bad.sql)
	}
	assert.Zero(t, logRows(t, s))
	for _, good := range []string{
		"INSERT INTO membership_changes (ticket, op, group_id, uids, expiries) VALUES (1, 3, 'g', '{1,2,3}', '{5,NULL,0}')",
		"INSERT INTO membership_changes (ticket, op, group_id, uids, as_of) VALUES (1, 7, 'g', '{1}', now())",
	} {
		_, err := s.pool.Exec(ctx, good)
		assert.NoError(t, err, good)
	}
}

// An expire row that cannot be applied as written (the database's checks
// dropped) stops the instance rather than be applied otherwise.
func TestAnExpireRowWithoutItsTimeStopsTheInstance(t *testing.T) {
	ctx := context.Background()
	a := openTest(t, membership.DefaultChangesKeep)
	res, err := storetest.Add(ctx, a, "g", []membership.User{storetest.ExpiresAt(1, ahead())})
	require.NoError(t, err)
	_, err = a.pool.Exec(ctx, "ALTER TABLE membership_changes DROP CONSTRAINT membership_changes_as_of_check")
	require.NoError(t, err)
	_, err = a.pool.Exec(ctx, "INSERT INTO membership_changes (ticket, op, group_id, uids) VALUES (1, 7, 'g', '{1}')")
	require.NoError(t, err)
	a.kickSequencer()
	untilWritable(t, a, false)
	assert.Contains(t, a.Writable().Error(), "an expire without its time")
	assert.Equal(t, res.Revision, latestOf(t, a), "nothing more applied")
	list, _ := storetest.ListAll(t, a, "g")
	assert.Len(t, list, 1)
}
