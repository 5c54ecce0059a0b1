package durable

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/internal/store/wal"
	"example.com/groupmembership/membership"
)

// sixtyWithSnapshots fills a directory with 60 members, one change at a time,
// with a snapshot every few changes, and returns it with its snapshots and
// logs and the group as listed. A snapshot in progress makes the next ones
// wait, so a busy machine writes fewer: then it goes on, one change and a
// close (which waits for the snapshot) at a time, until there are two.
func sixtyWithSnapshots(t *testing.T) (dir string, snapshots, logs []uint64, want []membership.Member) {
	t.Helper()
	dir = t.TempDir()
	opts := Options{ChangesKeep: keepAll, SnapshotBytes: 200}
	d := openTestDurable(t, dir, opts)
	uid := membership.UID(0)
	add := func() {
		uid++
		_, err := storetest.Add(context.Background(), d, "g", []membership.User{{UID: uid}})
		require.NoError(t, err)
	}
	for range 60 {
		add()
	}
	for range 20 {
		want, _ = storetest.ListAll(t, d, "g")
		require.NoError(t, d.Close())
		var err error
		logs, snapshots, err = files(dir)
		require.NoError(t, err)
		if len(snapshots) >= 2 {
			return dir, snapshots, logs, want
		}
		d = openTestDurable(t, dir, opts)
		add()
	}
	t.Fatalf("no two snapshots after %d changes", uid)
	return
}

func revisionOf(t *testing.T, d *Store) membership.Revision {
	rev, err := d.Revision(context.Background(), "g")
	require.NoError(t, err)
	return rev
}

// A damaged newest snapshot is refused with a way forward, and -repair
// recovers every change from the snapshot before it and the logs after it,
// keeping the damaged one aside.
func TestDurableDamagedSnapshotHasAWayForward(t *testing.T) {
	dir, snapshots, _, want := sixtyWithSnapshots(t)
	newest := snap.Path(dir, snapshots[len(snapshots)-1])
	data, err := os.ReadFile(newest)
	require.NoError(t, err)
	data[len(data)/2] ^= 0x01
	require.NoError(t, os.WriteFile(newest, data, 0o600))

	_, err = Open(dir, Options{ChangesKeep: keepAll})
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Base(newest))
	assert.Contains(t, err.Error(), "-repair")
	assert.Contains(t, err.Error(), filepath.Base(snap.Path(dir, snapshots[len(snapshots)-2])))

	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll, Repair: true})
	got, _ := storetest.ListAll(t, d, "g")
	assert.Equal(t, want, got, "every change is back")
	assert.Equal(t, membership.Revision(len(want)), revisionOf(t, d), "and the revisions with them")
	require.NoError(t, d.Close())
	moved, err := filepath.Glob(filepath.Join(dir, "repair-*", filepath.Base(newest)))
	require.NoError(t, err)
	assert.Len(t, moved, 1, "the damaged snapshot is kept aside, not deleted")
}

// Files missing from the chain are refused, naming what is missing, rather
// than started with part of the data; the newest snapshot moved aside costs
// nothing, for the one before and its logs are kept.
func TestDurableRefusesMissingFiles(t *testing.T) {
	t.Run("the newest snapshot moved aside", func(t *testing.T) {
		dir, snapshots, _, want := sixtyWithSnapshots(t)
		require.NoError(t, os.Rename(snap.Path(dir, snapshots[len(snapshots)-1]), filepath.Join(t.TempDir(), "aside")))
		d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
		defer d.Close()
		got, _ := storetest.ListAll(t, d, "g")
		assert.Equal(t, want, got)
		assert.Equal(t, membership.Revision(len(want)), revisionOf(t, d))
	})
	t.Run("every snapshot moved aside", func(t *testing.T) {
		dir, snapshots, logs, _ := sixtyWithSnapshots(t)
		for _, s := range snapshots {
			require.NoError(t, os.Rename(snap.Path(dir, s), filepath.Join(t.TempDir(), "aside")))
		}
		_, err := Open(dir, Options{ChangesKeep: keepAll})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no snapshot is here")
		assert.Contains(t, err.Error(), filepath.Base(wal.Path(dir, logs[0])))
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
			df, _, err := readDataFile(dir)
			require.NoError(t, err)
			require.NoError(t, wal.Create(dir, base+1, 60, df.id))
			after = append(after, base+1)
			require.NoError(t, wal.Create(dir, base+2, 60, df.id))
		}
		require.NoError(t, os.Remove(wal.Path(dir, base)))
		_, err := Open(dir, Options{ChangesKeep: keepAll})
		require.Error(t, err)
		assert.Contains(t, err.Error(), filepath.Base(wal.Path(dir, base))+" is missing")
	})
	t.Run("a log of another history", func(t *testing.T) {
		dir, _, logs, _ := sixtyWithSnapshots(t)
		path := wal.Path(dir, logs[len(logs)-1])
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		binary.LittleEndian.PutUint64(data[8:], 12345)
		require.NoError(t, os.WriteFile(path, data, 0o600))
		_, err = Open(dir, Options{ChangesKeep: keepAll})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "different histories")
		assert.Contains(t, err.Error(), filepath.Base(path))
	})
}

// The header of a new log says where it starts.
func TestDurableLogsSayTheRevisionTheyStartAt(t *testing.T) {
	dir, snapshots, _, _ := sixtyWithSnapshots(t)
	newest := snapshots[len(snapshots)-1]
	st, err := snap.ReadFile(snap.Path(dir, newest), nil)
	require.NoError(t, err)
	data, err := os.ReadFile(wal.Path(dir, newest))
	require.NoError(t, err)
	h, err := wal.ReadHeader(data)
	require.NoError(t, err)
	assert.Equal(t, uint64(st.LastRevision), h.StartRevision)
}

// A directory that has held data and lost all its logs and snapshots is
// refused, not taken for a new one.
func TestDurableRefusesADirectoryThatLostItsFiles(t *testing.T) {
	dir, snapshots, logs, _ := sixtyWithSnapshots(t)
	for _, s := range snapshots {
		require.NoError(t, os.Remove(snap.Path(dir, s)))
	}
	for _, l := range logs {
		require.NoError(t, os.Remove(wal.Path(dir, l)))
	}
	_, err := Open(dir, Options{ChangesKeep: keepAll})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has held data")
	assert.Contains(t, err.Error(), "Restore them from a backup")

	require.NoError(t, os.Remove(filepath.Join(dir, dataFileName)))
	_, err = Open(dir, Options{ChangesKeep: keepAll})
	require.Error(t, err, "LOCK still says the directory was used")
	assert.Contains(t, err.Error(), "has a LOCK but no DATA")
	require.NoError(t, os.Remove(filepath.Join(dir, "LOCK")))
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	got, _ := storetest.ListAll(t, d, "g")
	assert.Empty(t, got, "without them, the operator chose to start empty")
}

// What a careless operator may do to the data directory, each refused with
// the way forward, or noticed before anything more is acknowledged.
func TestDurableRefusesWhatACarelessOperatorDid(t *testing.T) {
	ctx := context.Background()
	t.Run("the live log overwritten or cut in place", func(t *testing.T) {
		for name, damage := range map[string]func(path string) error{
			"cut":         func(path string) error { return os.Truncate(path, wal.HeaderSize) },
			"overwritten": func(path string) error { return os.WriteFile(path, wal.Header(0, 1), 0o600) },
		} {
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
				defer d.Close()
				_, err := storetest.Add(ctx, d, "g", []membership.User{{UID: 1}})
				require.NoError(t, err)
				require.NoError(t, damage(newestLog(t, dir)))
				_, err = storetest.Add(ctx, d, "g", []membership.User{{UID: 2}})
				assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err), "not acknowledged")
				require.Error(t, d.Writable())
				assert.Contains(t, d.Writable().Error(), "something else wrote to it or cut it")
			})
		}
	})
	t.Run("a log of another directory", func(t *testing.T) {
		a, b := t.TempDir(), t.TempDir()
		for _, dir := range []string{a, b} {
			d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
			_, err := storetest.Add(ctx, d, "g", []membership.User{{UID: 1}})
			require.NoError(t, err)
			require.NoError(t, d.Close())
		}
		data, err := os.ReadFile(wal.Path(b, 1))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(wal.Path(a, 1), data, 0o600))
		_, err = Open(a, Options{ChangesKeep: keepAll})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "belongs to another data directory")
	})
	t.Run("the newest snapshot and log deleted together", func(t *testing.T) {
		dir, snapshots, logs, _ := sixtyWithSnapshots(t)
		require.NoError(t, os.Remove(snap.Path(dir, snapshots[len(snapshots)-1])))
		require.NoError(t, os.Remove(wal.Path(dir, logs[len(logs)-1])))
		_, err := Open(dir, Options{ChangesKeep: keepAll})
		require.Error(t, err)
		assert.Contains(t, err.Error(), filepath.Base(wal.Path(dir, logs[len(logs)-1]))+" is missing")
		assert.Contains(t, err.Error(), "-repair")

		d := openTestDurable(t, dir, Options{ChangesKeep: keepAll, Repair: true})
		defer d.Close()
		got, _ := storetest.ListAll(t, d, "g")
		assert.NotEmpty(t, got, "-repair goes on with what is left")
	})
	t.Run("the newest log cut on a record boundary while stopped", func(t *testing.T) {
		dir := t.TempDir()
		d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
		for uid := range membership.UID(3) {
			_, err := storetest.Add(ctx, d, "g", []membership.User{{UID: uid + 1}})
			require.NoError(t, err)
		}
		require.NoError(t, d.Close())
		require.Equal(t, 2, cutNewestLogAtARecord(t, dir))
		_, err := Open(dir, Options{ChangesKeep: keepAll})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "shorter than the")
		assert.Contains(t, err.Error(), "-repair")
	})
	t.Run("a directory left with its LOCK only", func(t *testing.T) {
		dir, snapshots, logs, _ := sixtyWithSnapshots(t)
		for _, s := range snapshots {
			require.NoError(t, os.Remove(snap.Path(dir, s)))
		}
		for _, l := range logs {
			require.NoError(t, os.Remove(wal.Path(dir, l)))
		}
		require.NoError(t, os.Remove(filepath.Join(dir, dataFileName)))
		_, err := Open(dir, Options{ChangesKeep: keepAll})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "has a LOCK but no DATA")
	})
	t.Run("the log after the newest snapshot deleted", func(t *testing.T) {
		dir, snapshots, _, want := sixtyWithSnapshots(t)
		newest := snapshots[len(snapshots)-1]
		// Make the snapshot's own log the newest, then lose it.
		require.NoError(t, os.Remove(wal.Path(dir, newest)))
		for l := newest + 1; ; l++ {
			if err := os.Remove(wal.Path(dir, l)); err != nil {
				break
			}
		}
		_, err := Open(dir, Options{ChangesKeep: keepAll})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "-repair")
		d := openTestDurable(t, dir, Options{ChangesKeep: keepAll, Repair: true})
		defer d.Close()
		got, _ := storetest.ListAll(t, d, "g")
		assert.LessOrEqual(t, len(got), len(want))
		assert.NotEmpty(t, got, "what the snapshot holds is back; the deleted log's changes are lost, as the warning says")
		_, err = storetest.Add(ctx, d, "g", []membership.User{{UID: 1000}})
		require.NoError(t, err, "and the store takes changes again")
	})
}

// A data directory keeps its epoch across restarts, and a repair, which may
// take the state back and give its revisions out again, draws a new one
// before it moves anything: ETags carry it.
func TestDurableEpochIsKeptAndRenewedByARepair(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	first := d.Epoch()
	assert.NotZero(t, first)
	for uid := range membership.UID(3) {
		_, err := storetest.Add(ctx, d, "g", []membership.User{{UID: uid + 1}})
		require.NoError(t, err)
	}
	require.NoError(t, d.Close())
	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	assert.Equal(t, first, d.Epoch(), "kept across a clean restart")
	require.NoError(t, d.Close())

	// An unclean stop (DATA as it is while the service runs) renews it:
	// what the log lost at its end cannot always be told from a crash.
	df, ok, err := readDataFile(dir)
	require.NoError(t, err)
	require.True(t, ok)
	df.closedLog, df.closedSize = 0, 0
	require.NoError(t, df.write(dir))
	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	assert.NotEqual(t, first, d.Epoch(), "renewed after an unclean stop")
	first = d.Epoch()
	require.NoError(t, d.Close())

	// Cut the newest log on a record boundary: refused, then repaired.
	cutNewestLogAtARecord(t, dir)
	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll, Repair: true})
	repaired := d.Epoch()
	assert.NotEqual(t, first, repaired, "a repair draws a new epoch")
	assert.NotZero(t, repaired)
	require.NoError(t, d.Close())
	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	assert.Equal(t, repaired, d.Epoch(), "and keeps it")
	require.NoError(t, d.Close())

	// A DATA written before epochs gets one, kept from then on.
	dataPath := filepath.Join(dir, dataFileName)
	df, ok, err = readDataFile(dir)
	require.NoError(t, err)
	require.True(t, ok)
	df.epoch = 0
	require.NoError(t, df.write(dir))
	b, err := os.ReadFile(dataPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dataPath, []byte(strings.ReplaceAll(string(b), "epoch 0000000000000000\n", "")), 0o600))
	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	drawn := d.Epoch()
	assert.NotZero(t, drawn)
	require.NoError(t, d.Close())
	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	assert.Equal(t, drawn, d.Epoch())
	require.NoError(t, d.Close())
}

// Logs without their DATA (lost, or not copied with them) are refused with
// a message that says so, not that they were copied in from elsewhere.
func TestDurableLogsWithoutTheirDATA(t *testing.T) {
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	_, err := storetest.Add(context.Background(), d, "g", []membership.User{{UID: 1}})
	require.NoError(t, err)
	require.NoError(t, d.Close())
	require.NoError(t, os.Remove(filepath.Join(dir, dataFileName)))
	require.NoError(t, os.Remove(filepath.Join(dir, "LOCK")))
	_, err = Open(dir, Options{ChangesKeep: keepAll})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "this directory has no DATA (it was lost, or not copied with the logs)")
	assert.Contains(t, err.Error(), "-restore")
}

// cutNewestLogAtARecord cuts the newest log of dir before its last record,
// where no torn write shows, and returns how many records are left. Read
// without its last byte, the log ends whole after the record before.
func cutNewestLogAtARecord(t *testing.T, dir string) int {
	t.Helper()
	path := newestLog(t, dir)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	res, err := wal.Read(data[:len(data)-1], func([]byte) error { return nil })
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, res.End))
	return res.Records
}

// A deleted newest snapshot costs nothing: the snapshot before it and the
// logs after that one are kept until a newer one is written and read back,
// and a crash while a snapshot is written leaves the same files. Only when
// the logs no longer reach back to a snapshot (or to log 1) is the start
// refused.
func TestDurableStartsWithoutItsNewestSnapshot(t *testing.T) {
	dir, snapshots, logs, want := sixtyWithSnapshots(t)
	newest, older := snapshots[len(snapshots)-1], snapshots[len(snapshots)-2]
	require.Equal(t, older, logs[0], "the logs reach back to the snapshot before the newest")
	require.NoError(t, os.Remove(snap.Path(dir, newest)))
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	got, _ := storetest.ListAll(t, d, "g")
	assert.Equal(t, want, got, "every change, from the older snapshot and its logs")
	require.NoError(t, d.Close())

	require.NoError(t, os.Remove(snap.Path(dir, older)))
	_, err := Open(dir, Options{ChangesKeep: keepAll})
	require.Error(t, err, "the logs reach back to no snapshot now")
	assert.Contains(t, err.Error(), "no snapshot is here")
}

// Damage to a log's header after its magic word and version (offset 8, the
// revision it follows; offset 16, its directory's id) cannot be told from a
// log of another history or directory: refused, naming -repair, which moves
// the log aside and goes on from the state before it.
func TestDurableDamagedLogHeaderNamesRepair(t *testing.T) {
	for _, tt := range []struct {
		name   string
		offset int
		want   string
	}{
		{"the revision it follows", 8, "different histories"},
		{"its directory id", 16, "belongs to another data directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir, snapshots, logs, _ := sixtyWithSnapshots(t)
			newest := logs[len(logs)-1]
			require.Equal(t, snapshots[len(snapshots)-1], newest, "the newest log follows the newest snapshot")
			st, err := snap.ReadFile(snap.Path(dir, newest), nil)
			require.NoError(t, err)
			path := wal.Path(dir, newest)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			data[tt.offset] ^= 0x01
			require.NoError(t, os.WriteFile(path, data, 0o600))

			_, err = Open(dir, Options{ChangesKeep: keepAll})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), filepath.Base(path))
			assert.Contains(t, err.Error(), "-repair")

			d := openTestDurable(t, dir, Options{ChangesKeep: keepAll, Repair: true})
			assert.Equal(t, st.LastRevision, d.Stats().Revision, "the state before the log")
			_, err = storetest.Add(context.Background(), d, "g", []membership.User{{UID: 1000}})
			require.NoError(t, err)
			require.NoError(t, d.Close())
			moved, err := filepath.Glob(filepath.Join(dir, "repair-*", filepath.Base(path)))
			require.NoError(t, err)
			require.Len(t, moved, 1, "the log is kept aside")
			kept, err := os.ReadFile(moved[0])
			require.NoError(t, err)
			assert.Equal(t, data, kept)
			d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
			defer d.Close()
			assert.Equal(t, st.LastRevision+1, d.Stats().Revision)
		})
	}
}

// A newest snapshot whose checksum matches but whose groups break a rule
// part of the way through is refused as a damaged one is, and -repair
// recovers from the one before into a store that holds nothing of the
// groups read before the fault: the groups are loaded as they are read.
func TestDurableSnapshotBrokenPartWayIsDroppedWhole(t *testing.T) {
	dir, snapshots, _, want := sixtyWithSnapshots(t)
	newest := snap.Path(dir, snapshots[len(snapshots)-1])
	st, err := snap.ReadFile(newest, nil)
	require.NoError(t, err)
	// Groups read before the fault, one of them the real group with a
	// member it never had; then a group whose uids are not ascending.
	st.Groups = append([]snap.Group{{ID: "early", Revision: 1, UIDs: []membership.UID{7007, 7008}}, {ID: "g", Revision: 1, UIDs: []membership.UID{1000}}}, st.Groups...)
	st.Groups = append(st.Groups, snap.Group{ID: "late", Revision: 1, UIDs: []membership.UID{5, 5}})
	require.NoError(t, snap.WriteFile(newest, st))

	_, err = Open(dir, Options{ChangesKeep: keepAll})
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Base(newest))
	assert.Contains(t, err.Error(), "not in ascending order")
	assert.Contains(t, err.Error(), "-repair")

	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll, Repair: true})
	got, _ := storetest.ListAll(t, d, "g")
	assert.Equal(t, want, got, "every change is back, and no member of the dropped snapshot")
	early, _ := storetest.ListAll(t, d, "early")
	assert.Empty(t, early, "a group read before the fault is not kept")
	groups, _ := storetest.UserGroups(t, d, 7007, membership.GroupListOptions{})
	assert.Empty(t, groups, "nor its reverse pairs")
	stats := d.Stats()
	assert.Equal(t, int64(1), stats.Groups, "the counts are the recovered store's")
	assert.Equal(t, int64(len(want)), stats.Members)
	assert.Equal(t, int64(len(want)), stats.Users)
	require.NoError(t, d.Close())
}
