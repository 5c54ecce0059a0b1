//go:build linux && (amd64 || arm64)

package aiofsync

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func openTemp(t *testing.T) *File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	a, err := Open(f)
	require.NoError(t, err, "this kernel gives an AIO context and an eventfd")
	t.Cleanup(func() { _ = a.Close() })
	return a
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
	assert.Equal(t, uint64(3), f.seq, "three fsyncs submitted to the kernel's AIO")
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
	assert.Equal(t, uint64(goroutines*each), f.seq)
}

// TestAFileWithoutFsyncFallsBack: a file whose file system has no fsync (a
// pipe) is refused by io_submit; Sync then is the file's own, which
// returns the file's error, and stays so.
func TestAFileWithoutFsyncFallsBack(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	f, err := Open(w)
	require.NoError(t, err)
	defer f.Close()
	for range 2 {
		err = f.Sync()
		require.Error(t, err)
		assert.ErrorIs(t, err, syscall.EINVAL, "fsync(2) of a pipe: %v", err)
		assert.True(t, f.blocked, "Sync is the file's own from the refusal on")
	}
	assert.Equal(t, uint64(1), f.seq, "one submission tried, not one a Sync")
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
	assert.Equal(t, uint64(1), f.seq)
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

// TestSyncOfAClosedDescriptor: an error of the submission comes back as
// Sync's, naming it: a descriptor closed after Open is refused by
// io_submit itself (EBADF), not handed to fsync(2).
func TestSyncOfAClosedDescriptor(t *testing.T) {
	f := openTemp(t)
	require.NoError(t, f.File.Close())
	err := f.Sync()
	require.Error(t, err)
	var pe *os.PathError
	require.True(t, errors.As(err, &pe), "%T", err)
	assert.Equal(t, "io_submit fsync", pe.Op)
	assert.ErrorIs(t, err, syscall.EBADF)
}
