package memory

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

func TestMemoryRevisionsAndFeed(t *testing.T) {
	storetest.RevisionsAndFeed(t, func(_ *testing.T, keep int) membership.Store {
		return NewWith(Options{ChangesKeep: keep})
	})
}

// A change takes the time its write gives, in UTC to the millisecond, as
// a log keeps it; Write stamps a write that gives none, Apply leaves it
// without, as a change logged before changes had times.
func TestChangeTimes(t *testing.T) {
	ctx := context.Background()
	m := New()
	given := time.Date(2026, 11, 25, 0, 59, 1, 123456789, time.FixedZone("CET", 3600))
	_, err := m.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}}, Time: given, Actor: 4})
	require.NoError(t, err)
	since := time.Now()
	_, err = m.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 2}}})
	require.NoError(t, err)
	_, err = m.Apply(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 3}}, Actor: 5})
	require.NoError(t, err)

	changes := storetest.AllChanges(t, m, 0)
	require.Len(t, changes, 3)
	assert.Equal(t, time.Date(2026, 11, 24, 23, 59, 1, 123e6, time.UTC), changes[0].Time)
	assert.Equal(t, membership.UID(4), changes[0].Actor)
	storetest.CheckTime(t, changes[1], since, time.Now())
	assert.Zero(t, changes[1].Actor)
	assert.True(t, changes[2].Time.IsZero(), "applied without a time, it has none")
	assert.Equal(t, membership.UID(5), changes[2].Actor)
}

// A change's time and actor are in the slot the feed counts.
func TestChangeCostCountsTheStamp(t *testing.T) {
	assert.GreaterOrEqual(t, changeOverhead, int64(unsafe.Sizeof(time.Time{})+unsafe.Sizeof(membership.UID(0))+unsafe.Sizeof(membership.Revision(0))))
	c := membership.Change{Op: membership.OpAdd, GroupID: "g"}
	stamped := c
	stamped.Time, stamped.Actor = time.Now().UTC(), 9
	assert.Equal(t, changeCost(c), changeCost(stamped), "they hold no memory besides")
}

// The feed reads the clock before it takes its lock, so a change may take
// the lock after one that read the clock later: it then takes that one's
// time, and times still follow revisions. A time a write gives is kept as
// it is.
func TestFeedTimesFollowRevisions(t *testing.T) {
	f := newFeed(10, DefaultChangesKeepBytes)
	ahead := timeOf(time.Now().Add(time.Hour))
	f.lastTime = ahead // as if a change that read the clock later came first
	rev := f.record(membership.Change{Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{1}}, stamp{now: true}, nil)
	given := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.record(membership.Change{Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{2}}, stamp{now: true, at: given}, nil)
	changes, _, err := f.changes(context.Background(), membership.ChangeOptions{})
	require.NoError(t, err)
	require.Len(t, changes, 2)
	assert.Equal(t, rev, changes[0].Revision)
	assert.Equal(t, ahead, changes[0].Time, "not before the change recorded before it")
	assert.Equal(t, given, changes[1].Time, "a given time is the change's")
}

// A reader's changes are copies: what it does with them changes no kept
// change.
func TestFeedChangesAreCopies(t *testing.T) {
	f := newFeed(10, DefaultChangesKeepBytes)
	f.record(membership.Change{Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{1}}, stamp{}, nil)
	changes, _, err := f.changes(context.Background(), membership.ChangeOptions{})
	require.NoError(t, err)
	changes[0].GroupID, changes[0].Revision = "other", 99
	again, _, err := f.changes(context.Background(), membership.ChangeOptions{})
	require.NoError(t, err)
	assert.Equal(t, "g", again[0].GroupID)
	assert.Equal(t, membership.Revision(1), again[0].Revision)
}
