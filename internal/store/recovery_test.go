package store

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/wal"
	"example.com/groupmembership/membership"
)

// sixtyWithSnapshots fills a directory with 60 members, one change at a time,
// with a snapshot every few changes, and returns it with its snapshots and
// logs and the group as listed.
func sixtyWithSnapshots(t *testing.T) (dir string, snapshots, logs []uint64, want []membership.Member) {
	t.Helper()
	dir = t.TempDir()
	d := openTestDurable(t, dir, DurableOptions{SnapshotBytes: 200})
	for uid := range membership.UID(60) {
		_, err := d.AddMembers(context.Background(), "g", []membership.User{{UID: uid + 1}})
		require.NoError(t, err)
	}
	want, _ = listAll(t, d, "g")
	require.NoError(t, d.Close())
	logs, snapshots, err := files(dir)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(snapshots), 2, "a snapshot and the one before it are kept")
	return dir, snapshots, logs, want
}

func revisionOf(t *testing.T, d *Durable) membership.Revision {
	rev, err := d.Revision(context.Background(), "g")
	require.NoError(t, err)
	return rev
}

// A damaged newest snapshot is refused with a way forward, and -repair
// recovers every change from the snapshot before it and the logs after it,
// keeping the damaged one aside (issue 11, item 3).
func TestDurableDamagedSnapshotHasAWayForward(t *testing.T) {
	dir, snapshots, _, want := sixtyWithSnapshots(t)
	newest := snapshotPath(dir, snapshots[len(snapshots)-1])
	data, err := os.ReadFile(newest)
	require.NoError(t, err)
	data[len(data)/2] ^= 0x01
	require.NoError(t, os.WriteFile(newest, data, 0o600))

	_, err = OpenDurable(dir, DurableOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Base(newest))
	assert.Contains(t, err.Error(), "-repair")
	assert.Contains(t, err.Error(), filepath.Base(snapshotPath(dir, snapshots[len(snapshots)-2])))

	d := openTestDurable(t, dir, DurableOptions{Repair: true})
	got, _ := listAll(t, d, "g")
	assert.Equal(t, want, got, "every change is back")
	assert.Equal(t, membership.Revision(60), revisionOf(t, d), "and the revisions with them")
	require.NoError(t, d.Close())
	moved, err := filepath.Glob(filepath.Join(dir, "repair-*", filepath.Base(newest)))
	require.NoError(t, err)
	assert.Len(t, moved, 1, "the damaged snapshot is kept aside, not deleted")
}

// Files missing from the chain are refused, naming what is missing, rather
// than started with part of the data; the newest snapshot moved aside costs
// nothing, for the one before and its logs are kept (issue 11, item 4).
func TestDurableRefusesMissingFiles(t *testing.T) {
	t.Run("the newest snapshot moved aside", func(t *testing.T) {
		dir, snapshots, _, want := sixtyWithSnapshots(t)
		require.NoError(t, os.Rename(snapshotPath(dir, snapshots[len(snapshots)-1]), filepath.Join(t.TempDir(), "aside")))
		d := openTestDurable(t, dir, DurableOptions{})
		defer d.Close()
		got, _ := listAll(t, d, "g")
		assert.Equal(t, want, got)
		assert.Equal(t, membership.Revision(60), revisionOf(t, d))
	})
	t.Run("every snapshot moved aside", func(t *testing.T) {
		dir, snapshots, logs, _ := sixtyWithSnapshots(t)
		for _, s := range snapshots {
			require.NoError(t, os.Rename(snapshotPath(dir, s), filepath.Join(t.TempDir(), "aside")))
		}
		_, err := OpenDurable(dir, DurableOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no snapshot is here")
		assert.Contains(t, err.Error(), filepath.Base(logPath(dir, logs[0])))
	})
	t.Run("a log missing between two", func(t *testing.T) {
		dir, snapshots, logs, _ := sixtyWithSnapshots(t)
		base := snapshots[len(snapshots)-1]
		var after []uint64
		for _, l := range logs {
			if l >= base {
				after = append(after, l)
			}
		}
		if len(after) < 2 {
			// Make a second log after the snapshot, so that one can go
			// missing between.
			d := openTestDurable(t, dir, DurableOptions{})
			require.NoError(t, d.Close())
			require.NoError(t, createLog(dir, base+1, 60))
			after = append(after, base+1)
			require.NoError(t, createLog(dir, base+2, 60))
		}
		require.NoError(t, os.Remove(logPath(dir, base)))
		_, err := OpenDurable(dir, DurableOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), filepath.Base(logPath(dir, base))+" is missing")
	})
	t.Run("a log of another history", func(t *testing.T) {
		dir, _, logs, _ := sixtyWithSnapshots(t)
		path := logPath(dir, logs[len(logs)-1])
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		binary.LittleEndian.PutUint64(data[8:], 12345)
		require.NoError(t, os.WriteFile(path, data, 0o600))
		_, err = OpenDurable(dir, DurableOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "different histories")
		assert.Contains(t, err.Error(), filepath.Base(path))
	})
}

// The header of a new log says where it starts.
func TestDurableLogsSayTheRevisionTheyStartAt(t *testing.T) {
	dir, snapshots, _, _ := sixtyWithSnapshots(t)
	newest := snapshots[len(snapshots)-1]
	st, err := readSnapshot(snapshotPath(dir, newest))
	require.NoError(t, err)
	data, err := os.ReadFile(logPath(dir, newest))
	require.NoError(t, err)
	h, err := wal.ReadHeader(data)
	require.NoError(t, err)
	assert.Equal(t, uint64(st.lastRevision), h.StartRevision)
}

// A directory that has held data and lost all its logs and snapshots is
// refused, not taken for a new one (issue 11, items 4 and 5).
func TestDurableRefusesADirectoryThatLostItsFiles(t *testing.T) {
	dir, snapshots, logs, _ := sixtyWithSnapshots(t)
	for _, s := range snapshots {
		require.NoError(t, os.Remove(snapshotPath(dir, s)))
	}
	for _, l := range logs {
		require.NoError(t, os.Remove(logPath(dir, l)))
	}
	_, err := OpenDurable(dir, DurableOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has held data")
	assert.Contains(t, err.Error(), "Restore them from a backup")

	require.NoError(t, os.Remove(filepath.Join(dir, markerName)))
	d := openTestDurable(t, dir, DurableOptions{})
	defer d.Close()
	got, _ := listAll(t, d, "g")
	assert.Empty(t, got, "without the marker, the operator chose to start empty")
}
