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

// expiriesState returns a state whose groups have members with expiries,
// and whose feed has changes that set, extend and end them, in a batch
// too, and an expiry applied.
func expiriesState() *State {
	at := time.Date(2026, 11, 24, 23, 59, 1, 123e6, time.UTC)
	return &State{
		LastRevision: 5,
		Nicknames:    map[membership.UID]string{1: "Ann"},
		Groups: []Group{
			{ID: "g", Revision: 4, UIDs: []membership.UID{1, 4, 9223372036854775807},
				Expiries: []membership.MemberExpiry{{UID: 1, At: at}, {UID: 9223372036854775807, At: time.UnixMilli(-1).UTC()}}},
			{ID: "h", Revision: 3, UIDs: []membership.UID{2}},
		},
		Changes: []membership.Change{
			{Revision: 1, Op: membership.OpAdd, Time: at, GroupID: "g", UIDs: []membership.UID{1, 4},
				Nicknames: []membership.Member{{UID: 1, Nickname: "Ann"}},
				Expiries:  []membership.MemberExpiry{{UID: 1, At: at.Add(time.Hour)}, {UID: 4, At: at}}},
			{Revision: 2, Op: membership.OpReplace, Time: at, GroupID: "h", UIDs: []membership.UID{2, 3},
				Expiries: []membership.MemberExpiry{{UID: 3, At: at}}},
			{Revision: 3, Op: membership.OpExpire, Time: at.Add(time.Millisecond), GroupID: "h", UIDs: []membership.UID{3},
				Nicknames: []membership.Member{{UID: 3}}},
			{Revision: 4, Op: membership.OpBatch, Time: at, Actor: 7, Changes: []membership.Change{
				{Op: membership.OpAdd, GroupID: "g", Expiries: []membership.MemberExpiry{{UID: 1, At: at}, {UID: 4}}},
				{Op: membership.OpReplace, GroupID: "i", UIDs: []membership.UID{5}, Expiries: []membership.MemberExpiry{{UID: 5, At: at}}},
				{Op: membership.OpRemove, GroupID: "i", UIDs: []membership.UID{5}},
			}},
			{Revision: 5, Op: membership.OpAdd, Time: at, GroupID: "g", UIDs: []membership.UID{9223372036854775807},
				Expiries: []membership.MemberExpiry{{UID: 9223372036854775807, At: time.UnixMilli(-1).UTC()}}},
		},
	}
}

// A snapshot keeps the expiries of the groups' members, and the expiries
// the feed's changes set or made permanent, and the changes of expiries
// applied; a backup keeps the groups' expiries.
func TestExpiriesRoundTrip(t *testing.T) {
	st := expiriesState()
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, st))
	assert.Equal(t, "GMSN\x09\x00\x00\x00", buf.String()[:8], "a snapshot of this build is of version 9")
	got, err := Decode(buf.Bytes(), "s.snap")
	require.NoError(t, err)
	assert.Equal(t, st, got)
	require.NoError(t, got.Check())

	backup := &State{LastRevision: st.LastRevision, Nicknames: st.Nicknames, Groups: st.Groups}
	var b bytes.Buffer
	_, err = NewBackup(backup).WriteTo(&b)
	require.NoError(t, err)
	restored, err := Decode(b.Bytes(), "backup")
	require.NoError(t, err)
	assert.Equal(t, st.Groups, restored.Groups, "a backup holds the expiries")
}

// A group's expiries follow its members: count, then each uid as the
// difference from the one before and the time in milliseconds (signed);
// a change of add or replace has its expiries after its nicknames, 0 for
// a membership made permanent; op 7 is an expiry applied, laid out as a
// remove.
func TestExpiriesLayout(t *testing.T) {
	st := &State{
		LastRevision: 2,
		Groups:       []Group{{ID: "g", Revision: 1, UIDs: []membership.UID{3, 5}, Expiries: []membership.MemberExpiry{{UID: 3, At: time.UnixMilli(1000).UTC()}, {UID: 5, At: time.UnixMilli(-1).UTC()}}}},
		Changes: []membership.Change{
			{Revision: 1, Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{3, 5}, Expiries: []membership.MemberExpiry{{UID: 3, At: time.UnixMilli(1000).UTC()}, {UID: 5}}},
			{Revision: 2, Op: membership.OpExpire, GroupID: "g", UIDs: []membership.UID{5}},
		},
	}
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, st))
	body := buf.Bytes()[8 : buf.Len()-4]
	want := []byte{2, 0, 0, 0, // revisions, nicknames
		1, 1, 'g', 1, 2, 3, 2, 2, 3, 0xd0, 0x0f, 2, 1, // group g: revision 1, members 3 and 5, expiries 3 at 1000 ms and 5 at -1 ms
		2,                                                   // changes
		1, 1, 1, 'g', 2, 3, 2, 0, 2, 3, 0xd0, 0x0f, 2, 0, 0, // 1: add g 3 5, no nickname, expiries 3 at 1000 ms and 5 made permanent, no stamp
		2, 7, 1, 'g', 1, 5, 0, 0, // 2: expire g 5, no nickname, no stamp
		0,    // keys
		0,    // groups in groups
		0, 0} // accounts, groups' attributes
	assert.Equal(t, want, body)
}

// A snapshot of version 6, as the build before expiries wrote it, is
// read: its members have no expiry, and its feed holds no expiry applied.
func TestVersion6IsReadWithNoExpiries(t *testing.T) {
	st := keysState()
	st.Changes = []membership.Change{{Revision: 9, Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{1}}}
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, st))
	v6 := asVersion(t, buf.Bytes(), 6)
	assert.Less(t, len(v6), buf.Len(), "without the expiry counts")
	got, err := Decode(v6, "s.snap")
	require.NoError(t, err)
	assert.Equal(t, st, got)
	assert.Nil(t, got.Groups[0].Expiries)

	// Revisions 1, 0, 0; no nickname; no group; one change, at revision 1:
	// op 7 in a version 6 snapshot is damage.
	expire := []byte{1, 0, 0, 0, 0, 1, 1, 7, 1, 'g', 1, 5, 0, 0, 0}
	_, err = Decode(snapshotFile(6, expire), "s.snap")
	assert.ErrorContains(t, err, "unknown op 7")
	_, err = Decode(snapshotFile(7, slices.Insert(slices.Clone(expire), 4, 0)), "s.snap")
	assert.Error(t, err, "the same in version 7 without its group's expiry count is cut short")
	_, err = Decode(snapshotFile(7, expire), "s.snap")
	require.NoError(t, err, "op 7 in version 7")
}

// Expiries no build writes are refused: a damaged or foreign snapshot.
func TestExpiriesNoBuildWroteAreRefused(t *testing.T) {
	// Revisions 1, 0, 0; no nickname; group g at revision 1, members 3
	// and 5; then its expiries.
	group := []byte{1, 0, 0, 0, 1, 1, 'g', 1, 2, 3, 2}
	for _, tt := range []struct {
		name     string
		expiries []byte
	}{
		{"not ascending", []byte{2, 5, 2, 0, 2}},
		{"twice the same uid", []byte{2, 3, 2, 0, 2}},
		{"no time", []byte{1, 3, 0}},
		{"more than the file", []byte{100, 3, 2}},
		{"cut short", []byte{1, 3}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := append(append(slices.Clone(group), tt.expiries...), 0, 0) // no change, no key
			_, err := Decode(snapshotFile(7, body), "s.snap")
			assert.Error(t, err)
		})
	}
	_, err := Decode(snapshotFile(7, append(slices.Clone(group), 2, 3, 2, 2, 4, 0, 0)), "s.snap")
	require.NoError(t, err, "well formed")

	// Revisions 1, 0, 0; no nickname; no group; one change at revision 1.
	change := []byte{1, 0, 0, 0, 0, 1, 1}
	for _, tt := range []struct {
		name   string
		change []byte
	}{
		{"an add's expiries not ascending", []byte{1, 1, 'g', 0, 0, 2, 5, 0, 0x7b, 0, 0}},
		{"an add's expiries cut short", []byte{1, 1, 'g', 0, 0, 2, 5, 0, 0}},
		{"an add without its expiry count", []byte{1, 1, 'g', 0, 0, 0}},
		{"a remove with expiries", []byte{2, 1, 'g', 1, 5, 0, 1, 5, 0, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(snapshotFile(7, append(slices.Clone(change), tt.change...)), "s.snap")
			assert.Error(t, err)
		})
	}
	_, err = Decode(snapshotFile(7, append(slices.Clone(change), 1, 1, 'g', 0, 0, 2, 5, 0, 1, 0, 0, 0)), "s.snap")
	require.NoError(t, err, "well formed")
}

// Encode refuses expiries that would not read back as they were, or that
// no store keeps: one of a change of another op than add or replace, or a
// member's expiry of no time.
func TestEncodeRefusesExpiriesNoStoreKeeps(t *testing.T) {
	for _, tt := range []struct {
		name string
		st   *State
	}{
		{"a remove with expiries", &State{LastRevision: 1, Changes: []membership.Change{
			{Revision: 1, Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{1}, Expiries: []membership.MemberExpiry{{UID: 1}}}}}},
		{"an expire with expiries", &State{LastRevision: 1, Changes: []membership.Change{
			{Revision: 1, Op: membership.OpExpire, GroupID: "g", UIDs: []membership.UID{1}, Expiries: []membership.MemberExpiry{{UID: 1}}}}}},
		{"a member's expiry of no time", &State{LastRevision: 1, Groups: []Group{
			{ID: "g", Revision: 1, UIDs: []membership.UID{1}, Expiries: []membership.MemberExpiry{{UID: 1}}}}}},
		{"a member's expiry at 1970", &State{LastRevision: 1, Groups: []Group{
			{ID: "g", Revision: 1, UIDs: []membership.UID{1}, Expiries: []membership.MemberExpiry{{UID: 1, At: time.UnixMilli(0)}}}}}},
		{"a group's expiries not ascending", &State{LastRevision: 1, Groups: []Group{
			{ID: "g", Revision: 1, UIDs: []membership.UID{1, 2}, Expiries: []membership.MemberExpiry{{UID: 2, At: time.UnixMilli(5)}, {UID: 1, At: time.UnixMilli(5)}}}}}},
		{"a change's expiries not ascending", &State{LastRevision: 1, Changes: []membership.Change{
			{Revision: 1, Op: membership.OpAdd, GroupID: "g", Expiries: []membership.MemberExpiry{{UID: 2}, {UID: 2}}}}}},
		{"an expiry of uid 0", &State{LastRevision: 1, Changes: []membership.Change{
			{Revision: 1, Op: membership.OpReplace, GroupID: "g", Expiries: []membership.MemberExpiry{{UID: 0}}}}}},
		{"an expire in a batch", &State{LastRevision: 1, Changes: []membership.Change{
			{Revision: 1, Op: membership.OpBatch, Changes: []membership.Change{{Op: membership.OpExpire, GroupID: "g", UIDs: []membership.UID{1}}}}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Error(t, Encode(&bytes.Buffer{}, tt.st))
		})
	}
}

// Check refuses an expiry of a user who is not a member of its group.
func TestCheckRefusesExpiriesThatBreakTheRules(t *testing.T) {
	st := expiriesState()
	st.Groups[1].Expiries = []membership.MemberExpiry{{UID: 3, At: time.UnixMilli(5).UTC()}}
	assert.ErrorContains(t, st.Check(), "not a member")
}
