package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"example.com/groupmembership/membership"
)

// Untimed checks that every one of changes has a time as stores give
// them, in UTC to the millisecond, from since (read from the clock before
// the changes were made) to now, and returns the changes without their
// times, to compare with changes written out.
func Untimed(t *testing.T, changes []membership.Change, since time.Time) []membership.Change {
	t.Helper()
	now := time.Now()
	out := make([]membership.Change, len(changes))
	for i, c := range changes {
		CheckTime(t, c, since, now)
		c.Time = time.Time{}
		out[i] = c
	}
	return out
}

// CheckTime checks that c has a time as stores give them, in UTC to the
// millisecond, from since to until.
func CheckTime(t *testing.T, c membership.Change, since, until time.Time) {
	t.Helper()
	assert.Equal(t, time.UTC, c.Time.Location(), "change %d: its time is in UTC", c.Revision)
	assert.Zero(t, c.Time.Nanosecond()%int(time.Millisecond), "change %d: its time is to the millisecond", c.Revision)
	assert.False(t, c.Time.Before(since.Truncate(time.Millisecond)), "change %d: its time %s is before the test's start, %s", c.Revision, c.Time, since)
	assert.False(t, c.Time.After(until), "change %d: its time %s is after the test's end, %s", c.Revision, c.Time, until)
}
