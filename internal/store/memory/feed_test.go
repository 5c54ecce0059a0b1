package memory

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/internal/store/storetest/feedtest"
	"example.com/groupmembership/membership"
)

func TestMemoryRevisionsAndFeed(t *testing.T) {
	feedtest.Contract(t, func(_ *testing.T, keep int) membership.Store {
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
