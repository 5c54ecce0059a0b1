package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/membership"
)

// Expire applies every expiry s finds due at now, as the expirer does, and
// returns how many memberships ended.
func Expire(t *testing.T, s store.Expiring, now time.Time) int {
	t.Helper()
	n := 0
	for _, d := range s.DueExpiries(now, 1<<20) {
		res, err := s.Write(context.Background(), d.Write)
		require.NoError(t, err)
		n += res.Count
	}
	return n
}

// ExpiresAt returns a user whose membership ends at at (zero: made
// permanent).
func ExpiresAt(uid membership.UID, at time.Time) membership.User {
	return membership.User{UID: uid, Expiry: membership.Expiry{Set: true, At: at}}
}

// ExpiresIn returns a user whose membership ends ttl after the write.
func ExpiresIn(uid membership.UID, ttl time.Duration) membership.User {
	return membership.User{UID: uid, Expiry: membership.Expiry{Set: true, TTL: ttl}}
}

// Clock is a clock a test sets, for an expirer: no test waits for an
// expiry on the wall clock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock set to now.
func NewClock(now time.Time) *Clock { return &Clock{now: now} }

// Now returns the time last set.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// Set sets the time.
func (c *Clock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// InAnHour returns the time an hour from now, in UTC to the millisecond:
// a time for expiries, which the service requires to be ahead of the wall
// clock, to come due at on the clock a test gives.
func InAnHour() time.Time { return time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour) }
