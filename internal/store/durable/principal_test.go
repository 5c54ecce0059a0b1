package durable

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/internal/store/storetest/memberstest"
	"example.com/groupmembership/internal/store/wal"
	"example.com/groupmembership/membership"
)

// The principal of every change, and each principal's keys, survive a
// clean stop, a crash (kill -9) and a restart from a snapshot, whose
// logs before it are gone.
func TestDurableKeepsPrincipalsAcrossRestarts(t *testing.T) {
	for _, stop := range []string{"close", "crash", "snapshot"} {
		t.Run(stop, func(t *testing.T) {
			dir := t.TempDir()
			d := openTestDurable(t, dir, markedOpts())
			p := memberstest.WritePrincipals(t, d)
			switch stop {
			case "close":
				require.NoError(t, d.Close())
			case "crash":
				d.log.Mark()
				crash(t, d)
			case "snapshot":
				require.NoError(t, d.Close())
				// The first change after the start starts a snapshot of
				// everything before it; the logs before it are not read.
				d = openTestDurable(t, dir, Options{ChangesKeep: keepAll, SnapshotBytes: 1})
				_, err := storetest.Add(context.Background(), d, "y", []membership.User{{UID: 8}})
				require.NoError(t, err)
				require.NoError(t, d.Close())
				removeLogsBeforeTheNewestSnapshot(t, dir)
			}
			d = openTestDurable(t, dir, markedOpts())
			defer d.Close()
			memberstest.CheckPrincipals(t, d, p, stop != "snapshot")
			if stop == "snapshot" {
				changes := storetest.AllChanges(t, d, p.After)
				require.NotEmpty(t, changes)
				require.Equal(t, "ops@team-a", changes[len(changes)-2].Principal, "the batch, from the snapshot")
			}
		})
	}
}

// removeLogsBeforeTheNewestSnapshot removes the logs of dir that its
// newest snapshot holds.
func removeLogsBeforeTheNewestSnapshot(t *testing.T, dir string) {
	t.Helper()
	logs, snapshots, err := files(dir)
	require.NoError(t, err)
	require.NotEmpty(t, snapshots)
	newest := snapshots[len(snapshots)-1]
	for _, n := range logs {
		if n < newest {
			require.NoError(t, os.Remove(wal.Path(dir, n)))
		}
	}
}

// A backup keeps each principal's keys (it keeps no change): restored, a
// repeat of each principal's keyed request is its replay, and another
// principal's request with the key is applied as its own.
func TestBackupKeepsEachPrincipalsKeys(t *testing.T) {
	d := openTestDurable(t, t.TempDir(), markedOpts())
	defer d.Close()
	p := memberstest.WritePrincipals(t, d)
	var file bytes.Buffer
	_, err := d.Backup().WriteTo(&file)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "backup")
	require.NoError(t, os.WriteFile(path, file.Bytes(), 0o600))
	restored := filepath.Join(t.TempDir(), "restored")
	_, err = Restore(path, restored)
	require.NoError(t, err)
	r := openTestDurable(t, restored, Options{ChangesKeep: keepAll})
	defer r.Close()
	memberstest.CheckPrincipals(t, r, p, false)
}
