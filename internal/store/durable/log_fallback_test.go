package durable

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"

	"example.com/groupmembership/internal/aiofsync"
	"example.com/groupmembership/membership"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestALogWithoutAsynchronousFsync: where the kernel gives no asynchronous
// fsync, the store fsyncs its log with fsync(2), says so once a log with
// the reason, and keeps every change; on a platform that has none at all
// it says nothing.
func TestALogWithoutAsynchronousFsync(t *testing.T) {
	refused := func(*os.File) (*aiofsync.File, error) {
		return nil, errors.New("aiofsync: io_setup: resource temporarily unavailable")
	}
	unsupported := func(*os.File) (*aiofsync.File, error) { return nil, aiofsync.ErrUnsupported }
	for _, tc := range []struct {
		name  string
		async func(*os.File) (*aiofsync.File, error)
		says  bool
	}{
		{"refused by the kernel", refused, true},
		{"no such I/O on the platform", unsupported, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			logs := &bytes.Buffer{}
			logger := slog.New(slog.NewTextHandler(logs, nil))
			var opened []logFile
			opts := Options{SnapshotBytes: 4 << 10, Logger: logger}
			opts.openLog = func(path string) (logFile, error) {
				f, err := openLogFile(path, logger, tc.async)
				opened = append(opened, f)
				return f, err
			}
			d := openTestDurable(t, dir, opts)
			for i := range 300 {
				_, err := d.AddMembers(ctx, "g", []membership.User{{UID: membership.UID(i + 1)}})
				require.NoError(t, err)
			}
			want := dump(t, d, "g")
			require.NoError(t, d.Close())

			require.Greater(t, len(opened), 1, "a snapshot started a new log")
			for _, f := range opened {
				_, plain := f.(*os.File)
				assert.True(t, plain, "fsync(2): %T", f)
			}
			said := bytes.Count(logs.Bytes(), []byte(`msg="the log is fsynced with fsync(2), which holds a thread while the disk works: the kernel gave no asynchronous I/O"`))
			if tc.says {
				assert.Equal(t, len(opened), said, "once a log: %s", logs)
				assert.Contains(t, logs.String(), `err="aiofsync: io_setup: resource temporarily unavailable"`)
				assert.Contains(t, logs.String(), "file="+logPath(dir, 1))
			} else {
				assert.Zero(t, said, "%s", logs)
			}

			d = openTestDurable(t, dir, Options{})
			defer d.Close()
			assert.Equal(t, want, dump(t, d, "g"))
		})
	}
}
