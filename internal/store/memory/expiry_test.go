package memory

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// Expiries changed again and again, far ahead, leave stale entries in the
// due queue; the expirer's every look at the queue compacts it, so that it
// holds at most about twice the expiries there are.
func TestTheDueQueueStaysWithinTwiceTheExpiries(t *testing.T) {
	m := New()
	far := time.Date(2035, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10_000 {
		_, err := m.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{
			{UID: 1, Expiry: membership.Expiry{Set: true, At: far.Add(time.Duration(i) * time.Millisecond)}},
		}})
		require.NoError(t, err)
		if i%100 == 0 {
			m.NextExpiry()
		}
	}
	m.NextExpiry()
	m.due.mu.Lock()
	n := len(m.due.entries)
	m.due.mu.Unlock()
	assert.LessOrEqual(t, n, 1025, "one expiry, and the stale entries of fewer than 1024 changes")
	next, ok := m.NextExpiry()
	require.True(t, ok)
	assert.False(t, next.After(far.Add(9999*time.Millisecond)), "no later than the one expiry (a stale entry may come first)")
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
