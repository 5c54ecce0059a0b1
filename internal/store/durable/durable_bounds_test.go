package durable

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/internal/store/wal"
	"example.com/groupmembership/internal/store/wal/record"
	"example.com/groupmembership/membership"
)

// stuckLog is a wal.File whose Sync blocks, as on a frozen filesystem, until
// release is closed. syncing gets a value each time a Sync starts.
type stuckLog struct {
	wal.File
	syncing chan struct{}
	release chan struct{}
}

func (s *stuckLog) Sync() error {
	s.syncing <- struct{}{}
	<-s.release
	return s.File.Sync()
}

// openStuckDurable opens a store whose log syncs block until the returned
// release is called (once; the test's cleanup calls it too).
func openStuckDurable(t *testing.T, opts Options) (d *Store, syncing <-chan struct{}, release func()) {
	t.Helper()
	log := &stuckLog{syncing: make(chan struct{}, 100), release: make(chan struct{})}
	opts.openLog = func(path string) (wal.File, error) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		log.File = f
		return log, err
	}
	d = openTestDurable(t, t.TempDir(), opts)
	var once sync.Once
	release = func() { once.Do(func() { close(log.release) }) }
	t.Cleanup(func() {
		release()
		d.Close()
	})
	return d, log.syncing, release
}

// A change whose write is stuck on the disk is answered 503 at its deadline,
// and readiness says why once the write has waited past it; once the disk
// moves again, the change is applied and the store is writable.
func TestDurableCommitHasADeadline(t *testing.T) {
	ctx := context.Background()
	d, syncing, release := openStuckDurable(t, Options{ChangesKeep: keepAll, CommitTimeout: 20 * time.Millisecond})
	require.NoError(t, d.Writable())

	_, err := storetest.Add(ctx, d, "g", []membership.User{{UID: 1}})
	assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err))
	assert.Contains(t, err.Error(), "may still be applied")
	<-syncing
	assert.Eventually(t, func() bool { return d.Writable() != nil }, 10*time.Second, time.Millisecond)
	assert.Contains(t, d.Writable().Error(), "waited on the disk")
	assert.Equal(t, uint64(1), d.stats.commitTimeouts.Load())

	// Now a new change fails at once: queued, it would only wait out the
	// deadline behind the stuck write.
	_, err = storetest.Add(ctx, d, "g", []membership.User{{UID: 5}})
	assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err))
	assert.Contains(t, err.Error(), "nothing was changed")
	assert.Equal(t, uint64(1), d.stats.commitTimeouts.Load(), "it did not wait for the deadline")

	release()
	assert.Eventually(t, func() bool {
		_, ok, err := d.Member(ctx, "g", 1)
		return err == nil && ok
	}, 10*time.Second, time.Millisecond, "the change that timed out is applied once the disk takes it")
	assert.NoError(t, d.Writable())
	_, ok, err := d.Member(ctx, "g", 5)
	require.NoError(t, err)
	assert.False(t, ok, "the change refused at once was never queued")
}

// While the disk is stuck, changes queue up to the queue's bound; past it
// they are refused at once, changing nothing, and readiness says so.
func TestDurableQueueIsBounded(t *testing.T) {
	ctx := context.Background()
	one := (&record.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}}}).Cost()
	d, syncing, release := openStuckDurable(t, Options{ChangesKeep: keepAll, CommitTimeout: time.Hour, QueueBytes: 3 * one})

	type answer struct {
		res membership.Result
		err error
	}
	answers := make(chan answer, 3)
	for uid := range membership.UID(3) {
		go func() {
			res, err := storetest.Add(ctx, d, "g", []membership.User{{UID: uid + 1}})
			answers <- answer{res, err}
		}()
	}
	<-syncing // the first is being written; the others wait in the queue
	assert.Eventually(t, func() bool { return d.queue.Used() == 3*one }, 10*time.Second, time.Millisecond)

	start := time.Now()
	_, err := storetest.Add(ctx, d, "g", []membership.User{{UID: 4}})
	assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err))
	assert.Contains(t, err.Error(), "nothing was changed")
	assert.Less(t, time.Since(start), time.Hour, "refused without waiting for the commit")
	assert.Equal(t, uint64(1), d.stats.queueFull.Load())
	require.Error(t, d.Writable())
	assert.Contains(t, d.Writable().Error(), "queue")

	release()
	for range 3 {
		a := <-answers
		require.NoError(t, a.err)
		assert.Equal(t, 1, a.res.Count)
	}
	assert.Zero(t, d.queue.Used(), "every answered change leaves the queue")
	require.NoError(t, d.Writable())
	_, ok, err := d.Member(ctx, "g", 4)
	require.NoError(t, err)
	assert.False(t, ok, "the refused change changed nothing")
}

// A change larger than the whole queue is taken when nothing else waits, so
// that the bound never refuses every change of the largest size.
func TestDurableQueueTakesALargeChangeAlone(t *testing.T) {
	d := openTestDurable(t, t.TempDir(), Options{ChangesKeep: keepAll, QueueBytes: 1})
	defer d.Close()
	n, err := storetest.Count(storetest.Add(context.Background(), d, "g", storetest.UserRange(1, 100)))
	require.NoError(t, err)
	assert.Equal(t, 100, n)
}

// Close does not hang on a stuck disk: it gives up after the commit timeout.
func TestDurableCloseGivesUpOnAStuckDisk(t *testing.T) {
	d, syncing, _ := openStuckDurable(t, Options{ChangesKeep: keepAll, CommitTimeout: 20 * time.Millisecond})
	go func() { _, _ = storetest.Add(context.Background(), d, "g", []membership.User{{UID: 1}}) }()
	<-syncing
	err := d.Close()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not finish writing")
}

// Writable says why the store refuses changes: for good after a failed
// fsync; while writes fail on a full disk, until a write or a probe of the
// disk succeeds.
func TestDurableWritableSaysWhy(t *testing.T) {
	ctx := context.Background()
	t.Run("fsync fails", func(t *testing.T) {
		var fl *failingLog
		d := openTestDurable(t, t.TempDir(), failingLogs(&fl))
		defer d.Close()
		require.NoError(t, d.Writable())
		fl.set(false, true, false)
		_, err := storetest.Add(ctx, d, "g", []membership.User{{UID: 1}})
		require.Error(t, err)
		fl.set(false, false, false)
		err = d.Writable()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "until restarted: fsync failed")
	})
	// fullDisk returns a store whose last write failed for want of room,
	// and its log, which still fails writes.
	fullDisk := func(t *testing.T) (*Store, *failingLog) {
		var fl *failingLog
		d := openTestDurable(t, t.TempDir(), failingLogs(&fl))
		t.Cleanup(func() { d.Close() })
		fl.set(true, false, false)
		_, err := storetest.Add(ctx, d, "g", []membership.User{{UID: 1}})
		require.Error(t, err)
		return d, fl
	}
	t.Run("full disk, then room again", func(t *testing.T) {
		d, fl := fullDisk(t)
		err := d.Writable()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no space left on device")
		fl.set(false, false, false)
		// No change comes (readiness keeps them away): the store probes the
		// disk by itself.
		assert.Eventually(t, func() bool { return d.Writable() == nil }, 10*time.Second, 10*time.Millisecond)
	})
	t.Run("a write that succeeds clears it", func(t *testing.T) {
		d, fl := fullDisk(t)
		fl.set(false, false, false)
		_, err := storetest.Add(ctx, d, "g", []membership.User{{UID: 2}})
		require.NoError(t, err)
		assert.NoError(t, d.Writable())
	})
}

// Deleting LOCK must not let a second opener in: the directory itself is
// locked.
func TestDurableLockHoldsWhenLOCKIsDeleted(t *testing.T) {
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	require.NoError(t, os.Remove(filepath.Join(dir, "LOCK")))
	_, err := Open(dir, Options{ChangesKeep: keepAll})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "in use by another process")
}

// The data is the service's alone: the directory is 0700 (an existing one
// that others may read is tightened), every file 0600.
func TestDurableFilesArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.Mkdir(dir, 0o755))
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll, SnapshotBytes: 1})
	for uid := range membership.UID(3) {
		_, err := storetest.Add(context.Background(), d, "g", []membership.User{{UID: uid + 1}})
		require.NoError(t, err)
	}
	require.NoError(t, d.Close()) // waits for the snapshots
	info, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "the directory")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		info, err := e.Info()
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), e.Name())
		names = append(names, e.Name())
	}
	assert.Contains(t, names, "LOCK")
	assert.Contains(t, strings.Join(names, " "), ".snap", "a snapshot was checked too")
	assert.Contains(t, strings.Join(names, " "), ".wal", "and a log")
}

// A log removed or replaced under the running store is noticed before the
// next change is acknowledged: the change is refused, the store says why,
// and what was acknowledged before is still there after a restart.
func TestDurableNoticesItsLogRemovedOrReplaced(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		do   func(path string) error
	}{
		{"removed", os.Remove},
		{"replaced", func(path string) error {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			tmp := path + ".new"
			if err := os.WriteFile(tmp, data, 0o600); err != nil {
				return err
			}
			return os.Rename(tmp, path)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
			_, err := storetest.Add(ctx, d, "g", []membership.User{{UID: 1}})
			require.NoError(t, err)
			require.NoError(t, tt.do(newestLog(t, dir)))

			_, err = storetest.Add(ctx, d, "g", []membership.User{{UID: 2}})
			assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err))
			require.Error(t, d.Writable())
			assert.Contains(t, d.Writable().Error(), "until restarted")
			_, ok, err := d.Member(ctx, "g", 2)
			require.NoError(t, err)
			assert.False(t, ok, "the refused change is not applied")
			require.NoError(t, d.Close())
		})
	}
}

// A complete last record whose checksum fails is damage, not a torn write:
// cutting it would lose an acknowledged change.
func TestDurableRefusesADamagedLastRecord(t *testing.T) {
	dir, path, data := threeRecordLog(t)
	data[len(data)-1] ^= 0x01 // the last byte of the last record's payload
	require.NoError(t, os.WriteFile(path, data, 0o600))

	_, err := Open(dir, Options{ChangesKeep: keepAll})
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Base(path))
	assert.Contains(t, err.Error(), "-repair")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, data, after, "a refused start changes no file")

	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll, Repair: true})
	defer d.Close()
	got, _ := storetest.ListAll(t, d, "g")
	assert.Len(t, got, 2, "the repair keeps the two records before it")
	moved, err := filepath.Glob(filepath.Join(dir, "repair-*", "*"))
	require.NoError(t, err)
	assert.Len(t, moved, 1, "and the damaged one in the repair directory")
}

// A log of format version 1 is still read, and the records after it go into a
// new log of the current version.
func TestDurableReadsAVersion1Log(t *testing.T) {
	dir := t.TempDir()
	v1 := []byte(wal.Magic + "\x01\x00\x00\x00")
	for _, c := range []*record.Write{
		{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1, Nickname: "Ann", HasNickname: true}, {UID: 2}}},
		{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{2}},
	} {
		payload := c.Append(nil)
		h := make([]byte, 8)
		binary.LittleEndian.PutUint32(h, uint32(len(payload)))
		binary.LittleEndian.PutUint32(h[4:], crc32.Checksum(payload, crc32.MakeTable(crc32.Castagnoli)))
		v1 = append(append(v1, h...), payload...)
	}
	require.NoError(t, os.WriteFile(wal.Path(dir, 1), v1, 0o600))

	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	_, err := storetest.Add(context.Background(), d, "g", []membership.User{{UID: 3}})
	require.NoError(t, err)
	require.NoError(t, d.Close())
	old, err := os.ReadFile(wal.Path(dir, 1))
	require.NoError(t, err)
	assert.Equal(t, v1, old, "the old log is left as it was")

	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	got, _ := storetest.ListAll(t, d, "g")
	assert.Equal(t, []membership.Member{{UID: 1, Nickname: "Ann"}, {UID: 3}}, got)
}

// A log of format version 2, as the build before the whole-group ops wrote
// it, is still read, and the records after it, which may be of those ops,
// go into a new log of the current version: a build that reads version 2
// at most refuses that one by its version.
func TestDurableReadsAVersion2Log(t *testing.T) {
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	require.NoError(t, d.Close())
	// The newest log, empty, rewritten as version 2 wrote it: its header
	// says so, and its records of an add and a remove have no stamp.
	path := newestLog(t, dir)
	empty, err := os.ReadFile(path)
	require.NoError(t, err)
	v2 := append([]byte{}, empty[:wal.HeaderSize]...)
	v2[4] = 2
	for _, c := range []*record.Write{
		{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1, Nickname: "Ann", HasNickname: true}, {UID: 2}}},
		{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{2}},
	} {
		v2, err = wal.Append(v2, func(b []byte) []byte { return c.Append(b) })
		require.NoError(t, err)
	}
	require.NoError(t, os.WriteFile(path, v2, 0o600))
	df, ok, err := readDataFile(dir)
	require.NoError(t, err)
	require.True(t, ok)
	df.closedLog, df.closedSize = 0, 0 // its size is not the one the store left
	require.NoError(t, df.write(dir))

	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	since := time.Now()
	_, err = d.Write(context.Background(), membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{{UID: 1}, {UID: 3}}, Actor: 5})
	require.NoError(t, err)
	require.NoError(t, d.Close())
	old, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, v2, old, "the old log is left as it was")
	newest, err := os.ReadFile(newestLog(t, dir))
	require.NoError(t, err)
	h, err := wal.ReadHeader(newest)
	require.NoError(t, err)
	assert.Equal(t, wal.Version, h.Version)

	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	got, _ := storetest.ListAll(t, d, "g")
	assert.Equal(t, []membership.Member{{UID: 1, Nickname: "Ann"}, {UID: 3}}, got)
	changes := storetest.AllChanges(t, d, 0)
	require.Len(t, changes, 3)
	for _, c := range changes[:2] {
		assert.True(t, c.Time.IsZero(), "change %d, logged without a time, has none", c.Revision)
		assert.Zero(t, c.Actor, "change %d", c.Revision)
	}
	storetest.CheckTime(t, changes[2], since, time.Now())
	assert.Equal(t, membership.UID(5), changes[2].Actor)
}
