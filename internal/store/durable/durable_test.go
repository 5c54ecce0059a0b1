package durable

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/logtest"
	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/internal/store/storetest/directorytest"
	"example.com/groupmembership/internal/store/storetest/memberstest"
	"example.com/groupmembership/internal/store/storetest/nestingtest"
	"example.com/groupmembership/internal/store/wal"
	"example.com/groupmembership/membership"
)

// keepAll is the feed's default size, for tests that read the feed.
const keepAll = membership.DefaultChangesKeep

// testCommitTimeout is the commit timeout of a test's store that names
// none: a commit that waits longer than DefaultCommitTimeout on a machine
// busy with other work is slow, not stuck, and a test that is not about the
// timeout must not depend on the machine keeping within it. The tests of
// the timeout set their own.
const testCommitTimeout = 2 * time.Minute

func openTestDurable(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	if opts.CommitTimeout == 0 {
		opts.CommitTimeout = testCommitTimeout
	}
	d, err := Open(dir, opts)
	require.NoError(t, err)
	return d
}

func TestDurableContract(t *testing.T) {
	memberstest.Contract(t, func(t *testing.T) membership.Store {
		d := openTestDurable(t, t.TempDir(), Options{ChangesKeep: keepAll})
		t.Cleanup(func() { _ = d.Close() })
		return d
	})
}

func TestDurableNestingContract(t *testing.T) {
	nestingtest.Contract(t, func(t *testing.T) store.Expiring {
		d := openTestDurable(t, t.TempDir(), Options{ChangesKeep: keepAll})
		t.Cleanup(func() { _ = d.Close() })
		return d
	})
}

// The nesting contract holds while snapshots of the nestings are written
// beside the writes, every one of them whole, and each store, reopened
// from what it wrote, has every nesting it had.
func TestDurableNestingContractAcrossSnapshots(t *testing.T) {
	var snapshots atomic.Uint64
	t.Cleanup(func() { assert.NotZero(t, snapshots.Load(), "snapshots were written") })
	nestingtest.Contract(t, func(t *testing.T) store.Expiring {
		dir := t.TempDir()
		logs := &logtest.Buffer{}
		d := openTestDurable(t, dir, Options{ChangesKeep: keepAll, SnapshotBytes: 4096, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		t.Cleanup(func() {
			want := sortedExport(d)
			require.NoError(t, d.Close())
			snapshots.Add(d.stats.snapshots.Load()) // Close waited for the last
			assert.NotContains(t, logs.String(), "level=ERROR", "no snapshot failed")
			again := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
			defer again.Close()
			assert.Equal(t, want, sortedExport(again), "reopened")
		})
		return d
	})
}

// The directory contract holds on a data directory, while snapshots are
// written beside the writes, and each store, reopened from what it wrote,
// has every account and group attribute it had.
func TestDurableDirectoryContractAcrossSnapshots(t *testing.T) {
	var snapshots atomic.Uint64
	t.Cleanup(func() { assert.NotZero(t, snapshots.Load(), "snapshots were written") })
	directorytest.Contract(t, func(t *testing.T) directorytest.Store {
		dir := t.TempDir()
		d := openTestDurable(t, dir, Options{ChangesKeep: keepAll, SnapshotBytes: 1})
		t.Cleanup(func() {
			want := sortedExport(d)
			require.NoError(t, d.Close())
			snapshots.Add(d.stats.snapshots.Load())
			again := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
			defer again.Close()
			assert.Equal(t, want, sortedExport(again), "reopened")
		})
		return d
	})
}

// dump returns every group's members, for comparing whole states.
func dump(t *testing.T, s membership.Store, groups ...string) map[string][]membership.Member {
	t.Helper()
	out := map[string][]membership.Member{}
	for _, g := range groups {
		got, _ := storetest.ListAll(t, s, g)
		out[g] = got
	}
	return out
}

func TestDurableKeepsEverythingAcrossReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	_, err := storetest.Add(ctx, d, "a", []membership.User{{UID: 1, Nickname: "Ann", HasNickname: true}, {UID: 2}, {UID: 3}})
	require.NoError(t, err)
	_, err = storetest.Add(ctx, d, "team/b", []membership.User{{UID: 9223372036854775807}, {UID: 2, Nickname: "Bo", HasNickname: true}})
	require.NoError(t, err)
	n, err := storetest.Count(storetest.Remove(ctx, d, "a", []membership.UID{3, 4}))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	want := dump(t, d, "a", "team/b", "gone")
	require.NoError(t, d.Close())

	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	assert.Equal(t, want, dump(t, d, "a", "team/b", "gone"))
	assert.Equal(t, []membership.Member{{UID: 1, Nickname: "Ann"}, {UID: 2, Nickname: "Bo"}}, want["a"])
}

func TestDurableSnapshotsAndCompacts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	logs := &bytes.Buffer{}
	d := openTestDurable(t, dir, Options{SnapshotBytes: 4 << 10, ChangesKeep: 100, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	// Rewrite the same small state many times: the directory must stay
	// proportional to the state and the changes kept, not to the history.
	for i := range 3000 {
		uid := membership.UID(i%50 + 1)
		_, err := storetest.Add(ctx, d, "g", []membership.User{{UID: uid, Nickname: fmt.Sprint("n", i), HasNickname: true}})
		require.NoError(t, err)
		if i%2 == 1 {
			_, err = storetest.Remove(ctx, d, "g", []membership.UID{uid})
			require.NoError(t, err)
		}
	}
	want := dump(t, d, "g")
	require.NoError(t, d.Close())
	assert.Contains(t, logs.String(), "wrote a snapshot")

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var total int64
	var names []string
	for _, e := range entries {
		info, err := e.Info()
		require.NoError(t, err)
		total += info.Size()
		names = append(names, e.Name())
	}
	// The snapshot before the newest is kept with the logs after it, so
	// that a damaged newest snapshot can be recovered from.
	assert.LessOrEqual(t, len(entries), 7, "LOCK, DATA, two snapshots and at most three logs: %v", names)
	assert.Less(t, total, int64(32<<10), "the directory holds the state, not its history: %v", names)

	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	assert.Equal(t, want, dump(t, d, "g"))
}

// newestLog returns the path of the newest log in dir.
func newestLog(t *testing.T, dir string) string {
	logs, _, err := files(dir)
	require.NoError(t, err)
	require.NotEmpty(t, logs)
	return wal.Path(dir, logs[len(logs)-1])
}

// files returns the sequence numbers of the logs and snapshots in dir, in
// ascending order.
func files(dir string) (logs, snapshots []uint64, err error) {
	if logs, err = wal.List(dir); err != nil {
		return nil, nil, err
	}
	snapshots, err = snap.List(dir)
	return logs, snapshots, err
}

func fillThree(t *testing.T, dir string) map[string][]membership.Member {
	t.Helper()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	for i := 1; i <= 3; i++ {
		_, err := storetest.Add(context.Background(), d, "g", []membership.User{{UID: membership.UID(i)}})
		require.NoError(t, err)
	}
	want := dump(t, d, "g")
	require.NoError(t, d.Close())
	return want
}

func TestDurableTruncatesATornTail(t *testing.T) {
	dir := t.TempDir()
	want := fillThree(t, dir)
	path := newestLog(t, dir)
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	// A crash in the middle of a write: a frame header promising more than
	// follows, then garbage.
	require.NoError(t, os.WriteFile(path, append(bytes.Clone(before), 0x40, 0, 0, 0, 1, 2, 3, 4, 9, 9), 0o644))

	logs := &bytes.Buffer{}
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	assert.Equal(t, want, dump(t, d, "g"))
	assert.Contains(t, logs.String(), "truncating a torn write")
	assert.Contains(t, logs.String(), filepath.Base(path))
	assert.Contains(t, logs.String(), fmt.Sprintf("offset=%d", len(before)))
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after, "the torn bytes are cut away")

	_, err = storetest.Add(context.Background(), d, "g", []membership.User{{UID: 4}})
	require.NoError(t, err)
	require.NoError(t, d.Close())
	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	got, _ := storetest.ListAll(t, d, "g")
	assert.Len(t, got, 4, "writes after the truncation are kept")
}

// threeRecordLog returns a directory whose log holds three adds, the log's
// path and its bytes.
func threeRecordLog(t *testing.T) (dir, path string, data []byte) {
	t.Helper()
	dir = t.TempDir()
	fillThree(t, dir)
	path = newestLog(t, dir)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return dir, path, data
}

func TestDurableRefusesCorruptionInTheMiddle(t *testing.T) {
	dir, path, data := threeRecordLog(t)
	// Damage the first record's payload; two valid records follow it.
	data[wal.HeaderSize+12+1] ^= 0xff // 12: a record's frame header
	require.NoError(t, os.WriteFile(path, data, 0o644))

	_, err := Open(dir, Options{ChangesKeep: keepAll})
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Base(path))
	assert.Contains(t, err.Error(), fmt.Sprintf("offset %d", wal.HeaderSize))
	assert.Contains(t, err.Error(), "checksum does not match")
	assert.Contains(t, err.Error(), "-repair")

	logs := &bytes.Buffer{}
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll, Repair: true, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	defer d.Close()
	assert.Contains(t, logs.String(), "repair: cut the log")
	got, _ := storetest.ListAll(t, d, "g")
	assert.Empty(t, got, "repair keeps what comes before the corruption, which is nothing here")
	repaired, err := filepath.Glob(filepath.Join(dir, "repair-*", filepath.Base(path)+".from-*"))
	require.NoError(t, err)
	require.Len(t, repaired, 1, "what the repair cut is kept")
	kept, err := os.ReadFile(repaired[0])
	require.NoError(t, err)
	assert.Equal(t, data[wal.HeaderSize:], kept)
}

func TestDurableRefusesASecondOpener(t *testing.T) {
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	_, err := Open(dir, Options{ChangesKeep: keepAll})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "in use by another process")
	require.NoError(t, d.Close())
	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	assert.NoError(t, d.Close(), "the directory is free again after Close")
}

func TestDurableRefusesAnUnknownLogVersion(t *testing.T) {
	dir, path, data := threeRecordLog(t)
	data[4] = 99
	require.NoError(t, os.WriteFile(path, data, 0o644))
	_, err := Open(dir, Options{ChangesKeep: keepAll})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "log format version 99")
}

// failingLog is a wal.File whose writes or syncs fail while fail is set.
type failingLog struct {
	wal.File
	mu             sync.Mutex
	failWrite      bool
	failSync       bool
	failTruncate   bool
	partialWritten bool
}

func (f *failingLog) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failWrite {
		// A full disk: part of the batch lands, then the write fails.
		n, _ := f.File.Write(p[:len(p)/2])
		f.partialWritten = n > 0
		return n, errors.New("no space left on device")
	}
	return f.File.Write(p)
}

func (f *failingLog) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failSync {
		return errors.New("input/output error")
	}
	return f.File.Sync()
}

func (f *failingLog) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failTruncate {
		return errors.New("input/output error")
	}
	return f.File.Truncate(size)
}

// failingLogs returns options whose logs are failingLogs, the last one
// opened stored in *fl.
func failingLogs(fl **failingLog) Options {
	return Options{openLog: func(path string) (wal.File, error) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		*fl = &failingLog{File: f}
		return *fl, err
	}, probe: func(string) error {
		(*fl).mu.Lock()
		defer (*fl).mu.Unlock()
		if (*fl).failWrite {
			return errors.New("no space left on device")
		}
		return nil
	}}
}

func (f *failingLog) set(write, sync, truncate bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failWrite, f.failSync, f.failTruncate = write, sync, truncate
}

func TestDurableRefusesChangesItCannotWrite(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name        string
		write, sync bool
		// stays is whether the store keeps refusing changes after the disk
		// recovers: after a failed fsync it must, until restarted.
		stays bool
	}{{"full disk", true, false, false}, {"fsync fails", false, true, true}} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var fl *failingLog
			d := openTestDurable(t, dir, failingLogs(&fl))
			_, err := storetest.Add(ctx, d, "g", []membership.User{{UID: 1, Nickname: "Ann", HasNickname: true}})
			require.NoError(t, err)
			before := dump(t, d, "g")

			fl.set(tt.write, tt.sync, false)
			n, err := storetest.Count(storetest.Add(ctx, d, "g", []membership.User{{UID: 2}, {UID: 1, Nickname: "Evil", HasNickname: true}}))
			assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err))
			assert.Zero(t, n)
			_, err = storetest.Remove(ctx, d, "g", []membership.UID{1})
			assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err))
			assert.Equal(t, before, dump(t, d, "g"), "a change that failed to write changes nothing")

			fl.set(false, false, false) // the disk recovers
			_, err = storetest.Add(ctx, d, "g", []membership.User{{UID: 3}})
			if tt.stays {
				assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err))
				assert.Contains(t, err.Error(), "restart")
			} else {
				require.NoError(t, err)
			}
			want := dump(t, d, "g")
			require.NoError(t, d.Close())

			d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
			defer d.Close()
			assert.Equal(t, want, dump(t, d, "g"), "the refused changes are not replayed")
			if !tt.stays {
				assert.Equal(t, []membership.Member{{UID: 1, Nickname: "Ann"}, {UID: 3}}, want["g"])
			}
		})
	}
}

func TestDurableStopsWhenAFailedWriteCannotBeUndone(t *testing.T) {
	ctx := context.Background()
	var fl *failingLog
	d := openTestDurable(t, t.TempDir(), failingLogs(&fl))
	defer d.Close()
	fl.set(true, false, true)
	_, err := storetest.Add(ctx, d, "g", []membership.User{{UID: 1}})
	assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err))
	fl.set(false, false, false)
	_, err = storetest.Add(ctx, d, "g", []membership.User{{UID: 2}})
	assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err), "with torn bytes it could not cut, the log takes no more")
	got, _ := storetest.ListAll(t, d, "g")
	assert.Empty(t, got)
}

func TestDurableConcurrentWritersSurviveReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll, SnapshotBytes: 32 << 10})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				uid := membership.UID(w*1000 + i + 1)
				if _, err := storetest.Add(ctx, d, fmt.Sprint("g", i%5), []membership.User{{UID: uid}}); err != nil {
					t.Error(err)
					return
				}
				if i%4 == 0 {
					if _, err := storetest.Remove(ctx, d, fmt.Sprint("g", i%5), []membership.UID{uid}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	groups := []string{"g0", "g1", "g2", "g3", "g4"}
	want := dump(t, d, groups...)
	total := 0
	for _, g := range groups {
		total += len(want[g])
	}
	assert.Equal(t, 16*150, total)
	require.NoError(t, d.Close())
	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	assert.Equal(t, want, dump(t, d, groups...))
}

func TestDurableSkipsChangesThatChangeNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	_, err := storetest.Add(ctx, d, "g", []membership.User{{UID: 1, Nickname: "A", HasNickname: true}})
	require.NoError(t, err)
	info, err := os.Stat(newestLog(t, dir))
	require.NoError(t, err)
	n, err := storetest.Count(storetest.Add(ctx, d, "g", []membership.User{{UID: 1, Nickname: "A", HasNickname: true}, {UID: 1}}))
	require.NoError(t, err)
	assert.Zero(t, n)
	n, err = storetest.Count(storetest.Remove(ctx, d, "g", []membership.UID{7}))
	require.NoError(t, err)
	assert.Zero(t, n)
	after, err := os.Stat(newestLog(t, dir))
	require.NoError(t, err)
	assert.Equal(t, info.Size(), after.Size(), "nothing to log")
}

func TestDurableRefusesChangesAfterClose(t *testing.T) {
	d := openTestDurable(t, t.TempDir(), Options{ChangesKeep: keepAll})
	require.NoError(t, d.Close())
	require.NoError(t, d.Close(), "closing twice is harmless")
	_, err := storetest.Add(context.Background(), d, "g", []membership.User{{UID: 1}})
	assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err))
}

func TestDurableCloseWhileWriting(t *testing.T) {
	// Every change either lands or is refused; none is left waiting.
	d := openTestDurable(t, t.TempDir(), Options{ChangesKeep: keepAll})
	var wg sync.WaitGroup
	for w := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				_, err := storetest.Add(context.Background(), d, "g", []membership.User{{UID: membership.UID(w*100 + i + 1)}})
				if err != nil && membership.ErrorCode(err) != membership.CodeUnavailable {
					t.Error(err)
				}
			}
		}()
	}
	require.NoError(t, d.Close())
	wg.Wait()
}
