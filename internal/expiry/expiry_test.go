package expiry

import (
	"context"
	"errors"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
)

// clock is a clock the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

func addExpiring(t *testing.T, s membership.Store, group string, at time.Time, uids ...membership.UID) {
	t.Helper()
	w := membership.Write{Op: membership.OpAdd, GroupID: group}
	for _, uid := range uids {
		w.Users = append(w.Users, membership.User{UID: uid, Expiry: membership.Expiry{Set: true, At: at}})
	}
	_, err := s.Write(context.Background(), w)
	require.NoError(t, err)
}

func TestExpireDueEndsWhatIsDueOnItsClock(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &clock{now: t0.Add(-time.Second)}
	s := memory.New()
	addExpiring(t, s, "g", t0, 1, 2)
	addExpiring(t, s, "g", t0.Add(time.Hour), 3)
	e := New(s, c.Now, nil)

	n, err := e.ExpireDue(context.Background())
	require.NoError(t, err)
	assert.Zero(t, n)
	c.Set(t0.Add(250 * time.Millisecond))
	n, err = e.ExpireDue(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, n)

	var w metrics.Writer
	e.WriteMetrics(&w)
	out := string(w.Bytes())
	assert.Contains(t, out, "membership_expiring_members 1\n")
	assert.Contains(t, out, "membership_expiries_total 2\n")
	assert.Contains(t, out, `membership_expiry_lag_seconds_bucket{le="0.25"} 1`, "found 250 ms after the expiry")
	assert.Contains(t, out, `membership_expiry_lag_seconds_bucket{le="0.1"} 0`)
}

func TestAMillionDueAtOnceEndInBoundedChanges(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := memory.New()
	const n = 30_000
	uids := make([]membership.UID, n)
	for i := range uids {
		uids[i] = membership.UID(i + 1)
	}
	addExpiring(t, s, "big", t0, uids...)
	before := s.LatestRevision()
	ended, err := New(s, func() time.Time { return t0 }, nil).ExpireDue(context.Background())
	require.NoError(t, err)
	assert.Equal(t, n, ended)
	changes, _, err := s.Changes(context.Background(), membership.ChangeOptions{After: before})
	require.NoError(t, err)
	assert.Len(t, changes, n/10000, "in changes of at most 10,000")
	assert.Zero(t, s.ExpiryCount())
}

// refusing is a store whose writes fail until told otherwise, one by one:
// it has no round writer.
type refusing struct {
	store.Expiring
	refuse bool
}

func (r *refusing) Write(ctx context.Context, w membership.Write) (membership.Result, error) {
	if r.refuse {
		return membership.Result{}, errors.New("the disk is stuck")
	}
	return r.Expiring.Write(ctx, w)
}

// refusingRounds is a memory store whose rounds fail until told
// otherwise.
type refusingRounds struct {
	*memory.Store
	refuse bool
}

func (r *refusingRounds) WriteExpiries(ctx context.Context, ws []membership.Write) ([]membership.Result, error) {
	if r.refuse {
		return nil, errors.New("the disk is stuck")
	}
	return r.Store.WriteExpiries(ctx, ws)
}

var (
	_ store.Expiring = (*refusing)(nil)
	_ roundWriter    = (*refusingRounds)(nil)
)

func TestExpiriesTheStoreRefusesWaitForTheNextRound(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	one, round := &refusing{Expiring: memory.New()}, &refusingRounds{Store: memory.New()}
	for _, c := range []struct {
		name   string
		s      store.Expiring
		refuse *bool
	}{{"one by one", one, &one.refuse}, {"a round at once", round, &round.refuse}} {
		t.Run(c.name, func(t *testing.T) {
			addExpiring(t, c.s, "g", t0, 1)
			addExpiring(t, c.s, "h", t0, 2)
			*c.refuse = true
			e := New(c.s, func() time.Time { return t0 }, nil)
			_, err := e.ExpireDue(context.Background())
			require.Error(t, err)
			assert.Equal(t, int64(2), c.s.ExpiryCount())
			assert.Equal(t, uint64(1), e.failed.Load())
			*c.refuse = false
			n, err := e.ExpireDue(context.Background())
			require.NoError(t, err)
			assert.Equal(t, 2, n, "none was lost")
			assert.Equal(t, uint64(2), e.applied.Load())
		})
	}
}

// gathering is a store whose writes, one by one (it has no round writer),
// wait until want of them are in flight at once (or give up after a long
// time, failing the test that needs them together), as a store that
// commits its writes together would like them.
type gathering struct {
	store.Expiring
	want     int
	mu       sync.Mutex
	inFlight int
	together chan struct{} // closed when want writes were in flight at once
}

func (s *gathering) Write(ctx context.Context, w membership.Write) (membership.Result, error) {
	s.mu.Lock()
	s.inFlight++
	if s.inFlight == s.want {
		close(s.together)
	}
	s.mu.Unlock()
	select {
	case <-s.together:
	case <-time.After(10 * time.Second):
		return membership.Result{}, errors.New("the expirer's writes never were in flight together")
	}
	return s.Expiring.Write(ctx, w)
}

// A round's changes are in flight together, so that a store that logs them
// commits them together (one fsync for the round, not one for each group).
func TestARoundsChangesAreInFlightTogether(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	mem := memory.New()
	s := &gathering{Expiring: mem, want: 4, together: make(chan struct{})}
	for g := range 4 {
		addExpiring(t, mem, "g"+string(rune('a'+g)), t0, membership.UID(g+1))
	}
	n, err := New(s, func() time.Time { return t0 }, nil).ExpireDue(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 4, n)
}

// The expirer looks again when the earliest expiry is due, at least a
// millisecond and at most an Interval from now.
func TestTheExpirerWaitsUntilTheEarliestExpiry(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := memory.New()
	e := New(s, func() time.Time { return t0 }, nil)
	assert.Equal(t, Interval, e.wait(), "none due")
	addExpiring(t, s, "later", t0.Add(time.Hour), 1)
	assert.Equal(t, Interval, e.wait(), "an hour away")
	addExpiring(t, s, "soon", t0.Add(30*time.Millisecond), 2)
	assert.Equal(t, 30*time.Millisecond, e.wait())
	addExpiring(t, s, "past", t0.Add(-time.Second), 3)
	assert.Equal(t, time.Millisecond, e.wait(), "due already")
}

// looking is a store that says when the expirer asks it for the next
// expiry.
type looking struct {
	store.Expiring
	looked chan struct{}
}

func (l *looking) NextExpiry() (time.Time, bool) {
	next, ok := l.Expiring.NextExpiry()
	select {
	case l.looked <- struct{}{}:
	default:
	}
	return next, ok
}

// An expiry set before the one the expirer waits for wakes it: with an
// Interval of an hour, only the store's word can bring it to look again.
func TestAnEarlierExpiryWakesTheExpirer(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := memory.New()
	addExpiring(t, s, "later", t0.Add(time.Hour), 1)
	l := &looking{Expiring: s, looked: make(chan struct{}, 1)}
	e := New(l, func() time.Time { return t0 }, nil)
	e.interval = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); e.Run(ctx) }()
	defer func() { cancel(); <-ran }()

	<-l.looked // Run has found the earliest an hour away, and waits for it
	rev := s.LatestRevision()
	addExpiring(t, s, "soon", t0, 2) // due at once on the expirer's clock
	waitCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	changes, _, err := s.Changes(waitCtx, membership.ChangeOptions{After: rev + 1, Wait: true})
	require.NoError(t, err, "the expirer waited for the hour")
	require.Len(t, changes, 1)
	assert.Equal(t, membership.OpExpire, changes[0].Op)
	assert.Equal(t, "soon", changes[0].GroupID)
}

// The expirer ends nestings as it ends memberships, in one round with
// them: an expire_groups change per parent.
func TestExpireDueEndsNestingsBesideMemberships(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &clock{now: t0.Add(-time.Second)}
	s := memory.New()
	ctx := context.Background()
	addExpiring(t, s, "g", t0, 1)
	_, err := s.Write(ctx, membership.Write{Op: membership.OpAddGroups, GroupID: "parent", Subgroups: []membership.Subgroup{
		{GroupID: "a", Expiry: membership.Expiry{Set: true, At: t0}}, {GroupID: "b", Expiry: membership.Expiry{Set: true, At: t0.Add(time.Hour)}}, {GroupID: "c"},
	}})
	require.NoError(t, err)
	e := New(s, c.Now, nil)
	before := s.LatestRevision()
	c.Set(t0)
	n, err := e.ExpireDue(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "user 1 in g, a in parent")
	changes, _, err := s.Changes(ctx, membership.ChangeOptions{After: before})
	require.NoError(t, err)
	require.Len(t, changes, 2)
	ops := []membership.Op{changes[0].Op, changes[1].Op}
	assert.ElementsMatch(t, []membership.Op{membership.OpExpire, membership.OpExpireGroups}, ops)
	var subs []string
	_, err = s.Subgroups(ctx, "parent", membership.NestingListOptions{}, func(_ int, groups iter.Seq[membership.Nested]) {
		for g := range groups {
			subs = append(subs, g.GroupID)
		}
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "c"}, subs)
	next, ok := s.NextExpiry()
	require.True(t, ok)
	assert.Equal(t, t0.Add(time.Hour), next, "the next the expirer waits for is the nesting's")
}
