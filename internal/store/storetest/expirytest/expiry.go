// Package expirytest is the part of the store contract about memberships
// that end by themselves: expiries set, changed and ended, found due on a
// clock the test sets, and their changes in the feed.
package expirytest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// Contract checks memberships that end by themselves (membership.OpExpire),
// with the clock given to DueExpiries: no test waits for an expiry.
func Contract(t *testing.T, newStore func(t *testing.T) store.Expiring) {
	storetest.Run(t, newStore, []storetest.Case[store.Expiring]{
		{Name: "a membership ends at its expiry, in a change of its own", Test: testMembershipEnds},
		{Name: "an add sets, extends, shortens or ends an expiry; without one it keeps it", Test: testAddSetsExpiry},
		{Name: "an expiry extended after it was found due is not applied", Test: testExtendedAfterDue},
		{Name: "an expiry changed, found due with its old time, ends at its new one", Test: testChangedAfterDue},
		{Name: "expiries given back are due again", Test: testGivenBackDueAgain},
		{Name: "a membership ended otherwise has no expiry left", Test: testEndedOtherwise},
		{Name: "a replace and a batch set expiries as an add does", Test: testReplaceAndBatchExpiries},
		{Name: "a ttl counts from the write's commit", Test: testTTLFromCommit},
		{Name: "a follower of the feed reproduces every list across expiries", Test: testFollowerAcrossExpiries},
	})
}

func testMembershipEnds(t *testing.T, ctx context.Context, s store.Expiring) {
	t0 := storetest.InAnHour()
	add(t, s, "g", storetest.ExpiresAt(1, t0), membership.User{UID: 2}, storetest.ExpiresAt(3, t0.Add(time.Minute)))
	add(t, s, "h", storetest.ExpiresAt(1, t0))
	got, _ := storetest.ListAll(t, s, "g")
	assert.Equal(t, []membership.Member{{UID: 1, Expires: t0}, {UID: 2}, {UID: 3, Expires: t0.Add(time.Minute)}}, got)
	m, ok, err := s.Member(ctx, "g", 1)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, t0, m.Expires)
	assert.Equal(t, int64(3), s.ExpiryCount())
	next, ok := s.NextExpiry()
	require.True(t, ok)
	assert.Equal(t, t0, next)

	assert.Empty(t, s.DueExpiries(t0.Add(-time.Millisecond), 100), "nothing is due before its time")
	before := storetest.Latest(t, s)
	assert.Equal(t, 2, storetest.Expire(t, s, t0), "user 1 in g and in h")
	got, _ = storetest.ListAll(t, s, "g")
	assert.Equal(t, []membership.Member{{UID: 2}, {UID: 3, Expires: t0.Add(time.Minute)}}, got)
	got, _ = storetest.ListAll(t, s, "h")
	assert.Empty(t, got)
	groups, total := storetest.UserGroups(t, s, 1, membership.GroupListOptions{})
	assert.Empty(t, groups)
	assert.Zero(t, total)
	found, _, err := s.CheckMembers(ctx, []membership.Check{{GroupID: "g", UID: 1}, {GroupID: "g", UID: 3}})
	require.NoError(t, err)
	assert.Equal(t, []bool{false, true}, found)
	changes := storetest.AllChanges(t, s, before)
	require.Len(t, changes, 2, "one change per group")
	for _, c := range changes {
		assert.Equal(t, membership.OpExpire, c.Op)
		assert.Equal(t, []membership.UID{1}, c.UIDs)
		assert.Zero(t, c.Actor, "the service's own change")
		assert.Empty(t, c.Principal, "the service's own change")
		assert.False(t, c.Time.IsZero())
	}
	assert.ElementsMatch(t, []string{"g", "h"}, []string{changes[0].GroupID, changes[1].GroupID})
	assert.Equal(t, int64(1), s.ExpiryCount())
	assert.Zero(t, storetest.Expire(t, s, t0), "an expiry applied is not due again")
}

func testAddSetsExpiry(t *testing.T, _ context.Context, s store.Expiring) {
	t0 := storetest.InAnHour()
	add(t, s, "g", storetest.ExpiresAt(1, t0), storetest.ExpiresAt(2, t0), storetest.ExpiresAt(3, t0), storetest.ExpiresAt(4, t0))
	before := storetest.Latest(t, s)
	add(t, s, "g", storetest.ExpiresAt(1, t0.Add(time.Hour)), storetest.ExpiresAt(2, t0.Add(-time.Minute)), storetest.ExpiresAt(3, time.Time{}), membership.User{UID: 4})
	changes := storetest.AllChanges(t, s, before)
	require.Len(t, changes, 1)
	assert.Equal(t, []membership.MemberExpiry{{UID: 1, At: t0.Add(time.Hour)}, {UID: 2, At: t0.Add(-time.Minute)}, {UID: 3}}, changes[0].Expiries)
	assert.Empty(t, changes[0].UIDs, "no one joined")
	same := add(t, s, "g", storetest.ExpiresAt(1, t0.Add(time.Hour)))
	assert.Equal(t, changes[0].Revision, same.Revision, "the same expiry again changes nothing")

	assert.Equal(t, 1, storetest.Expire(t, s, t0.Add(-time.Minute)), "user 2, shortened")
	assert.Equal(t, 1, storetest.Expire(t, s, t0), "user 4, kept")
	assert.Zero(t, storetest.Expire(t, s, t0.Add(time.Minute)), "user 3 is permanent now")
	assert.Equal(t, 1, storetest.Expire(t, s, t0.Add(time.Hour)), "user 1, extended")
	got, _ := storetest.ListAll(t, s, "g")
	assert.Equal(t, []membership.Member{{UID: 3}}, got)
}

func testExtendedAfterDue(t *testing.T, ctx context.Context, s store.Expiring) {
	t0 := storetest.InAnHour()
	add(t, s, "g", storetest.ExpiresAt(1, t0), storetest.ExpiresAt(2, t0))
	due := s.DueExpiries(t0, 100)
	require.Len(t, due, 1)
	add(t, s, "g", storetest.ExpiresAt(1, t0.Add(time.Hour)))
	res := storetest.MustWrite(t, s, due[0].Write)
	assert.Equal(t, 1, res.Count, "user 2 only")
	got, _ := storetest.ListAll(t, s, "g")
	assert.Equal(t, []membership.Member{{UID: 1, Expires: t0.Add(time.Hour)}}, got)
	assert.Equal(t, 1, storetest.Expire(t, s, t0.Add(time.Hour)))
}

func testChangedAfterDue(t *testing.T, _ context.Context, s store.Expiring) {
	t0 := storetest.InAnHour()
	// Each user's expiry is set three times; all are past when the
	// expirer looks (it was not running, or the log was replayed).
	for _, k := range []int{0, 2, 1} {
		add(t, s, "g", storetest.ExpiresAt(1, t0.Add(time.Duration(k)*time.Second)), storetest.ExpiresAt(2, t0.Add(time.Duration(2-k)*time.Second)))
	}
	add(t, s, "g", storetest.ExpiresAt(3, t0), membership.User{UID: 4})
	add(t, s, "g", storetest.ExpiresAt(3, time.Time{}))
	assert.Equal(t, 2, storetest.Expire(t, s, t0.Add(time.Minute)), "users 1 and 2, each once")
	got, _ := storetest.ListAll(t, s, "g")
	assert.Equal(t, []membership.Member{{UID: 3}, {UID: 4}}, got)
	assert.Zero(t, s.ExpiryCount())
}

func testGivenBackDueAgain(t *testing.T, _ context.Context, s store.Expiring) {
	t0 := storetest.InAnHour()
	add(t, s, "g", storetest.ExpiresAt(1, t0))
	due := s.DueExpiries(t0, 100)
	require.Len(t, due, 1)
	assert.Empty(t, s.DueExpiries(t0, 100), "taken")
	s.RequeueExpiries(due)
	assert.Equal(t, 1, storetest.Expire(t, s, t0))
}

func testEndedOtherwise(t *testing.T, ctx context.Context, s store.Expiring) {
	t0 := storetest.InAnHour()
	add(t, s, "a", storetest.ExpiresAt(1, t0), storetest.ExpiresAt(2, t0), storetest.ExpiresAt(3, t0))
	add(t, s, "b", storetest.ExpiresAt(4, t0), storetest.ExpiresAt(5, t0))
	add(t, s, "c", storetest.ExpiresAt(6, t0))
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpRemove, GroupID: "a", UIDs: []membership.UID{1}})
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpReplace, GroupID: "a", Users: []membership.User{{UID: 3}, {UID: 7}}})
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpDeleteGroup, GroupID: "b"})
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{6}})
	assert.Equal(t, int64(1), s.ExpiryCount(), "user 3, kept by the replace")
	add(t, s, "a", membership.User{UID: 1}, membership.User{UID: 2})
	add(t, s, "b", membership.User{UID: 4})
	add(t, s, "c", membership.User{UID: 6})
	assert.Equal(t, 1, storetest.Expire(t, s, t0), "only user 3's expiry is left")
	got, _ := storetest.ListAll(t, s, "a")
	assert.Equal(t, []membership.Member{{UID: 1}, {UID: 2}, {UID: 7}}, got)
}

func testReplaceAndBatchExpiries(t *testing.T, ctx context.Context, s store.Expiring) {
	t0 := storetest.InAnHour()
	add(t, s, "g", storetest.ExpiresAt(1, t0), storetest.ExpiresAt(2, t0))
	before := storetest.Latest(t, s)
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{
		{UID: 1}, storetest.ExpiresAt(2, time.Time{}), storetest.ExpiresAt(3, t0.Add(time.Minute)),
	}})
	changes := storetest.AllChanges(t, s, before)
	require.Len(t, changes, 1)
	assert.Equal(t, []membership.MemberExpiry{{UID: 2}, {UID: 3, At: t0.Add(time.Minute)}}, changes[0].Expiries)
	storetest.MustBatch(t, s, membership.Batch{Writes: []membership.Write{
		{Op: membership.OpAdd, GroupID: "h", Users: []membership.User{storetest.ExpiresAt(9, t0)}},
		{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{storetest.ExpiresAt(2, t0)}},
	}})
	got, _ := storetest.ListAll(t, s, "g")
	assert.Equal(t, []membership.Member{{UID: 1, Expires: t0}, {UID: 2, Expires: t0}, {UID: 3, Expires: t0.Add(time.Minute)}}, got)
	assert.Equal(t, 3, storetest.Expire(t, s, t0), "users 1 and 2 in g, 9 in h")
	assert.Equal(t, 1, storetest.Expire(t, s, t0.Add(time.Minute)))
}

func testTTLFromCommit(t *testing.T, _ context.Context, s store.Expiring) {
	before := storetest.Latest(t, s)
	const ttl = 4 * time.Hour
	start := time.Now()
	add(t, s, "g", membership.User{UID: 1, Expiry: membership.Expiry{Set: true, TTL: ttl}})
	end := time.Now()
	changes := storetest.AllChanges(t, s, before)
	require.Len(t, changes, 1)
	require.Len(t, changes[0].Expiries, 1)
	at := changes[0].Expiries[0].At
	assert.Equal(t, []membership.MemberExpiry{{UID: 1, At: at}}, changes[0].Expiries)
	// The commit is a moment within the write's call: the change's
	// time where the store stamps both at once (memory, durable), or,
	// where the change takes its time later from another clock
	// (PostgreSQL: the database's, as the sequencer places it), when
	// the store took the write, moments before.
	assert.False(t, at.Before(start.Add(ttl).Truncate(time.Millisecond)), "%s counts from %s or later", at, start)
	assert.False(t, at.After(end.Add(ttl)), "%s counts from %s or earlier", at, end)
	assert.Equal(t, at, at.UTC().Truncate(time.Millisecond), "in UTC, to the millisecond")
	got, _ := storetest.ListAll(t, s, "g")
	assert.Equal(t, []membership.Member{{UID: 1, Expires: at}}, got)
}

func testFollowerAcrossExpiries(t *testing.T, ctx context.Context, s store.Expiring) {
	t0 := storetest.InAnHour()
	rng := rand.New(rand.NewPCG(7, 8))
	f := storetest.NewFollower()
	groups := []string{"a", "b", "c"}
	for _, g := range groups {
		require.NoError(t, f.Relist(s, g))
	}
	since := storetest.Latest(t, s)
	clock := t0
	for i := range 400 {
		g := groups[rng.IntN(len(groups))]
		uid := membership.UID(rng.IntN(12) + 1)
		var u membership.User
		switch rng.IntN(4) {
		case 0:
			u = membership.User{UID: uid}
		case 1:
			u = storetest.ExpiresAt(uid, time.Time{})
		default:
			u = storetest.ExpiresAt(uid, clock.Add(time.Duration(rng.IntN(20))*time.Second))
		}
		var w membership.Write
		switch rng.IntN(10) {
		case 0:
			w = membership.Write{Op: membership.OpRemove, GroupID: g, UIDs: []membership.UID{uid}}
		case 1:
			w = membership.Write{Op: membership.OpReplace, GroupID: g, Users: []membership.User{u, {UID: uid%12 + 1}}}
		case 2:
			w = membership.Write{Op: membership.OpDeleteGroup, GroupID: g}
		default:
			w = membership.Write{Op: membership.OpAdd, GroupID: g, Users: []membership.User{u}}
		}
		_, err := s.Write(ctx, w)
		require.NoError(t, err, "write %d", i)
		if i%10 == 0 {
			clock = clock.Add(3 * time.Second)
			storetest.Expire(t, s, clock)
		}
	}
	f.ApplyAll(storetest.AllChanges(t, s, since))
	for _, g := range groups {
		got, _ := storetest.ListAll(t, s, g)
		assert.Equal(t, got, f.ListOf(g), fmt.Sprint("group ", g))
	}
}

// add adds users to group and requires it to succeed.
func add(t *testing.T, s store.Expiring, group string, users ...membership.User) membership.Result {
	t.Helper()
	return storetest.MustWrite(t, s, membership.Write{Op: membership.OpAdd, GroupID: group, Users: users})
}
