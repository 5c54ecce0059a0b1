package snap

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// A snapshot keeps the feed's changes of every op as they were, with
// their times and actors, or without.
func TestChangesOfEveryOpRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 24, 23, 59, 1, 123e6, time.UTC)
	st := &State{
		LastRevision:      6,
		NicknamesRevision: 3,
		RemovedRevision:   5,
		Nicknames:         map[membership.UID]string{1: "Ann"},
		Groups:            []Group{{ID: "g", Revision: 3, UIDs: []membership.UID{1, 4}}},
		Changes: []membership.Change{
			{Revision: 1, Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{1, 2}, Nicknames: []membership.Member{{UID: 1, Nickname: "Al"}}},
			{Revision: 2, Op: membership.OpRemove, Time: at, GroupID: "g", UIDs: []membership.UID{2}},
			{Revision: 3, Op: membership.OpReplace, Time: at, Actor: 7, GroupID: "g", UIDs: []membership.UID{1, 4}, Nicknames: []membership.Member{{UID: 1, Nickname: "Ann"}}},
			{Revision: 4, Op: membership.OpReplace, Actor: 9223372036854775807, GroupID: "h"},
			{Revision: 5, Op: membership.OpDeleteGroup, Time: time.UnixMilli(0).UTC(), Actor: 1, GroupID: "team/b"},
			{Revision: 6, Op: membership.OpRemoveUser, Time: at.Add(time.Millisecond), UIDs: []membership.UID{9223372036854775807}},
		},
	}
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, st))
	got, err := Decode(buf.Bytes(), "s.snap")
	require.NoError(t, err)
	assert.Equal(t, st, got)
	assert.Equal(t, "GMSN\x04\x00\x00\x00", buf.String()[:8], "a snapshot that may hold stamps is of version 4")
}

// A change no build writes is refused: a damaged or foreign snapshot.
func TestChangesThatBreakTheirOpsRulesAreRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    membership.Change
	}{
		{"remove_user in a group", membership.Change{Op: membership.OpRemoveUser, GroupID: "g", UIDs: []membership.UID{1}}},
		{"remove_user of two users", membership.Change{Op: membership.OpRemoveUser, UIDs: []membership.UID{1, 2}}},
		{"remove_user of no one", membership.Change{Op: membership.OpRemoveUser}},
		{"delete_group naming users", membership.Change{Op: membership.OpDeleteGroup, GroupID: "g", UIDs: []membership.UID{1}}},
		{"delete_group naming nicknames", membership.Change{Op: membership.OpDeleteGroup, GroupID: "g", Nicknames: []membership.Member{{UID: 1}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.Revision = 1
			st := &State{LastRevision: 1, Changes: []membership.Change{tt.c}}
			var buf bytes.Buffer
			require.NoError(t, Encode(&buf, st))
			_, err := Decode(buf.Bytes(), "s.snap")
			assert.Error(t, err)
		})
	}
}

// A version 2 snapshot, as the build before the new ops wrote it, is read.
func TestVersion2IsRead(t *testing.T) {
	body := []byte{
		2, 1, 0, // revisions: latest 2, nicknames 1, removed 0
		1, 7, 2, 'A', 'l', // nicknames: 7 Al
		1, 1, 'g', 2, 2, 3, 4, // group g at revision 2: 3, 7
		2,                                     // changes
		1, 1, 1, 'g', 1, 7, 1, 7, 2, 'A', 'l', // 1: add g 7, nickname 7 Al
		2, 1, 1, 'g', 1, 3, 0, // 2: add g 3
	}
	data := append([]byte("GMSN\x02\x00\x00\x00"), body...)
	data = binary.LittleEndian.AppendUint32(data, crc32.Checksum(body, castagnoli))
	st, err := Decode(data, "s.snap")
	require.NoError(t, err)
	assert.Equal(t, &State{
		LastRevision:      2,
		NicknamesRevision: 1,
		Nicknames:         map[membership.UID]string{7: "Al"},
		Groups:            []Group{{ID: "g", Revision: 2, UIDs: []membership.UID{3, 7}}},
		Changes: []membership.Change{
			{Revision: 1, Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{7}, Nicknames: []membership.Member{{UID: 7, Nickname: "Al"}}},
			{Revision: 2, Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{3}},
		},
	}, st)
}

// A version 3 snapshot, as the build before stamps wrote it, is read: its
// changes have no time and no actor.
func TestVersion3IsRead(t *testing.T) {
	body := []byte{
		2, 0, 2, // revisions: latest 2, nicknames 0, removed 2
		0,                     // nicknames
		0,                     // groups
		2,                     // changes
		1, 1, 1, 'g', 1, 7, 0, // 1: add g 7
		2, 4, 1, 'g', 0, 0, // 2: delete_group g
	}
	data := append([]byte("GMSN\x03\x00\x00\x00"), body...)
	data = binary.LittleEndian.AppendUint32(data, crc32.Checksum(body, castagnoli))
	st, err := Decode(data, "s.snap")
	require.NoError(t, err)
	assert.Equal(t, []membership.Change{
		{Revision: 1, Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{7}},
		{Revision: 2, Op: membership.OpDeleteGroup, GroupID: "g"},
	}, st.Changes)
}

// A stamp no build writes is refused.
func TestStampsNoBuildWroteAreRefused(t *testing.T) {
	for _, tt := range []struct {
		name  string
		stamp []byte
	}{
		{"unknown flags", []byte{4}},
		{"an actor of 0", []byte{2, 0}},
		{"an actor beyond the uids", []byte{2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"a time cut short", []byte{1, 0x80}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := append([]byte{1, 0, 0, 0, 0, 1, 1, 1, 1, 'g', 1, 7, 0}, tt.stamp...)
			data := append([]byte("GMSN\x04\x00\x00\x00"), body...)
			data = binary.LittleEndian.AppendUint32(data, crc32.Checksum(body, castagnoli))
			_, err := Decode(data, "s.snap")
			assert.Error(t, err)
		})
	}
}

// Version 2 had no other ops than add and remove: an op of version 3 in a
// version 2 file is damage.
func TestVersion2HasOnlyAddAndRemove(t *testing.T) {
	body := []byte{1, 0, 1, 0, 0, 1, 1, 4, 1, 'g', 0, 0}
	data := append([]byte("GMSN\x02\x00\x00\x00"), body...)
	data = binary.LittleEndian.AppendUint32(data, crc32.Checksum(body, castagnoli))
	_, err := Decode(data, "s.snap")
	assert.Error(t, err)
}
