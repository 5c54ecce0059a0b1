package durable

import (
	"context"
	"iter"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
	"example.com/groupmembership/membership/directory"
)

// dirOutcome is what one write or batch of directoryScript answered: its
// result, or its error's code.
type dirOutcome struct {
	Result membership.Result
	Batch  membership.BatchResult
	Code   membership.Code
}

// setUser returns the write of uid's account a, with cond.
func setUser(uid membership.UID, a account.Account, cond membership.Precondition) membership.Write {
	return membership.Write{Op: membership.OpSetUser, UIDs: []membership.UID{uid}, Account: &a, If: cond}
}

// setGroup returns the write of groupID's attributes.
func setGroup(groupID, name, external string) membership.Write {
	return membership.Write{Op: membership.OpSetGroup, GroupID: groupID, Group: &account.GroupAttributes{DisplayName: name, ExternalID: external}}
}

// directoryScript makes writes of every directory op on s, alone and in a
// batch, with refusals (a user name taken, a precondition, an inactive
// user added), a deactivation, a key and deletions, and returns what each
// answered.
func directoryScript(t *testing.T, s membership.Store) []dirOutcome {
	t.Helper()
	ctx := context.Background()
	var out []dirOutcome
	write := func(w membership.Write) {
		res, err := s.Write(ctx, w)
		out = append(out, dirOutcome{Result: res, Code: codeOf(err)})
	}
	batch := func(ws ...membership.Write) {
		res, err := s.Batch(ctx, membership.Batch{Writes: ws, Actor: 40})
		out = append(out, dirOutcome{Batch: res, Code: codeOf(err)})
	}
	alice := account.Account{UserName: "alice@example.com", ExternalID: "00u1", DisplayName: "Alice", GivenName: "Alice", Email: "alice@example.com", Active: true}
	bob := account.Account{UserName: "bob", DisplayName: "Bob", Active: true}
	write(setUser(1, alice, membership.Precondition{Empty: true}))
	write(setUser(2, bob, membership.Precondition{Empty: true}))
	write(setUser(3, account.Account{UserName: "ALICE@example.com", Active: true}, membership.Precondition{})) // taken
	write(setUser(2, bob, membership.Precondition{Revisions: []membership.Revision{1}}))                       // not its revision
	write(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}, {UID: 2}, {UID: 7, Nickname: "Gus", HasNickname: true}}})
	write(membership.Write{Op: membership.OpAdd, GroupID: "h", Users: []membership.User{{UID: 2, Nickname: "Bobby", HasNickname: true}}})
	inactive := bob
	inactive.Active = false
	write(setUser(2, inactive, membership.Precondition{Exists: true}))                              // leaves g and h
	write(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 2}}}) // refused
	write(storetest.Keyed(setUser(4, account.Account{UserName: "carol", Active: true}, membership.Precondition{}), "carol"))
	write(storetest.Keyed(setUser(4, account.Account{UserName: "carol", Active: true}, membership.Precondition{}), "carol")) // a repeat
	write(setGroup("admins", "Admins", "x1"))
	batch(setGroup("g", "Gee", ""), membership.Write{Op: membership.OpAdd, GroupID: "admins", Users: []membership.User{{UID: 1}, {UID: 4}}},
		membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{7}})
	batch(setGroup("e", "Empty", ""), membership.Write{Op: membership.OpAdd, GroupID: "e", Users: []membership.User{{UID: 2}}}) // refused whole
	write(setGroup("admins", "Admins", "x1"))                                                                                   // changes nothing
	write(membership.Write{Op: membership.OpDeleteUser, UIDs: []membership.UID{4}})
	write(membership.Write{Op: membership.OpDeleteGroup, GroupID: "g"})
	write(setGroup("empty", "Empty", "x2"))
	return out
}

// codeOf returns err's code, "" for none.
func codeOf(err error) membership.Code {
	if err == nil {
		return ""
	}
	return membership.ErrorCode(err)
}

// dirView is what the directory's reads answer, for comparing stores.
type dirView struct {
	Users  []directory.UserRecord
	Groups []directory.GroupRecord
	Free   membership.UID
}

func dirViewOf(t *testing.T, s membership.Store) dirView {
	t.Helper()
	ctx := context.Background()
	d, ok := s.(directory.Reader)
	require.True(t, ok, "the store keeps a directory")
	var v dirView
	require.NoError(t, d.Users(ctx, directory.UserQuery{Limit: membership.MaxPageSize}, func(_ int, users iter.Seq[directory.UserRecord]) {
		for u := range users {
			v.Users = append(v.Users, u)
		}
	}))
	require.NoError(t, d.GroupRecords(ctx, directory.GroupQuery{Limit: membership.MaxPageSize}, func(_ int, groups iter.Seq[directory.GroupRecord]) {
		for g := range groups {
			v.Groups = append(v.Groups, g)
		}
	}))
	var err error
	v.Free, err = d.FreeUID(ctx)
	require.NoError(t, err)
	return v
}

// The directory's writes answer on the durable store as on memory, and a
// start after a crash, replaying the log, gives back the accounts, the
// groups' attributes, their times and revisions, the keys and the feed.
func TestDurableDirectoryReplaysAfterACrash(t *testing.T) {
	ref := memory.New()
	want := directoryScript(t, ref)
	require.Equal(t, membership.CodeUserNameTaken, want[2].Code, "the script does what it says")
	require.Equal(t, membership.CodePreconditionFailed, want[3].Code)
	require.Equal(t, 2, want[6].Result.Count, "the deactivation left two groups")
	require.Equal(t, membership.CodeInactiveUser, want[7].Code)
	require.True(t, want[9].Result.Replayed)
	require.Equal(t, membership.CodeInactiveUser, want[12].Code)

	dir := t.TempDir()
	d := openTestDurable(t, dir, markedOpts())
	got := directoryScript(t, d)
	for i := range want {
		assert.Equal(t, want[i].Code, got[i].Code, "write %d", i)
		assert.Equal(t, want[i].Result.Count, got[i].Result.Count, "write %d", i)
		assert.Equal(t, want[i].Result.Revision, got[i].Result.Revision, "write %d", i)
		assert.Equal(t, want[i].Batch.Revision, got[i].Batch.Revision, "write %d", i)
	}
	wantView, wantState := dirViewOf(t, d), sortedExport(d)
	require.Len(t, wantView.Users, 2, "alice and bob; carol was deleted")
	require.NotEmpty(t, wantState.GroupAttributes)
	d.log.Mark()
	crash(t, d)

	d = openTestDurable(t, dir, markedOpts())
	defer d.Close()
	assert.Equal(t, wantView, dirViewOf(t, d), "the log replayed")
	assert.Equal(t, wantState, sortedExport(d))
	res, err := d.Write(context.Background(), storetest.Keyed(setUser(4, account.Account{UserName: "carol", Active: true}, membership.Precondition{}), "carol"))
	require.NoError(t, err)
	assert.True(t, res.Replayed, "the key is remembered")
}

// A snapshot holds the accounts, the groups' attributes (of a group with
// no member too) and the feed's directory changes: a start from it alone
// gives them back; so does a backup restored, but for the feed.
func TestDurableDirectorySurvivesASnapshotAndABackup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	directoryScript(t, d)
	require.NoError(t, d.Close())

	// Started again, the first change starts a snapshot that covers every
	// change before it.
	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll, SnapshotBytes: 1})
	_, err := d.Write(ctx, setGroup("later", "Later", ""))
	require.NoError(t, err)
	wantView, wantState := dirViewOf(t, d), sortedExport(d)
	require.NoError(t, d.Close())
	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	assert.Equal(t, wantView, dirViewOf(t, d), "the snapshot loaded")
	assert.Equal(t, wantState, sortedExport(d))

	backup := filepath.Join(t.TempDir(), "b.backup")
	writeBackup(t, d, backup)
	require.NoError(t, d.Close())
	restored := filepath.Join(t.TempDir(), "restored")
	_, err = Restore(backup, restored)
	require.NoError(t, err)
	d = openTestDurable(t, restored, Options{ChangesKeep: keepAll})
	defer d.Close()
	assert.Equal(t, wantView, dirViewOf(t, d), "the backup restored")
	got := sortedExport(d)
	assert.Equal(t, wantState.Accounts, got.Accounts)
	assert.Equal(t, wantState.GroupAttributes, got.GroupAttributes)
	assert.Equal(t, wantState.Nicknames, got.Nicknames)
}

// A directory write that fails its check (a user name taken, a
// precondition, an inactive user added) is refused without a record.
func TestDurableRefusesADirectoryWriteWithoutARecord(t *testing.T) {
	ctx := context.Background()
	d := openTestDurable(t, t.TempDir(), Options{ChangesKeep: keepAll})
	defer d.Close()
	_, err := d.Write(ctx, setUser(1, account.Account{UserName: "a", Active: false}, membership.Precondition{}))
	require.NoError(t, err)
	size := d.log.Size()
	for _, w := range []membership.Write{
		setUser(2, account.Account{UserName: "A", Active: true}, membership.Precondition{}),
		setUser(1, account.Account{UserName: "a", Active: true}, membership.Precondition{Empty: true}),
		{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}}},
		{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{{UID: 1}}},
	} {
		_, err := d.Write(ctx, w)
		assert.Error(t, err, "%s", w.Op)
	}
	_, err = d.Batch(ctx, membership.Batch{Writes: []membership.Write{setGroup("g", "G", ""), {Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}}}}})
	assert.Equal(t, membership.CodeInactiveUser, membership.ErrorCode(err))
	assert.Equal(t, size, d.log.Size(), "nothing was logged")
}
