package wal

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/fileutil"
)

// A log created, appended to, read back and cut, on disk.
func TestCreateAppendReadTruncate(t *testing.T) {
	dir := t.TempDir()
	path := Path(dir, 1)
	require.NoError(t, Create(dir, 1, 42, 5))
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	assert.Error(t, Create(dir, 1, 42, 5), "never over an existing log")

	f, err := openAppend(path)
	require.NoError(t, err)
	var buf []byte
	for _, p := range []string{"one", "two"} {
		buf, err = Append(buf, func(b []byte) []byte { return append(b, p...) })
		require.NoError(t, err)
	}
	_, err = f.Write(buf)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())

	var got []string
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	res, err := Read(data, func(p []byte) error { got = append(got, string(p)); return nil })
	require.NoError(t, err)
	assert.Equal(t, []string{"one", "two"}, got)
	assert.Equal(t, uint64(42), res.StartRevision)
	assert.Equal(t, uint64(5), res.DirID)

	require.NoError(t, fileutil.Truncate(path, int64(HeaderSize+12+3)))
	got = nil
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	res, err = Read(data, func(p []byte) error { got = append(got, string(p)); return nil })
	require.NoError(t, err)
	assert.Equal(t, []string{"one"}, got)
	assert.Zero(t, res.Torn)
}
