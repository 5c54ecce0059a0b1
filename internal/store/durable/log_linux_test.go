//go:build linux && (amd64 || arm64)

package durable

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"example.com/groupmembership/internal/aiofsync"
	"example.com/groupmembership/membership"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTheLogIsFsyncedAsynchronously: on Linux the store fsyncs its log
// through the kernel's AIO (aiofsync), the first log and every log a
// snapshot starts, and says nothing of a fallback; what it wrote so is
// there after a restart.
func TestTheLogIsFsyncedAsynchronously(t *testing.T) {
	skipWithoutAIO(t)
	ctx := context.Background()
	dir := t.TempDir()
	logs := &bytes.Buffer{}
	d := openTestDurable(t, dir, Options{SnapshotBytes: 4 << 10, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	first := d.logSeq
	for i := range 300 {
		_, err := d.AddMembers(ctx, "g", []membership.User{{UID: membership.UID(i + 1)}})
		require.NoError(t, err)
	}
	want := dump(t, d, "g")
	fsyncs := d.Stats().Disk.Fsyncs
	require.NoError(t, d.Close())
	assert.Greater(t, d.logSeq, first, "a snapshot started a new log")
	_, async := d.log.(*aiofsync.File)
	assert.True(t, async, "the log is an aiofsync.File: %T", d.log)
	assert.GreaterOrEqual(t, fsyncs, uint64(300))
	assert.NotContains(t, logs.String(), "fsynced with fsync(2)")

	d = openTestDurable(t, dir, Options{})
	defer d.Close()
	_, async = d.log.(*aiofsync.File)
	assert.True(t, async, "a restart's log too: %T", d.log)
	assert.Equal(t, want, dump(t, d, "g"))
}

// skipWithoutAIO skips the test where the kernel gives no AIO context (a
// sandbox that forbids it, fs.aio-max-nr reached): the store then fsyncs
// with fsync(2), which TestALogWithoutAsynchronousFsync covers.
func skipWithoutAIO(t *testing.T) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "probe"))
	require.NoError(t, err)
	a, err := aiofsync.Open(f)
	if err != nil && strings.Contains(err.Error(), "io_setup") {
		_ = f.Close()
		t.Skipf("the kernel gives no AIO context here: %v", err)
	}
	require.NoError(t, err)
	require.NoError(t, a.Close())
}
