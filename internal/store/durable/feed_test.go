package durable

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/internal/store/storetest/feedtest"
	"example.com/groupmembership/internal/store/wal"
	"example.com/groupmembership/membership"
)

func TestDurableRevisionsAndFeed(t *testing.T) {
	feedtest.Contract(t, func(t *testing.T, keep int) membership.Store {
		d := openTestDurable(t, t.TempDir(), Options{ChangesKeep: keep})
		t.Cleanup(func() { d.Close() })
		return d
	})
}

func TestDurableFeedContinuesAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	for _, snapshotBytes := range []int64{0, 1} { // 0: the default, no snapshot; 1: a snapshot after every batch
		t.Run(fmt.Sprint("snapshot bytes ", snapshotBytes), func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{SnapshotBytes: snapshotBytes, ChangesKeep: 4}
			d := openTestDurable(t, dir, opts)
			for uid := range membership.UID(6) {
				_, err := storetest.Add(ctx, d, "g", []membership.User{{UID: uid + 1, Nickname: fmt.Sprint("n", uid), HasNickname: true}})
				require.NoError(t, err)
			}
			_, err := storetest.Remove(ctx, d, "g", []membership.UID{2})
			require.NoError(t, err)
			before := storetest.AllChanges(t, d, 3)
			revBefore, err := d.Revision(ctx, "g")
			require.NoError(t, err)
			require.NoError(t, d.Close())

			d = openTestDurable(t, dir, opts)
			defer d.Close()
			assert.Equal(t, before, storetest.AllChanges(t, d, 3), "the kept changes are back")
			rev, err := d.Revision(ctx, "g")
			require.NoError(t, err)
			assert.Equal(t, revBefore, rev, "the group's revision is back")
			_, _, err = d.Changes(ctx, membership.ChangeOptions{After: 2})
			assert.Equal(t, membership.CodeChangesGone, membership.ErrorCode(err), "and no more than were kept")
			res, err := storetest.Add(ctx, d, "g", []membership.User{{UID: 100}})
			require.NoError(t, err)
			assert.Equal(t, membership.Revision(8), res.Revision, "revisions continue")
		})
	}
}

func TestDurableStats(t *testing.T) {
	ctx := context.Background()
	d := openTestDurable(t, t.TempDir(), Options{ChangesKeep: keepAll, SnapshotBytes: 1})
	for uid := range membership.UID(3) {
		_, err := storetest.Add(ctx, d, "g", []membership.User{{UID: uid + 1}})
		require.NoError(t, err)
	}
	require.NoError(t, d.Close()) // waits for the snapshots
	s := d.Stats()
	assert.Equal(t, int64(3), s.Members)
	assert.Equal(t, int64(1), s.Groups)
	assert.Equal(t, membership.Revision(3), s.Revision)
	require.NotNil(t, s.Disk)
	assert.Equal(t, uint64(3), s.Disk.Fsyncs, "one change at a time: one fsync each")
	require.NotNil(t, s.Disk.FsyncDurations)
	var w metrics.Writer
	s.Disk.FsyncDurations.Write(&w, "f", nil)
	assert.Contains(t, string(w.Bytes()), "f_count 3\n")
	assert.GreaterOrEqual(t, s.Disk.LogBytes, int64(wal.HeaderSize), "the log being written, header included")
	assert.GreaterOrEqual(t, s.Disk.Snapshots, uint64(1))
	assert.Greater(t, s.Disk.LastSnapshot, time.Duration(0))
	assert.Nil(t, memory.New().Stats().Disk, "a store in memory has no disk")
}
