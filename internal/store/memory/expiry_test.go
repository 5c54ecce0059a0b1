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
