//go:build unix

package durable

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/logtest"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// The test of MaxOpenFiles lowers the limit of open descriptors, which only
// Unix has.

// The store never needs more than MaxOpenFiles descriptors: in a child
// process whose limit leaves it exactly that many free, it opens, takes
// changes from several writers through many snapshots (each a new log, a
// DATA, a snapshot written, read back and compacted, the mark written all
// the while), stops, and opens again.
func TestDurableFitsInMaxOpenFiles(t *testing.T) {
	if os.Getenv("STORE_TEST_FD_CHILD") == "" {
		if _, err := os.Stat("/proc/self/fd"); err != nil {
			t.Skip("needs /proc/self/fd to count descriptors")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestDurableFitsInMaxOpenFiles$", "-test.v")
		cmd.Env = append(os.Environ(), "STORE_TEST_FD_CHILD=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), "--- PASS: TestDurableFitsInMaxOpenFiles")
		return
	}
	dir := t.TempDir()
	logs := &logtest.Buffer{}
	leaveFreeDescriptors(t, MaxOpenFiles)
	opts := Options{ChangesKeep: keepAll, SnapshotBytes: 1 << 10, markEvery: time.Millisecond, CommitTimeout: testCommitTimeout,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelError}))}
	d, err := Open(dir, opts)
	require.NoError(t, err)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 100 {
				uid := membership.UID(w*1000 + i + 1)
				if _, err := storetest.Add(context.Background(), d, "g", []membership.User{{UID: uid}}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, d.Close())
	require.NotZero(t, d.Stats().Disk.Snapshots)
	d, err = Open(dir, opts)
	require.NoError(t, err)
	got, _ := storetest.ListAll(t, d, "g")
	assert.Len(t, got, 800)
	require.NoError(t, d.Close())
	assert.Empty(t, logs.String(), "no snapshot, log or mark failed for want of a descriptor")
}

// leaveFreeDescriptors lowers the process's descriptor limit so that n
// descriptors are free below it, and raises it back at the end of the test.
func leaveFreeDescriptors(t *testing.T, n int) {
	t.Helper()
	f, err := os.Open("/proc/self/fd")
	require.NoError(t, err)
	names, err := f.Readdirnames(-1)
	require.NoError(t, err)
	open := map[int]bool{}
	for _, name := range names {
		if fd, err := strconv.Atoi(name); err == nil && uintptr(fd) != f.Fd() {
			open[fd] = true
		}
	}
	require.NoError(t, f.Close())
	limit, free := 0, 0
	for ; free < n; limit++ {
		if !open[limit] {
			free++
		}
	}
	var was syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &was))
	lowered := was
	setRlim(&lowered.Cur, limit)
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered))
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was) })
}

// setRlim sets a field of syscall.Rlimit to v: the fields are uint64 on
// Linux and darwin, int64 on the BSDs.
func setRlim[T int64 | uint64](field *T, v int) { *field = T(v) }
