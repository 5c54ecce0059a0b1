package snap

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
)

// directoryState returns a state with accounts, one inactive and one in no
// group (whose nickname is kept), a group with attributes and no member,
// and changes of the directory's ops.
func directoryState() *State {
	at := time.Date(2026, 11, 24, 23, 59, 1, 123e6, time.UTC)
	alice := account.Account{UserName: "alice@example.com", ExternalID: "00u1", GivenName: "Alice", FamilyName: "Liddell", Email: "alice@example.com", Active: true}
	return &State{
		LastRevision: 6,
		Nicknames:    map[membership.UID]string{1: "Alice", 2: "Bob"},
		Groups: []Group{
			{ID: "admins", Revision: 5},
			{ID: "g", Revision: 4, UIDs: []membership.UID{1}},
		},
		Changes: []membership.Change{
			{Revision: 3, Op: membership.OpSetUser, Time: at, Actor: 7, UIDs: []membership.UID{1}, Account: &account.Account{UserName: "alice@example.com", DisplayName: "Alice", Active: true}},
			{Revision: 4, Op: membership.OpDeleteUser, Time: at, UIDs: []membership.UID{9}},
			{Revision: 5, Op: membership.OpBatch, Time: at, Changes: []membership.Change{
				{Op: membership.OpSetGroup, GroupID: "admins", GroupAttributes: &account.GroupAttributes{DisplayName: "Admins", ExternalID: "x"}},
				{Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{1}},
			}},
			{Revision: 6, Op: membership.OpSetGroup, Time: at, GroupID: "admins", GroupAttributes: &account.GroupAttributes{DisplayName: "Admins"}},
		},
		Accounts: []Account{
			{UID: 1, Account: alice, Created: at, Modified: at.Add(time.Second), Revision: 3},
			{UID: 2, Account: account.Account{UserName: "bob"}, Created: at, Modified: at, Revision: 2},
		},
		GroupAttributes: []GroupAttributes{{ID: "admins", Attributes: account.GroupAttributes{DisplayName: "Admins"}, Created: at, Modified: at}},
	}
}

// A snapshot keeps the accounts, the groups' attributes and the changes
// of the directory's ops; a backup keeps the accounts and attributes.
func TestDirectoryRoundTrip(t *testing.T) {
	st := directoryState()
	require.NoError(t, st.Check())
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, st))
	got, err := Decode(buf.Bytes(), "s.snap")
	require.NoError(t, err)
	assert.Equal(t, st, got)

	backup := *st
	backup.Changes = nil
	var b bytes.Buffer
	_, err = NewBackup(&backup).WriteTo(&b)
	require.NoError(t, err)
	restored, err := Decode(b.Bytes(), "backup")
	require.NoError(t, err)
	require.NoError(t, restored.Check())
	assert.Equal(t, st.Accounts, restored.Accounts)
	assert.Equal(t, st.GroupAttributes, restored.GroupAttributes)
}

// The accounts and the groups' attributes follow the groups in groups:
// a count, then each account's uid, flags, six strings, two times and a
// revision; a count, then each group's id, two strings and two times. A
// set_user change is a remove_user's layout and the account; a set_group
// a delete_group's and the attributes.
func TestDirectoryLayout(t *testing.T) {
	st := &State{
		LastRevision: 2,
		Nicknames:    map[membership.UID]string{},
		Groups:       []Group{{ID: "a", Revision: 2}},
		Changes: []membership.Change{
			{Revision: 1, Op: membership.OpSetUser, UIDs: []membership.UID{5}, Account: &account.Account{UserName: "u", DisplayName: "D", Active: true}},
			{Revision: 2, Op: membership.OpSetGroup, GroupID: "a", GroupAttributes: &account.GroupAttributes{DisplayName: "A"}},
		},
		Accounts:        []Account{{UID: 5, Account: account.Account{UserName: "u", Active: true}, Created: time.UnixMilli(1000).UTC(), Revision: 1}},
		GroupAttributes: []GroupAttributes{{ID: "a", Attributes: account.GroupAttributes{DisplayName: "A", ExternalID: "x"}, Modified: time.UnixMilli(-1).UTC()}},
	}
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, st))
	body := buf.Bytes()[8 : buf.Len()-4]
	want := []byte{2, 0, 0, 0, // revisions, nicknames
		1, 1, 'a', 2, 0, 0, // group a: revision 2, no member, no expiry
		2,                                                   // changes
		1, 12, 0, 1, 5, 0, 1, 1, 'u', 0, 1, 'D', 0, 0, 0, 0, // 1: set_user 5: active, "u", "", "D", "", "", ""; no stamp
		2, 14, 1, 'a', 0, 0, 1, 'A', 0, 0, // 2: set_group a: "A", ""; no stamp
		0,                                                // keys
		0,                                                // groups in groups
		1, 5, 1, 1, 'u', 0, 0, 0, 0, 0, 0xd0, 0x0f, 0, 1, // accounts: 5, active, "u", created at 1000 ms, revision 1
		1, 1, 'a', 1, 'A', 1, 'x', 0, 1} // groups' attributes: a, "A", "x", modified at -1 ms
	assert.Equal(t, want, body)
	got, err := Decode(buf.Bytes(), "s.snap")
	require.NoError(t, err)
	assert.Equal(t, st, got)
}

// A snapshot of version 8, as the build before accounts wrote it, is
// read: it has no account, and an op of 12 or more in it is damage. A
// state with accounts cannot be written as version 8.
func TestVersion8IsReadWithoutAccounts(t *testing.T) {
	st := nestingState()
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, st))
	v8 := asVersion(t, buf.Bytes(), 8)
	assert.Equal(t, "GMSN\x08\x00\x00\x00", string(v8[:8]))
	got, err := Decode(v8, "s.snap")
	require.NoError(t, err)
	assert.Equal(t, st, got)
	assert.Equal(t, append(v8[8:len(v8)-4:len(v8)-4], 0, 0), buf.Bytes()[8:buf.Len()-4], "version 9 is version 8 and two counts of none")

	change := []byte{1, 0, 0, 0, 0, 1, 1, 13, 0, 1, 5, 0, 0, 0, 0}
	_, err = Decode(snapshotFile(8, change), "s.snap")
	assert.ErrorContains(t, err, "unknown op 13")
	_, err = Decode(snapshotFile(9, append(change, 0, 0)), "s.snap")
	require.NoError(t, err, "the same, in version 9")

	require.Error(t, encode(&bytes.Buffer{}, directoryState(), 8))
}

// A state that breaks the directory's rules is refused: by Check, or, for
// what no snapshot can hold, by Encode.
func TestCheckRefusesADirectoryThatBreaksTheRules(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(st *State)
		want   string
	}{
		{"two accounts with one user name", func(st *State) {
			st.Accounts[1].Account.UserName = "ALICE@example.com"
		}, "have the userName"},
		{"an inactive user in a group", func(st *State) {
			st.Accounts[0].Account.Active = false
		}, "inactive but in a group"},
		{"attributes of no group", func(st *State) {
			st.GroupAttributes = append(st.GroupAttributes, GroupAttributes{ID: "zz", Attributes: account.GroupAttributes{DisplayName: "Z"}})
		}, "not among the groups"},
		{"an account past the latest revision", func(st *State) {
			st.Accounts[0].Revision = 7
		}, "past the latest"},
		{"a nickname of no one", func(st *State) {
			st.Nicknames[3] = "Carol"
		}, "no account"},
		{"a group of nothing", func(st *State) {
			st.GroupAttributes = nil
		}, "no attributes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := directoryState()
			tt.change(st)
			assert.ErrorContains(t, st.Check(), tt.want)
		})
	}
	for _, tt := range []struct {
		name   string
		change func(st *State)
		want   string
	}{
		{"accounts out of order", func(st *State) {
			st.Accounts[0], st.Accounts[1] = st.Accounts[1], st.Accounts[0]
		}, "out of order"},
		{"an account with a display name", func(st *State) {
			st.Accounts[0].Account.DisplayName = "Alice"
		}, "display name"},
		{"an account with no user name", func(st *State) {
			st.Accounts[0].Account.UserName = ""
		}, "userName is empty"},
		{"a set_user with no account", func(st *State) {
			st.Changes[0].Account = nil
		}, "do not go with it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := directoryState()
			tt.change(st)
			assert.ErrorContains(t, Encode(&bytes.Buffer{}, st), tt.want)
		})
	}
}
