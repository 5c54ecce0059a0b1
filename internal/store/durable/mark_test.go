package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/logtest"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/internal/store/wal"
	"example.com/groupmembership/membership"
)

// markedOpts are the options of the tests of the mark: its timer never
// fires, the test writes the mark itself (the log's Mark).
func markedOpts() Options {
	return Options{ChangesKeep: keepAll, markEvery: time.Hour}
}

// crash stops d as a kill -9 leaves its directory once every write has
// landed: the files as they are, and DATA without a clean stop (a store
// whose log cannot be trusted records none).
func crash(t *testing.T, d *Store) {
	t.Helper()
	d.closeMu.Lock()
	d.closed = true
	d.closeMu.Unlock()
	close(d.stop)
	<-d.stopped
	<-d.markStopped
	d.snapshotWG.Wait()
	killed := "killed"
	d.health.broken.Store(&killed)
	require.NoError(t, errors.Join(d.log.Close(), d.lock.Release()))
}

// addUsers adds users from, from+1, … to group g, one change each.
func addUsers(t *testing.T, d *Store, from membership.UID, n int) {
	t.Helper()
	for i := range n {
		_, err := storetest.Add(context.Background(), d, "g", []membership.User{{UID: from + membership.UID(i)}})
		require.NoError(t, err)
	}
}

// markedDir returns a directory that took n changes, marked them, and
// crashed.
func markedDir(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	d := openTestDurable(t, dir, markedOpts())
	addUsers(t, d, 1, n)
	d.log.Mark()
	crash(t, d)
	return dir
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	return info.Size()
}

// A log cut after a crash, below where the mark says it was complete, is
// refused, naming the file, both offsets and the ways forward, and changes
// nothing; -repair goes on with what the log holds, keeps an incomplete
// last record in a repair directory, and resets the mark.
func TestDurableRefusesALogCutAfterACrash(t *testing.T) {
	for _, tt := range []struct {
		name string
		cut  func(data []byte) int64 // the size to cut the log to
	}{
		{"in half", func(data []byte) int64 { return int64(len(data) / 2) }},
		{"at a record", func(data []byte) int64 {
			res, _ := wal.Read(data[:len(data)/2], func([]byte) error { return nil })
			return res.End
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := markedDir(t, 200)
			path := newestLog(t, dir)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			cut := tt.cut(data)
			require.NoError(t, os.Truncate(path, cut))

			_, err = Open(dir, markedOpts())
			require.Error(t, err)
			for _, want := range []string{filepath.Base(path), fmt.Sprintf("offset %d", cut),
				fmt.Sprintf("offset %d", len(data)), "revision 200", "-repair", "backup"} {
				assert.Contains(t, err.Error(), want)
			}
			assert.Equal(t, cut, fileSize(t, path), "a refused start changes no file")
			checkRepairOfACutLog(t, dir, data[:cut])
		})
	}
}

// checkRepairOfACutLog checks that -repair goes on with what the newest
// log of dir, cut to data, holds, keeps an incomplete record at its end
// aside, and resets the mark, so that later starts go on.
func checkRepairOfACutLog(t *testing.T, dir string, data []byte) {
	t.Helper()
	path := newestLog(t, dir)
	whole, err := wal.Read(data, func([]byte) error { return nil })
	require.NoError(t, err)
	logs := &logtest.Buffer{}
	opts := markedOpts()
	opts.Repair, opts.Logger = true, slog.New(slog.NewTextHandler(logs, nil))
	d := openTestDurable(t, dir, opts)
	got, _ := storetest.ListAll(t, d, "g")
	assert.Len(t, got, whole.Records, "-repair goes on with the records the log holds")
	assert.Contains(t, logs.String(), "repair:")
	require.NoError(t, d.Close())
	kept, err := filepath.Glob(filepath.Join(dir, "repair-*", filepath.Base(path)+".from-*"))
	require.NoError(t, err)
	if whole.Torn > 0 {
		require.Len(t, kept, 1, "the incomplete record is kept aside")
		tail, err := os.ReadFile(kept[0])
		require.NoError(t, err)
		assert.Equal(t, data[whole.End:], tail)
	} else {
		assert.Empty(t, kept, "nothing to keep: the log was cut at a record")
	}

	d = openTestDurable(t, dir, markedOpts())
	addUsers(t, d, 1000, 1)
	crash(t, d)
	d = openTestDurable(t, dir, markedOpts())
	defer d.Close()
	got, _ = storetest.ListAll(t, d, "g")
	assert.Len(t, got, whole.Records+1, "the mark was reset: later starts go on, after a crash too")
}

// A crash tears at most the record being written: records after the last
// mark, torn or cut, are a torn tail as before the mark, not refused. That
// is the cut that still goes unnoticed.
func TestDurableTornTailAfterTheMarkIsNotRefused(t *testing.T) {
	dir := t.TempDir()
	d := openTestDurable(t, dir, markedOpts())
	addUsers(t, d, 1, 10)
	d.log.Mark()
	marked := fileSize(t, newestLog(t, dir))
	addUsers(t, d, 11, 10)
	crash(t, d)
	path := newestLog(t, dir)
	require.NoError(t, os.Truncate(path, marked+5))

	logs := &logtest.Buffer{}
	opts := markedOpts()
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	d = openTestDurable(t, dir, opts)
	defer d.Close()
	got, _ := storetest.ListAll(t, d, "g")
	assert.Len(t, got, 10)
	assert.Contains(t, logs.String(), "truncating a torn write")
}

// The mark is written only when the log has grown since it was last
// written, and says how far the log was fsynced.
func TestDurableMarkIsWrittenWhenTheLogGrew(t *testing.T) {
	dir := t.TempDir()
	d := openTestDurable(t, dir, markedOpts())
	defer d.Close()
	writes := func() uint64 { return d.Stats().Disk.MarkWrites }
	start := writes()
	d.log.Mark()
	assert.Equal(t, start, writes(), "nothing new to mark")
	addUsers(t, d, 1, 3)
	d.log.Mark()
	d.log.Mark()
	assert.Equal(t, start+1, writes(), "one write for the growth")
	m, err := wal.ReadMark(dir)
	require.NoError(t, err)
	assert.Equal(t, wal.Mark{Seq: 1, Offset: fileSize(t, newestLog(t, dir)), Revision: 3}, m.Mark)
}

// A mark that names an older log is superseded: a snapshot started a new
// log, and a crash came before the next mark. The start goes on, with every
// change; and a mark of the new log is checked as any other.
func TestDurableMarkOfAnOlderLogIsSuperseded(t *testing.T) {
	dir := t.TempDir()
	opts := markedOpts()
	opts.SnapshotBytes = 200
	d := openTestDurable(t, dir, opts)
	addUsers(t, d, 1, 5)
	d.log.Mark()
	addUsers(t, d, 6, 25)
	crash(t, d)
	m, err := wal.ReadMark(dir)
	require.NoError(t, err)
	logs, _, err := files(dir)
	require.NoError(t, err)
	require.Less(t, m.Seq, logs[len(logs)-1], "the logs were rotated after the mark")

	d = openTestDurable(t, dir, markedOpts()) // which starts no snapshot
	got, _ := storetest.ListAll(t, d, "g")
	assert.Len(t, got, 30, "no refusal, nothing lost")
	addUsers(t, d, 31, 1)
	d.log.Mark()
	crash(t, d)
	require.NoError(t, os.Truncate(newestLog(t, dir), wal.HeaderSize))
	_, err = Open(dir, markedOpts())
	require.Error(t, err, "the mark of the newest log is checked")
	assert.Contains(t, err.Error(), "-repair")
}

// A snapshot's new log after a crash that came between creating it and the
// next mark, built by hand: the newest log is a header only, and MARK names
// the log before. The start goes on.
func TestDurableCrashBetweenARotationAndItsMark(t *testing.T) {
	dir := markedDir(t, 5)
	df, _, err := readDataFile(dir)
	require.NoError(t, err)
	require.NoError(t, wal.Create(dir, 2, 5, df.id))
	df.lastLog = 2
	require.NoError(t, df.write(dir))

	d := openTestDurable(t, dir, markedOpts())
	defer d.Close()
	got, _ := storetest.ListAll(t, d, "g")
	assert.Len(t, got, 5)
}

// damageMark flips a byte in each slot of dir's MARK at offsets.
func damageMark(t *testing.T, dir string, offsets ...int64) {
	t.Helper()
	path := filepath.Join(dir, "MARK")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, off := range offsets {
		data[off+12] ^= 0x01
	}
	require.NoError(t, os.WriteFile(path, data, 0o600))
}

// The mark is advisory: when both its slots are damaged, the start goes on,
// with a warning, and writes it anew.
func TestDurableStartsWithADamagedMark(t *testing.T) {
	dir := markedDir(t, 10)
	damageMark(t, dir, 0, wal.MarkSlotSize)
	require.NoError(t, os.Truncate(newestLog(t, dir), fileSize(t, newestLog(t, dir))-3))

	logs := &logtest.Buffer{}
	opts := markedOpts()
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	d := openTestDurable(t, dir, opts)
	got, _ := storetest.ListAll(t, d, "g")
	assert.Len(t, got, 9)
	assert.Contains(t, logs.String(), "MARK is damaged: going on without it")
	require.NoError(t, d.Close())
	_, err := wal.ReadMark(dir)
	assert.NoError(t, err, "the start wrote it anew")
}

// A newer slot torn by a crash leaves the older one, which is used.
func TestDurableMarkFallsBackToTheOlderSlot(t *testing.T) {
	dir := t.TempDir()
	d := openTestDurable(t, dir, markedOpts())
	addUsers(t, d, 1, 10)
	d.log.Mark()
	older := fileSize(t, newestLog(t, dir))
	addUsers(t, d, 11, 10)
	d.log.Mark()
	crash(t, d)
	newer, err := wal.ReadMark(dir)
	require.NoError(t, err)
	damageMark(t, dir, int64(newer.Gen%2)*wal.MarkSlotSize)
	m, err := wal.ReadMark(dir)
	require.NoError(t, err)
	assert.Equal(t, older, m.Offset, "the older slot")

	require.NoError(t, os.Truncate(newestLog(t, dir), older-3))
	_, err = Open(dir, markedOpts())
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("offset %d", older))
}

// A directory of a version before the mark has none: it starts as before,
// a log cut after a crash taken for a torn tail.
func TestDurableStartsWithoutAMark(t *testing.T) {
	dir := markedDir(t, 10)
	require.NoError(t, os.Remove(filepath.Join(dir, "MARK")))
	require.NoError(t, os.Truncate(newestLog(t, dir), fileSize(t, newestLog(t, dir))/2))
	d := openTestDurable(t, dir, markedOpts())
	defer d.Close()
	got, _ := storetest.ListAll(t, d, "g")
	assert.NotEmpty(t, got)
	_, err := wal.ReadMark(dir)
	assert.NoError(t, err, "and gets one")
}

// markFileFunc wraps the MARK file of a store, so that a test can make its
// writes fail or hang.
type markFileFunc struct {
	wal.MarkFile
	mu      sync.Mutex
	fail    bool
	syncing chan struct{} // when set, Sync says it started and waits for release
	release chan struct{}
}

func (m *markFileFunc) open(path string) (wal.MarkFile, error) {
	f, err := wal.OpenMarkFile(path)
	if err != nil {
		return nil, err
	}
	m.MarkFile = f
	return m, nil
}

func (m *markFileFunc) WriteAt(b []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return 0, errors.New("no space left on device")
	}
	return m.MarkFile.WriteAt(b, off)
}

func (m *markFileFunc) Sync() error {
	m.mu.Lock()
	syncing, release := m.syncing, m.release
	m.mu.Unlock()
	if syncing != nil {
		syncing <- struct{}{}
		<-release
	}
	return m.MarkFile.Sync()
}

// A mark that fails to write is logged, once until it works again, and
// counted; the changes are taken and acknowledged all the while.
func TestDurableMarkFailureDoesNotFailWrites(t *testing.T) {
	mf := &markFileFunc{}
	logs := &logtest.Buffer{}
	opts := markedOpts()
	opts.openMark, opts.Logger = mf.open, slog.New(slog.NewTextHandler(logs, nil))
	d := openTestDurable(t, t.TempDir(), opts)
	defer d.Close()

	mf.mu.Lock()
	mf.fail = true
	mf.mu.Unlock()
	for uid := range membership.UID(3) {
		addUsers(t, d, uid+1, 1)
		d.log.Mark()
	}
	assert.Equal(t, uint64(3), d.Stats().Disk.MarkFailures)
	assert.Equal(t, 1, strings.Count(logs.String(), "writing MARK failed"), "logged once")
	assert.NoError(t, d.Writable())

	mf.mu.Lock()
	mf.fail = false
	mf.mu.Unlock()
	writes := d.Stats().Disk.MarkWrites
	d.log.Mark()
	assert.Equal(t, writes+1, d.Stats().Disk.MarkWrites)
	assert.Contains(t, logs.String(), "MARK is written again")
}

// A mark whose fsync hangs holds up no change: the changes are written,
// fsynced and acknowledged while it waits.
func TestDurableSlowMarkDoesNotDelayCommits(t *testing.T) {
	mf := &markFileFunc{}
	opts := markedOpts()
	opts.openMark = mf.open
	d := openTestDurable(t, t.TempDir(), opts)
	addUsers(t, d, 1, 1)
	mf.mu.Lock()
	mf.syncing, mf.release = make(chan struct{}), make(chan struct{})
	mf.mu.Unlock()
	marked := make(chan struct{})
	go func() {
		d.log.Mark()
		close(marked)
	}()
	select {
	case <-mf.syncing:
	case <-marked:
		require.FailNow(t, "the change was marked already, on the way of its commit")
	}
	_, err := storetest.Add(context.Background(), d, "g", []membership.User{{UID: 2}})
	assert.NoError(t, err, "acknowledged while the mark's fsync hangs")
	mf.mu.Lock()
	mf.syncing = nil // later marks go through
	mf.mu.Unlock()
	close(mf.release)
	<-marked
	require.NoError(t, d.Close())
}
