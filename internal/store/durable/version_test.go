package durable

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/internal/store/wal"
	"example.com/groupmembership/membership"
)

// copyVersion7 returns a copy of testdata/version7: a data directory the
// build before groups in groups wrote (testdata/version7.sh), a snapshot
// and logs of version 7, the last one cut by a kill -9.
func copyVersion7(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS("testdata/version7")))
	return dir
}

// A data directory of the build before groups in groups starts, and keeps
// everything: the groups, members, expiries, nicknames, keys and the feed
// are what that build's own backup of it holds. Its changes, nestings
// included, go into a new log of version 8, which the next start reads
// with the old ones.
func TestDurableStartsOnADataDirOfVersion7(t *testing.T) {
	ctx := context.Background()
	data, err := os.ReadFile("testdata/version7.backup")
	require.NoError(t, err)
	want, err := snap.Decode(data, "version7.backup")
	require.NoError(t, err)
	require.NotEmpty(t, want.Keys, "the fixture remembers keys")
	slices.SortFunc(want.Groups, func(a, b snap.Group) int { return strings.Compare(a.ID, b.ID) })

	dir := copyVersion7(t)
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	got := sortedExport(d)
	assert.Equal(t, want.LastRevision, got.LastRevision)
	assert.Equal(t, want.NicknamesRevision, got.NicknamesRevision)
	assert.Equal(t, want.RemovedRevision, got.RemovedRevision)
	assert.Equal(t, want.Nicknames, got.Nicknames)
	assert.Equal(t, want.Groups, got.Groups)
	assert.Equal(t, want.Keys, got.Keys)
	assert.Empty(t, got.Nestings)
	require.Len(t, got.Changes, int(want.LastRevision), "the feed keeps every change")
	assert.Equal(t, membership.OpRemoveUser, got.Changes[len(got.Changes)-1].Op, "the last change, logged before the kill")

	res, err := d.Write(ctx, storetest.Keyed(membership.Write{Op: membership.OpReplace, GroupID: "ops",
		Users: []membership.User{{UID: 1}, {UID: 3}, {UID: 4}}}, "key-put-1"))
	require.NoError(t, err)
	assert.True(t, res.Replayed, "a key the old build remembered")
	_, err = storetest.Add(ctx, d, "g1", []membership.User{{UID: 424242}})
	require.NoError(t, err)
	_, err = d.Write(ctx, storetest.Nest("all", "g1", "g2"))
	require.NoError(t, err)
	_, err = d.Write(ctx, storetest.Nest("g2", "ops"))
	require.NoError(t, err)
	wantAfter := sortedExport(d)
	require.Len(t, wantAfter.Nestings, 3)
	require.NoError(t, d.Close())

	newest, err := os.ReadFile(newestLog(t, dir))
	require.NoError(t, err)
	h, err := wal.ReadHeader(newest)
	require.NoError(t, err)
	assert.Equal(t, wal.Version, h.Version, "a new log of this version")
	logs, _, err := files(dir)
	require.NoError(t, err)
	assert.Len(t, logs, 3, "after the two of version 7")

	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	assert.Equal(t, wantAfter, sortedExport(d), "the old logs and the new one replayed")
}

// sortedExport returns d's whole state, its groups in byte order of ids.
func sortedExport(d *Store) *snap.State {
	st := d.mem.Export()
	slices.SortFunc(st.Groups, func(a, b snap.Group) int { return strings.Compare(a.ID, b.ID) })
	return st
}

// A backup the build before groups in groups took restores: the store
// holds what it holds, and takes nestings beside it.
func TestDurableRestoresABackupOfVersion7(t *testing.T) {
	data, err := os.ReadFile("testdata/version7.backup")
	require.NoError(t, err)
	want, err := snap.Decode(data, "version7.backup")
	require.NoError(t, err)
	require.Equal(t, "GMSN\x07\x00\x00\x00", string(data[:8]), "a backup of version 7")
	slices.SortFunc(want.Groups, func(a, b snap.Group) int { return strings.Compare(a.ID, b.ID) })

	dir := filepath.Join(t.TempDir(), "restored")
	rev, err := Restore("testdata/version7.backup", dir)
	require.NoError(t, err)
	assert.Equal(t, want.LastRevision, rev)
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	got := sortedExport(d)
	assert.Equal(t, want.Groups, got.Groups)
	assert.Equal(t, want.Nicknames, got.Nicknames)
	assert.Equal(t, want.Keys, got.Keys)
	_, err = d.Write(context.Background(), storetest.Nest("all", "g1"))
	require.NoError(t, err)
}

// copyVersion8 returns a copy of testdata/version8: a data directory the
// build before accounts and group attributes wrote (testdata/version8.sh),
// a snapshot and logs of version 8, with groups in groups, the last log
// cut by a kill -9.
func copyVersion8(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS("testdata/version8")))
	return dir
}

// A data directory of the build before accounts starts, and keeps
// everything: the groups, nestings, members, expiries, nicknames, keys and
// the feed are what that build's own backup of it holds. Its changes,
// accounts and group attributes included, go into a new log of version 9,
// which the next start reads with the old ones.
func TestDurableStartsOnADataDirOfVersion8(t *testing.T) {
	ctx := context.Background()
	data, err := os.ReadFile("testdata/version8.backup")
	require.NoError(t, err)
	want, err := snap.Decode(data, "version8.backup")
	require.NoError(t, err)
	require.NotEmpty(t, want.Keys, "the fixture remembers keys")
	require.NotEmpty(t, want.Nestings, "the fixture has groups in groups")
	slices.SortFunc(want.Groups, func(a, b snap.Group) int { return strings.Compare(a.ID, b.ID) })

	dir := copyVersion8(t)
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	got := sortedExport(d)
	assert.Equal(t, want.LastRevision, got.LastRevision)
	assert.Equal(t, want.NicknamesRevision, got.NicknamesRevision)
	assert.Equal(t, want.RemovedRevision, got.RemovedRevision)
	assert.Equal(t, want.Nicknames, got.Nicknames)
	assert.Equal(t, want.Groups, got.Groups)
	assert.Equal(t, want.Keys, got.Keys)
	assert.Equal(t, want.Nestings, got.Nestings)
	assert.Empty(t, got.Accounts)
	require.Len(t, got.Changes, int(want.LastRevision), "the feed keeps every change")
	assert.Equal(t, membership.OpRemoveUser, got.Changes[len(got.Changes)-1].Op, "the last change, logged before the kill")

	res, err := d.Write(ctx, storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "late",
		Users: []membership.User{{UID: 77, Expiry: membership.Expiry{Set: true, TTL: 500 * time.Hour}}}}, "key-add-77"))
	require.NoError(t, err)
	assert.True(t, res.Replayed, "a key the old build remembered")
	_, err = d.Write(ctx, setUser(5000, membership.Account{UserName: "n1", DisplayName: "N1", Active: true}, membership.Precondition{Empty: true}))
	require.NoError(t, err)
	_, err = d.Write(ctx, setGroup("ops", "Operations", "x"))
	require.NoError(t, err)
	wantAfter := sortedExport(d)
	require.Len(t, wantAfter.Accounts, 1)
	require.Len(t, wantAfter.GroupAttributes, 1)
	require.NoError(t, d.Close())

	newest, err := os.ReadFile(newestLog(t, dir))
	require.NoError(t, err)
	h, err := wal.ReadHeader(newest)
	require.NoError(t, err)
	assert.Equal(t, wal.Version, h.Version, "a new log of this version")
	logs, _, err := files(dir)
	require.NoError(t, err)
	assert.Len(t, logs, 3, "after the two of version 8")

	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	assert.Equal(t, wantAfter, sortedExport(d), "the old logs and the new one replayed")
}

// A backup the build before accounts took restores: the store holds what
// it holds, and takes accounts and group attributes beside it.
func TestDurableRestoresABackupOfVersion8(t *testing.T) {
	data, err := os.ReadFile("testdata/version8.backup")
	require.NoError(t, err)
	want, err := snap.Decode(data, "version8.backup")
	require.NoError(t, err)
	require.Equal(t, "GMSN\x08\x00\x00\x00", string(data[:8]), "a backup of version 8")
	slices.SortFunc(want.Groups, func(a, b snap.Group) int { return strings.Compare(a.ID, b.ID) })

	dir := filepath.Join(t.TempDir(), "restored")
	rev, err := Restore("testdata/version8.backup", dir)
	require.NoError(t, err)
	assert.Equal(t, want.LastRevision, rev)
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	got := sortedExport(d)
	assert.Equal(t, want.Groups, got.Groups)
	assert.Equal(t, want.Nestings, got.Nestings)
	assert.Equal(t, want.Nicknames, got.Nicknames)
	assert.Equal(t, want.Keys, got.Keys)
	_, err = d.Write(context.Background(), setGroup("all", "All", ""))
	require.NoError(t, err)
}
