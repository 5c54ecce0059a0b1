package feed

import (
	"context"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// A change's time and actor are in the slot the feed counts.
func TestChangeCostCountsTheStamp(t *testing.T) {
	assert.GreaterOrEqual(t, ChangeOverhead, int64(unsafe.Sizeof(time.Time{})+unsafe.Sizeof(membership.UID(0))+unsafe.Sizeof(membership.Revision(0))))
	c := membership.Change{Op: membership.OpAdd, GroupID: "g"}
	stamped := c
	stamped.Time, stamped.Actor = time.Now().UTC(), 9
	assert.Equal(t, ChangeCost(c), ChangeCost(stamped), "they hold no memory besides")
}

// The feed reads the clock before it takes its lock, so a change may take
// the lock after one that read the clock later: it then takes that one's
// time, and times still follow revisions. A time a write gives is kept as
// it is.
func TestFeedTimesFollowRevisions(t *testing.T) {
	f := New(10, DefaultKeepBytes)
	ahead := timeOf(time.Now().Add(time.Hour))
	f.lastTime = ahead // as if a change that read the clock later came first
	rev := f.Record(membership.Change{Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{1}}, Stamp{Now: true}, nil)
	given := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Record(membership.Change{Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{2}}, Stamp{Now: true, At: given}, nil)
	changes, _, err := f.Changes(context.Background(), membership.ChangeOptions{})
	require.NoError(t, err)
	require.Len(t, changes, 2)
	assert.Equal(t, rev, changes[0].Revision)
	assert.Equal(t, ahead, changes[0].Time, "not before the change recorded before it")
	assert.Equal(t, given, changes[1].Time, "a given time is the change's")
}

// A reader's changes are copies: what it does with them changes no kept
// change.
func TestFeedChangesAreCopies(t *testing.T) {
	f := New(10, DefaultKeepBytes)
	f.Record(membership.Change{Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{1}}, Stamp{}, nil)
	changes, _, err := f.Changes(context.Background(), membership.ChangeOptions{})
	require.NoError(t, err)
	changes[0].GroupID, changes[0].Revision = "other", 99
	again, _, err := f.Changes(context.Background(), membership.ChangeOptions{})
	require.NoError(t, err)
	assert.Equal(t, "g", again[0].GroupID)
	assert.Equal(t, membership.Revision(1), again[0].Revision)
}

// The feed's byte budget counts a batch's changes: a batch costs at least
// what its changes would cost alone.
func TestBatchChangeCostCountsItsChanges(t *testing.T) {
	subs := []membership.Change{
		{Op: membership.OpAdd, GroupID: "g", UIDs: make([]membership.UID, 1000), Nicknames: []membership.Member{{UID: 1, Nickname: "Ann"}}},
		{Op: membership.OpDeleteGroup, GroupID: "h"},
	}
	batch := ChangeCost(membership.Change{Op: membership.OpBatch, Changes: subs})
	assert.GreaterOrEqual(t, batch, ChangeCost(membership.Change{})+ChangeCost(subs[0])+ChangeCost(subs[1]))
}

// A snapshot's kept changes load within the bounds of the feed that loads
// them: a restart with a smaller -changes-keep-bytes keeps the newest.
func TestFeedLoadKeepsTheNewestThatFit(t *testing.T) {
	var kept []membership.Change
	for i := range 10 {
		kept = append(kept, membership.Change{Revision: membership.Revision(i + 1), Op: membership.OpAdd, GroupID: "g",
			UIDs: make([]membership.UID, 100)})
	}
	cost := ChangeCost(kept[0])
	for _, tt := range []struct {
		keep     int
		maxBytes int64
		want     int
	}{{100, 3 * cost, 3}, {2, 100 * cost, 2}, {100, 100 * cost, 10}, {100, 1, 1}} {
		t.Run(fmt.Sprint(tt.keep, " ", tt.maxBytes), func(t *testing.T) {
			f := New(tt.keep, tt.maxBytes)
			f.Load(10, append([]membership.Change(nil), kept...))
			_, got := f.Export()
			require.Len(t, got, tt.want)
			assert.Equal(t, membership.Revision(10-tt.want+1), got[0].Revision)
			assert.Equal(t, int64(tt.want)*cost, f.Stats().Bytes)
			f.Record(membership.Change{Op: membership.OpAdd, GroupID: "g", UIDs: make([]membership.UID, 100)}, Stamp{}, nil)
			_, got = f.Export()
			assert.Equal(t, membership.Revision(11), got[len(got)-1].Revision, "the feed goes on after a load")
			assert.LessOrEqual(t, len(got), tt.keep)
		})
	}
}
