package snap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/scope"
)

// A snapshot keeps the feed's changes of every op as they were, with
// their times and actors, or without.
func TestChangesOfEveryOpRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 24, 23, 59, 1, 123e6, time.UTC)
	st := &State{
		LastRevision:      7,
		NicknamesRevision: 3,
		RemovedRevision:   5,
		Nicknames:         map[membership.UID]string{1: "Ann"},
		Groups:            []Group{{ID: "g", Revision: 3, UIDs: []membership.UID{1, 4}}},
		Changes: []membership.Change{
			{Revision: 1, Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{1, 2}, Nicknames: []membership.Member{{UID: 1, Nickname: "Al"}}},
			{Revision: 2, Op: membership.OpRemove, Time: at, GroupID: "g", UIDs: []membership.UID{2}},
			{Revision: 3, Op: membership.OpReplace, Time: at, Actor: 7, Principal: "sync-job", GroupID: "g", UIDs: []membership.UID{1, 4},
				Nicknames: []membership.Member{{UID: 1, Nickname: "Ann"}}},
			{Revision: 4, Op: membership.OpReplace, Actor: 9223372036854775807, GroupID: "h"},
			{Revision: 5, Op: membership.OpDeleteGroup, Time: time.UnixMilli(0).UTC(), Actor: 1, Principal: "sync-job", GroupID: "team/b"},
			{Revision: 6, Op: membership.OpRemoveUser, Time: at.Add(time.Millisecond), UIDs: []membership.UID{9223372036854775807}},
			{Revision: 7, Op: membership.OpBatch, Time: at, Actor: 3, Principal: strings.Repeat("p", scope.MaxPrincipalBytes), Changes: []membership.Change{
				{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{4}},
				{Op: membership.OpAdd, GroupID: "h", UIDs: []membership.UID{4, 5}, Nicknames: []membership.Member{{UID: 5, Nickname: "Eve"}}},
				{Op: membership.OpReplace, GroupID: "i", UIDs: []membership.UID{1}},
				{Op: membership.OpDeleteGroup, GroupID: "team/b"},
			}},
		},
	}
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, st))
	got, err := Decode(buf.Bytes(), "s.snap")
	require.NoError(t, err)
	assert.Equal(t, st, got)
	assert.Equal(t, "GMSN\x09\x00\x00\x00", buf.String()[:8], "a snapshot of this build is of version 9")
	assert.Same(t, unsafe.StringData(got.Changes[2].Principal), unsafe.StringData(got.Changes[4].Principal), "principals are interned")
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

// Encode refuses a batch that no store records: one of no change, or of a
// change a batch does not make.
func TestEncodeRefusesABatchNoStoreRecords(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    membership.Change
	}{
		{"a batch of no change", membership.Change{Op: membership.OpBatch}},
		{"a remove_user in a batch", membership.Change{Op: membership.OpBatch, Changes: []membership.Change{{Op: membership.OpRemoveUser, UIDs: []membership.UID{1}}}}},
		{"a batch in a batch", membership.Change{Op: membership.OpBatch, Changes: []membership.Change{{Op: membership.OpBatch, Changes: []membership.Change{{Op: membership.OpDeleteGroup, GroupID: "g"}}}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.Revision = 1
			err := Encode(&bytes.Buffer{}, &State{LastRevision: 1, Changes: []membership.Change{tt.c}})
			assert.Error(t, err)
		})
	}
}

// snapshotFile returns the bytes of a snapshot file of version with body.
func snapshotFile(version byte, body []byte) []byte {
	data := append([]byte("GMSN"), version, 0, 0, 0)
	data = append(data, body...)
	return binary.LittleEndian.AppendUint32(data, crc32.Checksum(body, castagnoli))
}

// A batch's changes are checked as a change of their op is, and a batch
// holds at least one, none of them a batch or a remove_user; the batch has
// one stamp, its changes none.
func TestBatchesThatBreakTheRulesAreRefused(t *testing.T) {
	// Revisions 1, 0, 0; no nickname; no group; one change, at revision 1.
	head := []byte{1, 0, 0, 0, 0, 1, 1}
	for _, tt := range []struct {
		name   string
		change []byte
	}{
		{"a batch of no change", []byte{6, 0, 0}},
		{"a batch in a batch", []byte{6, 1, 6, 1, 4, 1, 'g', 0, 0, 0}},
		{"a remove_user in a batch", []byte{6, 1, 5, 0, 1, 1, 0, 0}},
		{"a delete_group naming users", []byte{6, 1, 4, 1, 'g', 1, 1, 0, 0}},
		{"a change of no group", []byte{6, 1, 1, 0, 1, 1, 0, 0}},
		{"more changes than the file", []byte{6, 100, 4, 1, 'g', 0, 0, 0}},
		{"cut short", []byte{6, 2, 4, 1, 'g', 0, 0, 0}},
		{"a stamp for each change", []byte{6, 1, 4, 1, 'g', 0, 0, 0, 0}},
		{"no stamp", []byte{6, 1, 4, 1, 'g', 0, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(snapshotFile(5, append(slices.Clone(head), tt.change...)), "s.snap")
			assert.Error(t, err)
		})
	}
	st, err := Decode(snapshotFile(5, append(slices.Clone(head), 6, 1, 4, 1, 'g', 0, 0, 2, 7)), "s.snap")
	require.NoError(t, err, "the same, well formed")
	assert.Equal(t, []membership.Change{{Revision: 1, Op: membership.OpBatch, Actor: 7, Changes: []membership.Change{{Op: membership.OpDeleteGroup, GroupID: "g"}}}}, st.Changes)
}

// A version 4 snapshot, as the build before batches wrote it, is read,
// and holds no batch: op 6 in it is damage.
func TestVersion4IsReadWithoutBatches(t *testing.T) {
	st := &State{
		LastRevision: 2,
		Nicknames:    map[membership.UID]string{},
		Groups:       []Group{{ID: "g", Revision: 1, UIDs: []membership.UID{1}}},
		Changes: []membership.Change{
			{Revision: 1, Op: membership.OpReplace, GroupID: "g", UIDs: []membership.UID{1}},
			{Revision: 2, Op: membership.OpDeleteGroup, GroupID: "h"},
		},
	}
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, st))
	v4 := asVersion(t, buf.Bytes(), 4) // a state without batches is encoded as version 4 encoded it
	got, err := Decode(v4, "s.snap")
	require.NoError(t, err)
	assert.Equal(t, st, got)

	batch := []byte{1, 0, 0, 0, 0, 1, 1, 6, 1, 4, 1, 'g', 0, 0, 0}
	_, err = Decode(snapshotFile(4, batch), "s.snap")
	assert.ErrorContains(t, err, "unknown op 6")
}

// asVersion returns data, a snapshot, as version (4 on) wrote the state
// it holds, which that version must be able to hold.
func asVersion(t *testing.T, data []byte, version uint32) []byte {
	t.Helper()
	st, err := Decode(data, "s.snap")
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, encode(&buf, st, version))
	return buf.Bytes()
}

// keysState returns a state that remembers a write's key, a batch's, and
// an empty batch's.
func keysState() *State {
	at := time.Date(2026, 11, 24, 23, 59, 1, 123e6, time.UTC)
	return &State{
		LastRevision: 9,
		Nicknames:    map[membership.UID]string{},
		Groups:       []Group{{ID: "g", Revision: 9, UIDs: []membership.UID{1}}},
		Changes:      []membership.Change{},
		Keys: []Key{
			{Key: "k1", Fingerprint: membership.Fingerprint{1, 2, 3, 15: 0xff}, Time: at,
				Results: []membership.Result{{Count: 2, Removed: 1, Revision: 7}}, Revision: 7},
			{Key: "batch ~!", Fingerprint: membership.Fingerprint{0: 9}, Time: at.Add(time.Millisecond), Batch: true,
				Results: []membership.Result{{Count: 1, Revision: 9}, {Revision: 9}}, Revision: 9},
			{Key: string(bytes.Repeat([]byte{'x'}, membership.MaxIdempotencyKeyBytes)), Fingerprint: membership.Fingerprint{4: 1},
				Time: time.UnixMilli(-1).UTC(), Batch: true, Results: []membership.Result{}, Revision: 3},
		},
	}
}

// A snapshot keeps the Idempotency-Keys, oldest first, with their
// fingerprints, times and results.
func TestKeysRoundTrip(t *testing.T) {
	st := keysState()
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, st))
	got, err := Decode(buf.Bytes(), "s.snap")
	require.NoError(t, err)
	assert.Equal(t, st, got)
	require.NoError(t, got.Check())
	backup := &bytes.Buffer{}
	_, err = NewBackup(st).WriteTo(backup)
	require.NoError(t, err)
	assert.Equal(t, buf.Bytes(), backup.Bytes(), "a backup holds them too")
}

// A key is its string, its principal, its fingerprint, its time, a byte
// that says whose it is, its revision and its results, after the changes.
func TestKeysLayout(t *testing.T) {
	st := &State{LastRevision: 1, Keys: []Key{{Key: "k", Fingerprint: membership.Fingerprint{15: 7}, Time: time.UnixMilli(1000).UTC(),
		Results: []membership.Result{{Count: 2, Removed: 3, Revision: 1}}, Revision: 1}}}
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, st))
	body := buf.Bytes()[8 : buf.Len()-4]
	want := []byte{1, 0, 0, 0, 0, 0, // revisions, nicknames, groups, changes
		1, 1, 'k', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0xd0, 0x0f, 0, 1, 1, 2, 3, 1,
		0,    // groups in groups
		0, 0} // accounts, groups' attributes
	assert.Equal(t, want, body, "a key of no principal")

	st.Keys[0].Principal = "ops"
	buf.Reset()
	require.NoError(t, Encode(&buf, st))
	body = buf.Bytes()[8 : buf.Len()-4]
	want = []byte{1, 0, 0, 0, 0, 0,
		1, 1, 'k', 3, 'o', 'p', 's', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0xd0, 0x0f, 0, 1, 1, 2, 3, 1,
		0, 0, 0}
	assert.Equal(t, want, body, "a key of principal ops")
	got, err := Decode(buf.Bytes(), "s.snap")
	require.NoError(t, err)
	assert.Equal(t, st.Keys, got.Keys)
}

// A snapshot of version 5, as the build before Idempotency-Keys wrote it,
// is read: it remembers no key.
func TestVersion5IsReadWithNoKeys(t *testing.T) {
	st := &State{
		LastRevision: 1,
		Nicknames:    map[membership.UID]string{},
		Groups:       []Group{{ID: "g", Revision: 1, UIDs: []membership.UID{1}}},
		Changes:      []membership.Change{{Revision: 1, Op: membership.OpBatch, Changes: []membership.Change{{Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{1}}}}},
	}
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, st))
	v5 := asVersion(t, buf.Bytes(), 5)
	got, err := Decode(v5, "s.snap")
	require.NoError(t, err)
	assert.Equal(t, st, got)
	assert.Nil(t, got.Keys)

	withKey := append(v5[8:len(v5)-4:len(v5)-4], 1, 1, 'k')
	_, err = Decode(snapshotFile(5, withKey), "s.snap")
	assert.ErrorContains(t, err, "trailing bytes", "a version 5 snapshot has no keys")
}

// A key no build writes is refused: a damaged or foreign snapshot.
func TestKeysNoBuildWroteAreRefused(t *testing.T) {
	// Revisions 1, 0, 0; no nickname, group or change; one key.
	head := []byte{1, 0, 0, 0, 0, 0, 1}
	fp := make([]byte, 16)
	key := func(k string, kind byte, results ...byte) []byte {
		b := append([]byte{byte(len(k))}, k...)
		b = append(b, fp...)
		b = append(b, 2, kind, 1) // time, kind, revision
		return append(b, results...)
	}
	for _, tt := range []struct {
		name string
		key  []byte
	}{
		{"an empty key", key("", 0, 1, 0, 0, 1)},
		{"a key with a control character", key("a\nb", 0, 1, 0, 0, 1)},
		{"a key that is not ASCII", key("ü", 0, 1, 0, 0, 1)},
		{"a write's key of two results", key("k", 0, 2, 0, 0, 1, 0, 0, 1)},
		{"a write's key of no result", key("k", 0, 0)},
		{"an unknown kind", key("k", 2, 1, 0, 0, 1)},
		{"more results than the file", key("k", 1, 100, 0, 0, 1)},
		{"cut short", key("k", 0, 1, 0, 0)},
		{"a fingerprint cut short", []byte{1, 'k', 1, 2, 3}},
		{"trailing bytes", key("k", 0, 1, 0, 0, 1, 0)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(snapshotFile(6, append(slices.Clone(head), tt.key...)), "s.snap")
			assert.Error(t, err)
		})
	}
	_, err := Decode(snapshotFile(6, append(slices.Clone(head), key("k", 0, 1, 0, 0, 1)...)), "s.snap")
	require.NoError(t, err, "the same, well formed")
	head[len(head)-1] = 2
	_, err = Decode(snapshotFile(6, append(slices.Clone(head), key("k", 0, 1, 0, 0, 1)...)), "s.snap")
	assert.Error(t, err, "more keys than the file")
}

// Encode refuses a key that would not read back.
func TestEncodeRefusesAKeyNoStoreRemembers(t *testing.T) {
	for _, tt := range []struct {
		name string
		key  Key
	}{
		{"an empty key", Key{Results: []membership.Result{{}}}},
		{"a key too long", Key{Key: string(bytes.Repeat([]byte{'x'}, membership.MaxIdempotencyKeyBytes+1)), Results: []membership.Result{{}}}},
		{"a write's key of two results", Key{Key: "k", Results: []membership.Result{{}, {}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Encode(&bytes.Buffer{}, &State{Keys: []Key{tt.key}})
			assert.Error(t, err)
		})
	}
}

// Check refuses keys that no store remembers: twice the same, or of a
// revision past the latest.
func TestCheckRefusesKeysThatBreakTheRules(t *testing.T) {
	st := keysState()
	st.Keys[1].Key = st.Keys[0].Key
	assert.ErrorContains(t, st.Check(), "twice")
	st = keysState()
	st.Keys[0].Revision = st.LastRevision + 1
	assert.ErrorContains(t, st.Check(), "past the latest")
	st = keysState()
	st.Keys[1].Results[1].Revision = st.LastRevision + 1
	assert.ErrorContains(t, st.Check(), "past the latest")
}

// TestAListMakesRoomOnlyForWhatItReads checks that a count as large as
// the bytes left, of items far larger in memory than their least bytes
// (as an account is), reserves no room for all of them before the first
// fails to read: a damaged snapshot is refused, not a reason to run out of
// memory.
func TestAListMakesRoomOnlyForWhatItReads(t *testing.T) {
	const left = 1 << 20
	data := binary.AppendUvarint(nil, left)
	data = append(data, make([]byte, left)...)
	type large struct{ _ [256]byte }
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readList(newReader(data), 1, "too many", func() (large, error) { return large{}, errors.New("damaged") })
	runtime.ReadMemStats(&after)
	require.EqualError(t, err, "damaged")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "bytes allocated for a list of %d items of 256 bytes that failed at its first", left)
}
