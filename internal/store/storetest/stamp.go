package storetest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// testStamps checks that every change carries the actor its write named
// and the time it was committed.
func testStamps(t *testing.T, newStore func(t *testing.T) membership.Store) {
	ctx := context.Background()
	plain := func(uids ...membership.UID) []membership.User {
		us := make([]membership.User, len(uids))
		for i, uid := range uids {
			us[i] = membership.User{UID: uid}
		}
		return us
	}
	s := newStore(t)
	since := time.Now()
	writes := []membership.Write{
		{Op: membership.OpAdd, GroupID: "g", Users: plain(1, 2, 3), Actor: 7},
		{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{3}, Actor: math.MaxInt64},
		{Op: membership.OpReplace, GroupID: "g", Users: plain(1, 4), Actor: 8},
		{Op: membership.OpRemoveUser, UIDs: []membership.UID{4}, Actor: 9},
		{Op: membership.OpAdd, GroupID: "h", Users: plain(5)}, // no actor
		{Op: membership.OpDeleteGroup, GroupID: "g", Actor: 10, If: membership.Precondition{Exists: true}},
	}
	for _, w := range writes {
		_, err := s.Write(ctx, w)
		require.NoError(t, err, w.Op)
	}
	// What changes nothing, and what fails, records nothing, actor or not.
	_, err := s.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "h", Users: plain(5), Actor: 11})
	require.NoError(t, err)
	_, err = s.Write(ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: "h", Actor: 12, If: membership.Precondition{Empty: true}})
	require.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err))
	_, err = Add(ctx, s, "h", plain(6)) // names no actor
	require.NoError(t, err)

	got := Untimed(t, AllChanges(t, s, 0), since)
	require.Len(t, got, len(writes)+1)
	for i, w := range writes {
		assert.Equal(t, w.Op, got[i].Op, "change %d", i+1)
		assert.Equal(t, w.Actor, got[i].Actor, "change %d (%s)", i+1, w.Op)
	}
	assert.Equal(t, membership.UID(0), got[len(writes)].Actor, "AddMembers names no actor")
}
