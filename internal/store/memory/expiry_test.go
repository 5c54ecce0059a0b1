package memory

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// Expiries changed again and again, far ahead, leave nothing behind in
// the due set: it holds one entry for each expiry there is.
func TestTheDueSetHoldsOneEntryForEachExpiry(t *testing.T) {
	m := New()
	far := time.Date(2035, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10_000 {
		_, err := m.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{
			{UID: membership.UID(1 + i%3), Expiry: membership.Expiry{Set: true, At: far.Add(time.Duration(i) * time.Millisecond)}},
		}})
		require.NoError(t, err)
	}
	_, err := m.Write(context.Background(), membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{2}})
	require.NoError(t, err)
	n := 0
	for range m.due.All {
		n++
	}
	assert.Equal(t, 2, n, "uids 1 and 3, each with its last expiry")
	assert.Equal(t, int64(2), m.ExpiryCount())
	next, ok := m.NextExpiry()
	require.True(t, ok)
	assert.Equal(t, far.Add(9998*time.Millisecond), next, "uid 3's last")
}

// An expiry's write that names a uid more than once (a log may hold one)
// ends the membership once, and reports it once.
func TestAnExpiryNamingAUIDTwiceEndsItOnce(t *testing.T) {
	ctx := context.Background()
	m := New()
	at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	var users []membership.User
	for uid := membership.UID(1); uid <= 3; uid++ {
		users = append(users, membership.User{UID: uid, Expiry: membership.Expiry{Set: true, At: at}})
	}
	_, err := m.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: users})
	require.NoError(t, err)
	before := m.ExpiryCount()
	res, err := m.Write(ctx, membership.Write{Op: membership.OpExpire, GroupID: "g", UIDs: []membership.UID{3, 1, 3, 1, 3}, AsOf: at})
	require.NoError(t, err)
	assert.Equal(t, 2, res.Count)
	assert.Equal(t, before-2, m.ExpiryCount())
	changes, _, err := m.Changes(ctx, membership.ChangeOptions{After: res.Revision - 1})
	require.NoError(t, err)
	require.Len(t, changes, 1)
	assert.Equal(t, membership.OpExpire, changes[0].Op)
	assert.Equal(t, []membership.UID{1, 3}, changes[0].UIDs)
	member, ok, err := m.Member(ctx, "g", 2)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, at.UTC(), member.Expires)
}

// A round of DueExpiries that reaches its max inside a group's run of one
// time takes the rest of the run: each group's memberships due at once end
// in one change, not two.
func TestARoundOfExpiriesDoesNotSplitAGroup(t *testing.T) {
	ctx := context.Background()
	m := New()
	at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	for g := range 10 {
		var users []membership.User
		for uid := range 30 {
			users = append(users, membership.User{UID: membership.UID(1 + uid*7 + g), Expiry: membership.Expiry{Set: true, At: at}})
		}
		_, err := m.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g" + string(rune('a'+g)), Users: users})
		require.NoError(t, err)
	}
	seen := map[string]int{}
	for round := 0; ; round++ {
		require.Less(t, round, 10)
		due := m.DueExpiries(at, 50)
		if len(due) == 0 {
			break
		}
		for _, d := range due {
			seen[d.Write.GroupID]++
			assert.Len(t, d.Write.UIDs, 30, "group %s whole", d.Write.GroupID)
			assert.Equal(t, at.UTC(), d.Earliest)
		}
	}
	assert.Len(t, seen, 10)
	for g, n := range seen {
		assert.Equal(t, 1, n, "group %s in one write", g)
	}
}

// The store tells an expirer waiting for the earliest expiry when one is
// set before it, and only then.
func TestAnExpiryBeforeEveryOtherIsTold(t *testing.T) {
	ctx := context.Background()
	m := New()
	at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	told := func() bool {
		select {
		case <-m.ExpiryWakeup():
			return true
		default:
			return false
		}
	}
	add := func(uid membership.UID, at time.Time) {
		_, err := m.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{
			{UID: uid, Expiry: membership.Expiry{Set: true, At: at}},
		}})
		require.NoError(t, err)
	}
	add(1, at)
	assert.True(t, told(), "the first")
	add(2, at.Add(time.Minute))
	assert.False(t, told(), "a later one")
	add(3, at.Add(-time.Minute))
	assert.True(t, told(), "an earlier one")
	add(4, at.Add(-2*time.Minute))
	add(5, at.Add(-3*time.Minute))
	assert.True(t, told(), "two earlier ones: told once, the channel holds one")
	assert.False(t, told())
}
