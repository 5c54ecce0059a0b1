package durable

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/internal/store/wal"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
)

// copyFixture returns a copy of testdata/name: a data directory an older
// build wrote (testdata/name.sh says how), a snapshot and logs of its
// version, the last one cut by a kill -9.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join("testdata", name))))
	return dir
}

// readFixtureBackup returns testdata/name.backup, GET /backup of a later
// start of the build that wrote testdata/name, decoded, its groups in
// byte order of ids.
func readFixtureBackup(t *testing.T, name string) *snap.State {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".backup"))
	require.NoError(t, err)
	want, err := snap.Decode(data, name+".backup")
	require.NoError(t, err)
	require.NotEmpty(t, want.Keys, "the fixture remembers keys")
	sortGroups(want)
	return want
}

// A data directory of the build before groups in groups starts, and keeps
// everything: the groups, members, expiries, nicknames, keys and the feed
// are what that build's own backup of it holds. Its changes, nestings
// included, go into a new log of this version, which the next start reads
// with the old ones.
func TestDurableStartsOnADataDirOfVersion7(t *testing.T) {
	want := readFixtureBackup(t, "version7")
	dir := copyFixture(t, "version7")
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	got := assertStartedAsBackedUp(t, d, want)
	assert.Empty(t, got.Nestings)
	assertAppendsToOlderLogs(t, d, dir, 2)
}

// A data directory of the build before principals starts, and keeps
// everything, its groups in groups too; its changes carry no principal.
// Its changes go into a new log of this version, which the next start
// reads with the old ones.
func TestDurableStartsOnADataDirOfVersion8(t *testing.T) {
	want := readFixtureBackup(t, "version8")
	require.NotEmpty(t, want.Nestings, "the fixture nests groups")
	dir := copyFixture(t, "version8")
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	got := assertStartedAsBackedUp(t, d, want)
	assert.Equal(t, want.Nestings, got.Nestings)
	for _, c := range got.Changes {
		assert.Empty(t, c.Principal, "change %d", c.Revision)
	}
	assertAppendsToOlderLogs(t, d, dir, 2)
}

// A data directory of the build before the bound on ancestors starts,
// and keeps everything: its nesting records, which hold a bound on depth
// alone, replay with no bound on ancestors. Its changes go into a new log
// of this version, which the next start reads with the old ones.
func TestDurableStartsOnADataDirOfVersion9(t *testing.T) {
	want := readFixtureBackup(t, "version9")
	require.NotEmpty(t, want.Nestings, "the fixture nests groups")
	dir := copyFixture(t, "version9")
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	got := assertStartedAsBackedUp(t, d, want)
	assert.Equal(t, want.Nestings, got.Nestings)
	assertAppendsToOlderLogs(t, d, dir, 2)
}

// assertStartedAsBackedUp checks that d, opened on a fixture, holds what
// the fixture's backup holds, and the whole feed, whose last change is the
// one logged before the kill, and returns d's state.
func assertStartedAsBackedUp(t *testing.T, d *Store, want *snap.State) *snap.State {
	t.Helper()
	got := sortedExport(d)
	assert.Equal(t, want.LastRevision, got.LastRevision)
	assert.Equal(t, want.NicknamesRevision, got.NicknamesRevision)
	assert.Equal(t, want.RemovedRevision, got.RemovedRevision)
	assert.Equal(t, want.Nicknames, got.Nicknames)
	assert.Equal(t, want.Groups, got.Groups)
	assert.Equal(t, want.Keys, got.Keys)
	require.Len(t, got.Changes, int(want.LastRevision), "the feed keeps every change")
	assert.Equal(t, membership.OpRemoveUser, got.Changes[len(got.Changes)-1].Op, "the last change, logged before the kill")
	return got
}

// assertAppendsToOlderLogs checks that d, opened on a fixture of oldLogs
// logs, replays a key the old build remembered, takes writes and nestings
// into a new log of this version, accounts and group attributes among them,
// and, closed and opened again, replays the old logs and the new one to the
// same state, principals included.
func assertAppendsToOlderLogs(t *testing.T, d *Store, dir string, oldLogs int) {
	t.Helper()
	ctx := context.Background()
	res, err := d.Write(ctx, storetest.Keyed(membership.Write{Op: membership.OpReplace, GroupID: "ops",
		Users: []membership.User{{UID: 1}, {UID: 3}, {UID: 4}}}, "key-put-1"))
	require.NoError(t, err)
	assert.True(t, res.Replayed, "a key the old build remembered")
	_, err = storetest.Add(ctx, d, "g1", []membership.User{{UID: 424242}})
	require.NoError(t, err)
	_, err = d.Write(ctx, storetest.Nest("every", "g1", "g2"))
	require.NoError(t, err)
	_, err = d.Write(ctx, setUser(5000, account.Account{UserName: "n1", DisplayName: "N1", Active: true}, membership.Precondition{Empty: true}))
	require.NoError(t, err)
	_, err = d.Write(ctx, setGroup("ops", "Operations", "x"))
	require.NoError(t, err)
	nest := storetest.Nest("g2", "late")
	nest.Principal = "sync-job"
	_, err = d.Write(ctx, nest)
	require.NoError(t, err)
	wantAfter := sortedExport(d)
	require.Len(t, wantAfter.Accounts, 1)
	require.Len(t, wantAfter.GroupAttributes, 1)
	assert.Equal(t, "sync-job", wantAfter.Changes[len(wantAfter.Changes)-1].Principal)
	require.NoError(t, d.Close())

	newest, err := os.ReadFile(newestLog(t, dir))
	require.NoError(t, err)
	h, err := wal.ReadHeader(newest)
	require.NoError(t, err)
	assert.Equal(t, wal.Version, h.Version, "a new log of this version")
	logs, _, err := files(dir)
	require.NoError(t, err)
	assert.Len(t, logs, oldLogs+1, "after the old ones")

	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	assert.Equal(t, wantAfter, sortedExport(d), "the old logs and the new one replayed")
}

// sortedExport returns d's whole state, its groups in byte order of ids.
func sortedExport(d *Store) *snap.State {
	st := d.mem.Export()
	sortGroups(st)
	return st
}

// sortGroups puts st's groups in byte order of ids, each group of no
// member with no UIDs (nil), as a decoded snapshot has them.
func sortGroups(st *snap.State) {
	slices.SortFunc(st.Groups, func(a, b snap.Group) int { return strings.Compare(a.ID, b.ID) })
	for i := range st.Groups {
		if len(st.Groups[i].UIDs) == 0 {
			st.Groups[i].UIDs = nil
		}
	}
}

// A backup an older build took restores: the store holds what it holds,
// and takes nestings and group attributes beside it.
func TestDurableRestoresABackupOfAnOlderVersion(t *testing.T) {
	for _, tt := range []struct {
		name   string
		header string
	}{
		{"version7", "GMSN\x07\x00\x00\x00"},
		{"version8", "GMSN\x08\x00\x00\x00"},
		{"version9", "GMSN\x09\x00\x00\x00"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := readFixtureBackup(t, tt.name)
			path := filepath.Join("testdata", tt.name+".backup")
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, tt.header, string(data[:8]))

			dir := filepath.Join(t.TempDir(), "restored")
			rev, err := Restore(path, dir)
			require.NoError(t, err)
			assert.Equal(t, want.LastRevision, rev)
			d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
			defer d.Close()
			got := sortedExport(d)
			assert.Equal(t, want.Groups, got.Groups)
			assert.Equal(t, want.Nicknames, got.Nicknames)
			assert.Equal(t, want.Keys, got.Keys)
			assert.Equal(t, want.Nestings, got.Nestings)
			_, err = d.Write(context.Background(), storetest.Nest("every", "g1"))
			require.NoError(t, err)
			_, err = d.Write(context.Background(), setGroup("every", "Everyone", ""))
			require.NoError(t, err)
		})
	}
}
