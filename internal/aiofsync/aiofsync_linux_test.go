//go:build linux && (amd64 || arm64)

package aiofsync

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openTemp opens a file in a temporary directory with Open, or skips the
// test where the kernel gives no AIO context (a sandbox that forbids it,
// fs.aio-max-nr reached): there is nothing to test but the fallback, which
// the durable store's tests cover.
func openTemp(t *testing.T) *File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	a, err := Open(f)
	skipWithoutAIO(t, err)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// skipWithoutAIO skips the test when err says the kernel gave no AIO
// context.
func skipWithoutAIO(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), "io_setup") {
		t.Skipf("the kernel gives no AIO context here: %v", err)
	}
}

// TestSyncIsTheKernelsAsynchronousFsync: a Sync of a file on disk is
// submitted to the kernel's AIO (each gets its own sequence number, and
// none falls back to fsync(2)), and the file's writes read back.
func TestSyncIsTheKernelsAsynchronousFsync(t *testing.T) {
	f := openTemp(t)
	for i := range 3 {
		_, err := f.Write([]byte("record\n"))
		require.NoError(t, err)
		require.NoError(t, f.Sync(), "sync %d", i)
	}
	assert.Equal(t, uint64(1+3), f.seq, "Open's fsync and three more, submitted to the kernel's AIO")
	assert.False(t, f.blocked, "the file system took an asynchronous fsync")
	got, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	assert.Equal(t, "record\nrecord\nrecord\n", string(got))
	assert.NoError(t, f.Close())
}

// TestSyncsFromManyGoroutines: Syncs at once are taken one at a time, and
// each gets its own fsync's end (the AIO context holds one at most).
func TestSyncsFromManyGoroutines(t *testing.T) {
	f := openTemp(t)
	const goroutines, each = 8, 50
	errs := make(chan error, goroutines*each)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				if _, err := f.Write([]byte("x")); err != nil {
					errs <- err
					continue
				}
				errs <- f.Sync()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, uint64(1+goroutines*each), f.seq, "Open's fsync and one a Sync")
}

// TestAFileWithoutAsynchronousFsyncIsRefusedAtOpen: Open tries one
// fsync through the kernel's AIO; a file that has none (a pipe: io_submit
// says EINVAL) is refused there, with the reason, and stays the caller's.
func TestAFileWithoutAsynchronousFsyncIsRefusedAtOpen(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	f, err := Open(w)
	skipWithoutAIO(t, err)
	assert.Nil(t, f)
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.EINVAL)
	assert.Contains(t, err.Error(), "the first asynchronous fsync")
	_, err = w.Write([]byte("still open"))
	assert.NoError(t, err, "the pipe is still the caller's, open")
}

// TestARefusalAfterOpenFallsBack: when io_submit refuses an fsync after
// Open (an AIO context gone bad here), Sync is the file's own fsync from
// then on, which succeeds, and no submission is tried again.
func TestARefusalAfterOpenFallsBack(t *testing.T) {
	f := openTemp(t)
	good := f.aioCtx
	defer destroy(good)
	f.aioCtx = 0 // io_submit: EINVAL
	seq := f.seq
	for range 2 {
		_, err := f.Write([]byte("x"))
		require.NoError(t, err)
		require.NoError(t, f.Sync(), "fsync(2) in its place")
	}
	assert.True(t, f.blocked)
	assert.ErrorIs(t, f.refusal, syscall.EINVAL)
	assert.Equal(t, seq+1, f.seq, "one submission tried, not one a Sync")
}

// TestAFailedWaitStopsTheFile: when the wait for an fsync's end fails, its
// end can no longer be told from a later one's: Sync returns that error
// from then on, and Close still closes the file.
func TestAFailedWaitStopsTheFile(t *testing.T) {
	f := openTemp(t)
	eventfd := f.done
	defer eventfd.Close()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, r.Close())
	f.done = r // the kernel signals the eventfd still; the wait reads a closed file
	first := f.Sync()
	require.Error(t, first)
	assert.ErrorIs(t, first, os.ErrClosed)
	assert.Equal(t, first, f.Sync(), "the same error, with no fsync submitted")
	assert.Equal(t, uint64(2), f.seq, "Open's fsync, then the one whose wait failed")
	err = f.Close()
	assert.ErrorIs(t, err, os.ErrClosed, "what the wait read was closed already")
	_, statErr := f.File.Stat()
	assert.ErrorIs(t, statErr, os.ErrClosed, "the file is closed")
}

// TestClose: Sync and Close after Close say the file is closed.
func TestClose(t *testing.T) {
	f := openTemp(t)
	require.NoError(t, f.Close())
	assert.ErrorIs(t, f.Sync(), os.ErrClosed)
	assert.ErrorIs(t, f.Close(), os.ErrClosed)
}

// TestSyncOfAClosedDescriptor: a descriptor closed after Open is refused
// by io_submit (EBADF); the file's own Sync then says it is closed.
func TestSyncOfAClosedDescriptor(t *testing.T) {
	f := openTemp(t)
	require.NoError(t, f.File.Close())
	err := f.Sync()
	assert.ErrorIs(t, err, os.ErrClosed)
	var pe *os.PathError
	require.True(t, errors.As(f.refusal, &pe), "%T", f.refusal)
	assert.Equal(t, "io_submit fsync", pe.Op)
	assert.ErrorIs(t, f.refusal, syscall.EBADF)
}
