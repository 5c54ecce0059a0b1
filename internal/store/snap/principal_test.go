package snap

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// principalsState returns a state whose changes and keys carry principals,
// one key under two principals and none.
func principalsState() *State {
	st := keysState()
	st.Keys[0].Principal = "sync-job"
	same := st.Keys[0]
	same.Principal, same.Fingerprint = "dashboard", membership.Fingerprint{15: 1}
	none := st.Keys[0]
	none.Principal = ""
	st.Keys = append(st.Keys, same, none)
	st.Changes = []membership.Change{{Revision: 9, Op: membership.OpAdd, Time: time.UnixMilli(5).UTC(), Principal: "sync-job", GroupID: "g",
		UIDs: []membership.UID{1}}}
	return st
}

// A snapshot and a backup keep each change's principal and each key's;
// the same key under two principals is two keys.
func TestPrincipalsRoundTrip(t *testing.T) {
	st := principalsState()
	require.NoError(t, st.Check())
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, st))
	got, err := Decode(buf.Bytes(), "s.snap")
	require.NoError(t, err)
	assert.Equal(t, st, got)

	backup := &bytes.Buffer{}
	_, err = NewBackup(&State{LastRevision: st.LastRevision, Nicknames: st.Nicknames, Groups: st.Groups, Keys: st.Keys}).WriteTo(backup)
	require.NoError(t, err)
	got, err = Decode(backup.Bytes(), "b.backup")
	require.NoError(t, err)
	assert.Equal(t, st.Keys, got.Keys, "a backup keeps the keys' principals")
}

// A snapshot of version 8, as the build before principals wrote it, is
// read: its changes and keys have no principal, and a principal's flag in
// it is damage. A state with a principal cannot be written as version 8.
func TestVersion8IsReadWithoutPrincipals(t *testing.T) {
	st := keysState()
	st.Changes = []membership.Change{{Revision: 9, Op: membership.OpAdd, Time: time.UnixMilli(5).UTC(), Actor: 4, GroupID: "g",
		UIDs: []membership.UID{1}}}
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, st))
	v8 := asVersion(t, buf.Bytes(), 8)
	assert.Equal(t, "GMSN\x08\x00\x00\x00", string(v8[:8]))
	got, err := Decode(v8, "s.snap")
	require.NoError(t, err)
	assert.Equal(t, st, got)

	// Revisions 1, 0, 0; no nickname or group; one change, an add at
	// revision 1 (uid 1, no nickname, no expiry) stamped with a principal;
	// no key, no nesting.
	change := []byte{1, 0, 0, 0, 0, 1, 1, 1, 1, 'g', 1, 1, 0, 0, 4, 3, 'o', 'p', 's', 0, 0}
	_, err = Decode(snapshotFile(8, change), "s.snap")
	assert.ErrorContains(t, err, "unknown stamp flags 0x4")
	got, err = Decode(snapshotFile(9, append(slices.Clone(change), 0, 0)), "s.snap") // no account, no group's attributes
	require.NoError(t, err, "the same, in version 9")
	assert.Equal(t, "ops", got.Changes[0].Principal)

	assert.ErrorContains(t, encode(&bytes.Buffer{}, principalsState(), 8), "cannot hold")
	keyOnly := keysState()
	keyOnly.Keys[1].Principal = "ops"
	assert.ErrorContains(t, encode(&bytes.Buffer{}, keyOnly, 8), "cannot hold")
}

// A principal no build writes is refused: a damaged or foreign snapshot.
func TestPrincipalsNoBuildWroteAreRefused(t *testing.T) {
	// Revisions 1, 0, 0; no nickname or group; one change, an add at
	// revision 1 (uid 1, no nickname, no expiry), then its stamp.
	head := []byte{1, 0, 0, 0, 0, 1, 1, 1, 1, 'g', 1, 1, 0, 0}
	for _, tt := range []struct {
		name  string
		stamp []byte
	}{
		{"an empty principal", []byte{4, 0}},
		{"a principal with a space", []byte{4, 3, 'o', ' ', 's'}},
		{"a principal too long", append([]byte{4, 65}, bytes.Repeat([]byte{'p'}, 65)...)},
		{"a principal cut short", []byte{4, 3, 'o'}},
		{"an unknown flag", []byte{8}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := append(append(slices.Clone(head), tt.stamp...), 0, 0, 0, 0) // no key, nesting, account or group's attributes
			_, err := Decode(snapshotFile(9, body), "s.snap")
			assert.Error(t, err)
		})
	}

	// Revisions 1, 0, 0; no nickname, group or change; one key.
	key := func(principal string) []byte {
		b := append([]byte{1, 0, 0, 0, 0, 0, 1, 1, 'k', byte(len(principal))}, principal...)
		b = append(b, make([]byte, 16)...)
		return append(b, 2, 0, 1, 1, 0, 0, 1, 0, 0, 0) // time, kind, revision, one result; no nesting, account or group's attributes
	}
	_, err := Decode(snapshotFile(9, key("ops")), "s.snap")
	require.NoError(t, err, "a well formed key")
	_, err = Decode(snapshotFile(9, key("o s")), "s.snap")
	assert.Error(t, err, "a key's principal with a space")
	assert.Error(t, encode(&bytes.Buffer{}, &State{Keys: []Key{{Key: "k", Principal: "a\n", Results: []membership.Result{{}}}}}, 9),
		"Encode refuses a principal that would not read back")
}

// Check refuses a key that is there twice for one principal.
func TestCheckRefusesAPrincipalsKeyTwice(t *testing.T) {
	st := principalsState()
	st.Keys[4].Principal = "dashboard"
	assert.ErrorContains(t, st.Check(), `of principal "dashboard" is there twice`)
}
