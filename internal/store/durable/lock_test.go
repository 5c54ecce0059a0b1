package durable

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/wal"
)

// The lock can be taken before the store opens (a server takes it before
// it says it listens): it creates the directory, keeps a second holder out with the
// same words as Open, and is the store's once given to it, released
// by Close or by a failed open.
func TestLockDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	lock, err := LockDataDir(dir)
	require.NoError(t, err)
	info, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "created private")
	for _, second := range []func() error{
		func() error { _, err := LockDataDir(dir); return err },
		func() error { _, err := Open(dir, Options{}); return err },
	} {
		err := second()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "the data directory "+dir+" is in use by another process")
	}

	d, err := Open(dir, Options{Lock: lock})
	require.NoError(t, err)
	_, err = LockDataDir(dir)
	assert.ErrorContains(t, err, "in use by another process", "the store holds it")
	require.NoError(t, d.Close())
	assert.NoError(t, lock.Release(), "released by Close already: nothing to do")

	lock, err = LockDataDir(dir)
	require.NoError(t, err, "Close released it")
	require.NoError(t, os.WriteFile(wal.Path(dir, 1), []byte("GMWL\x63\x00\x00\x00"), 0o600))
	_, err = Open(dir, Options{Lock: lock})
	require.Error(t, err)
	lock, err = LockDataDir(dir)
	require.NoError(t, err, "a failed open released the lock it was given")
	require.NoError(t, lock.Release())
	assert.NoError(t, lock.Release(), "releasing again does nothing")
}

// A lock of another directory is refused, and released.
func TestOpenDurableRefusesTheLockOfAnotherDirectory(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	lock, err := LockDataDir(other)
	require.NoError(t, err)
	_, err = Open(dir, Options{Lock: lock})
	require.Error(t, err)
	assert.Contains(t, err.Error(), other)
	lock, err = LockDataDir(other)
	require.NoError(t, err)
	require.NoError(t, lock.Release())
}
