package record

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/writecodec"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/scope"
)

// batches returns batches of every op a batch takes, with and without
// preconditions, and stamps: a write's becomes its batch's.
func batches() map[string]*Batch {
	out := map[string]*Batch{}
	var all []membership.Write
	for name, e := range writes() {
		if !writecodec.BatchTakes(e.Op) {
			continue
		}
		w := membership.Write(*e)
		w.Time, w.Actor, w.Principal, w.Idem = time.Time{}, 0, "", membership.Idempotency{}
		out[name] = &Batch{Writes: []membership.Write{w}, Time: e.Time, Actor: e.Actor, Principal: e.Principal, Idem: e.Idem}
		all = append(all, w)
	}
	out["all of them"] = &Batch{Writes: all, Time: time.UnixMilli(1764028800123).UTC(), Actor: 42}
	out["all of them, keyed"] = &Batch{Writes: all, Time: time.UnixMilli(1764028800123).UTC(), Actor: 42, Idem: testIdem("batch-1")}
	out["all of them, with a bound on depth"] = &Batch{Writes: all, Time: time.UnixMilli(1764028800123).UTC(), Actor: 42, MaxDepth: 32}
	out["all of them, keyed, with a bound on depth"] = &Batch{Writes: all, Time: time.UnixMilli(1764028800123).UTC(), Idem: testIdem("batch-2"), MaxDepth: membership.MaxMaxDepth}
	out["all of them, keyed, with a principal and a bound on depth"] = &Batch{Writes: all, Time: time.UnixMilli(1764028800123).UTC(),
		Principal: "sync-job", Idem: testIdem("batch-3"), MaxDepth: 7}
	out["all of them, with bounds on depth and ancestors"] = &Batch{Writes: all, Time: time.UnixMilli(1764028800123).UTC(), MaxDepth: 32, MaxAncestors: 1000}
	out["all of them, with a bound on ancestors alone"] = &Batch{Writes: all, Time: time.UnixMilli(1764028800123).UTC(), MaxAncestors: membership.MaxMaxAncestors}
	out["keyed, of no write"] = &Batch{Writes: []membership.Write{}, Time: time.UnixMilli(1764028800123).UTC(), Idem: testIdem("empty")}
	return out
}

// A batch's key follows its stamp, flagged in its op byte, before its
// writes; a keyed batch may have no write (it is remembered all the same).
func TestBatchRecordKey(t *testing.T) {
	remove := &Write{Op: membership.OpRemove, GroupID: "h", UIDs: []membership.UID{1}}
	c := &Batch{Writes: []membership.Write{membership.Write(*remove)}, Time: time.UnixMilli(0).UTC(),
		Idem: membership.Idempotency{Key: "k", Fingerprint: membership.Fingerprint{15: 7}}}
	want := append([]byte{0x26, 0, 0, 1, 'k'}, fingerprint7...)
	want = append(want, 1, 2, 1, 'h', 1, 1)
	assert.Equal(t, want, appendBatch(nil, c))
	got, err := Decode(want)
	require.NoError(t, err)
	assert.Equal(t, c, got)

	c.Writes = []membership.Write{}
	want = append(append([]byte{0x26, 0, 0, 1, 'k'}, fingerprint7...), 0)
	assert.Equal(t, want, appendBatch(nil, c))
	got, err = Decode(want)
	require.NoError(t, err)
	assert.Equal(t, c, got)
}

func TestBatchRecordRoundTrip(t *testing.T) {
	for name, c := range batches() {
		t.Run(name, func(t *testing.T) {
			payload := appendBatch(nil, c)
			got, err := Decode(payload)
			require.NoError(t, err)
			assert.Equal(t, c, got)
			assert.LessOrEqual(t, int64(len(payload)), c.Cost(), "the cost counts the record")
		})
	}
}

// A batch's principal follows its stamp, before its key, flagged 0x10 in
// its op byte.
func TestBatchRecordPrincipal(t *testing.T) {
	remove := membership.Write{Op: membership.OpRemove, GroupID: "h", UIDs: []membership.UID{1}}
	c := &Batch{Writes: []membership.Write{remove}, Time: time.UnixMilli(0).UTC(), Principal: "ops"}
	want := []byte{0x16, 0, 0, 3, 'o', 'p', 's', 1, 2, 1, 'h', 1, 1}
	assert.Equal(t, want, appendBatch(nil, c))
	got, err := Decode(want)
	require.NoError(t, err)
	assert.Equal(t, c, got)

	c.Idem = membership.Idempotency{Key: "k", Fingerprint: membership.Fingerprint{15: 7}}
	want = append(append([]byte{0x36, 0, 0, 3, 'o', 'p', 's', 1, 'k'}, fingerprint7...), 1, 2, 1, 'h', 1, 1)
	assert.Equal(t, want, appendBatch(nil, c))
	got, err = Decode(want)
	require.NoError(t, err)
	assert.Equal(t, c, got)
}

// A batch's bound on depth follows its key, flagged 0x40 in its op byte;
// its nesting writes keep their own as single writes do.
func TestBatchRecordDepth(t *testing.T) {
	add := membership.Write{Op: membership.OpAddGroups, GroupID: "g", Subgroups: []membership.Subgroup{{GroupID: "h"}}}
	c := &Batch{Writes: []membership.Write{add}, Time: time.UnixMilli(0).UTC(), MaxDepth: 32}
	want := []byte{0x46, 0, 0, 32, 1, 8, 1, 'g', 1, 1, 'h', 0, 0}
	assert.Equal(t, want, appendBatch(nil, c))
	got, err := Decode(want)
	require.NoError(t, err)
	assert.Equal(t, c, got)

	c.Idem = membership.Idempotency{Key: "k", Fingerprint: membership.Fingerprint{15: 7}}
	want = append(append([]byte{0x66, 0, 0, 1, 'k'}, fingerprint7...), 32, 1, 8, 1, 'g', 1, 1, 'h', 0, 0)
	assert.Equal(t, want, appendBatch(nil, c))
	got, err = Decode(want)
	require.NoError(t, err)
	assert.Equal(t, c, got)
}

// A batch's writes are laid out as the records of their ops: a batch of
// one add is op 6, a count of 1, and the add's record.
func TestBatchRecordHoldsItsWritesAsRecords(t *testing.T) {
	add := &Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}}, If: membership.Precondition{Empty: true}}
	remove := &Write{Op: membership.OpRemove, GroupID: "h", UIDs: []membership.UID{1}}
	want := append([]byte{opBatch, 0, 0, 2}, appendWrite(nil, add)...)
	want = append(want, appendWrite(nil, remove)...)
	got := appendBatch(nil, &Batch{Writes: []membership.Write{membership.Write(*add), membership.Write(*remove)}, Time: time.UnixMilli(0).UTC()})
	assert.Equal(t, want, got)
	assert.Equal(t, []byte{6, 0, 0, 2, 0x81, 1, 'g', 1, 1, 0, 2, 0, 2, 1, 'h', 1, 1}, got, "with a stamp of the time 0 and no actor")
}

func TestBatchRecordRefusesWhatNoBuildWrote(t *testing.T) {
	for _, tt := range []struct {
		name    string
		payload []byte
	}{
		{"a batch of no write", []byte{6, 0, 0, 0}},
		{"no stamp", []byte{6}},
		{"no count", []byte{6, 0, 0}},
		{"a batch with a precondition flag", []byte{0x86, 0, 0, 1, 4, 1, 'g'}},
		{"a batch with a bound on depth of 0", []byte{0x46, 0, 0, 0, 1, 4, 1, 'g'}},
		{"a batch with a bound on depth past the largest", []byte{0x46, 0, 0, 0xe9, 0x07, 1, 4, 1, 'g'}},
		{"a batch with a bound on depth cut short", []byte{0x46, 0, 0, 0x80}},
		{"a batch with a bound on ancestors past the largest", []byte{0x46, 0, 0, 0x80, 0x90, 0x80, 0x80, 0x08, 1, 4, 1, 'g'}},
		{"an expire_groups in a batch", []byte{6, 0, 0, 1, 11, 1, 'g', 1, 1, 'h', 0, 0}},
		{"a batch in a batch", []byte{6, 0, 0, 1, 6, 0, 0, 1, 4, 1, 'g'}},
		{"a remove_user in a batch", []byte{6, 0, 0, 1, 5, 0, 1, 1}},
		{"an expire in a batch", []byte{6, 0, 0, 1, 7, 1, 'g', 1, 1, 0}},
		{"a write with a stamp", []byte{6, 0, 0, 1, 0x44, 1, 'g', 2, 0}},
		{"cut short", []byte{6, 0, 0, 2, 4, 1, 'g'}},
		{"trailing bytes", []byte{6, 0, 0, 1, 4, 1, 'g', 0}},
		{"a damaged write", []byte{6, 0, 0, 1, 1, 1, 'g', 1, 1, 2}},
		{"more writes than the record holds", []byte{6, 0, 0, 100, 4, 1, 'g'}},
		{"an actor that is no uid", []byte{6, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1, 4, 1, 'g'}},
		{"a write with a key of its own", append([]byte{6, 0, 0, 1, 0x24, 1, 'g', 1, 'k'}, fingerprint7...)},
		{"a key cut short", []byte{0x26, 0, 0, 1, 'k', 1, 2}},
		{"an empty key", append(append([]byte{0x26, 0, 0, 0}, fingerprint7...), 1, 4, 1, 'g')},
		{"a fingerprint of zeros", append(append([]byte{0x26, 0, 0, 1, 'k'}, make([]byte, 16)...), 1, 4, 1, 'g')},
		{"an empty principal", []byte{0x16, 0, 0, 0, 1, 4, 1, 'g'}},
		{"a principal with a quote", []byte{0x16, 0, 0, 3, 'o', '"', 's', 1, 4, 1, 'g'}},
		{"a principal cut short", []byte{0x16, 0, 0, 3, 'o'}},
		{"a write with a principal of its own", []byte{6, 0, 0, 1, 0x54, 1, 'g', 0, 0, 1, 'p'}},
		{"a keyed batch with a precondition flag", append(append([]byte{0xa6, 0, 0, 1, 'k'}, fingerprint7...), 1, 4, 1, 'g')},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.payload)
			assert.Error(t, err)
		})
	}
	_, err := decodeWrite([]byte{6, 0, 0, 1, 4, 1, 'g'})
	assert.Error(t, err, "a batch is not a write")
}

// FuzzDecodeRecord checks that decoding never panics, and that what it
// accepts is written back as it was read.
func FuzzDecodeRecord(f *testing.F) {
	for _, c := range batches() {
		f.Add(appendBatch(nil, c))
	}
	for _, e := range writes() {
		f.Add(appendWrite(nil, e))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		c, err := Decode(payload)
		if err != nil {
			return
		}
		again, err := Decode(c.Append(nil))
		require.NoError(t, err)
		assert.Equal(t, c, again)
	})
}

// longestPrincipal is a principal's name of the most bytes.
var longestPrincipal = strings.Repeat("p", scope.MaxPrincipalBytes)

// Largest bounds the largest batch the limits allow: as many writes
// as the HTTP layer takes, each with the longest group id and
// precondition, and the users of all of them as many as one request may
// name, with the longest nicknames.
func TestLargestBoundsABatch(t *testing.T) {
	const maxUsers, maxWrites = 100, 20
	users := make([]membership.User, maxUsers)
	for i := range users {
		users[i] = membership.User{UID: 9223372036854775807 - membership.UID(i), Nickname: string(make([]byte, membership.MaxNicknameBytes)), HasNickname: true}
	}
	revs := make([]membership.Revision, MaxPreconditionRevisions)
	for i := range revs {
		revs[i] = 1<<64 - 1 - membership.Revision(i)
	}
	cond := membership.Precondition{Revisions: revs, Exists: true, Empty: true}
	id := string(make([]byte, membership.MaxGroupIDBytes))
	bound := Largest(1<<30, maxUsers, maxWrites)
	for _, op := range []membership.Op{membership.OpAdd, membership.OpReplace, membership.OpRemove, membership.OpDeleteGroup} {
		c := &Batch{Time: time.UnixMilli(-1 << 62).UTC(), Actor: 9223372036854775807, Principal: longestPrincipal,
			Idem: testIdem(string(make([]byte, membership.MaxIdempotencyKeyBytes)))}
		for i := range maxWrites {
			w := membership.Write{Op: op, GroupID: id, If: cond}
			part := users[i*maxUsers/maxWrites : (i+1)*maxUsers/maxWrites]
			switch op {
			case membership.OpAdd, membership.OpReplace:
				w.Users = part
			case membership.OpRemove:
				for _, u := range part {
					w.UIDs = append(w.UIDs, u.UID)
				}
			}
			c.Writes = append(c.Writes, w)
		}
		assert.LessOrEqual(t, int64(len(appendBatch(nil, c))), bound, "op %s", op)
	}
	setGroups := &Batch{Time: time.UnixMilli(-1 << 62).UTC(), Actor: 9223372036854775807,
		Idem: testIdem(string(make([]byte, membership.MaxIdempotencyKeyBytes)))}
	for range maxWrites {
		setGroups.Writes = append(setGroups.Writes, membership.Write{Op: membership.OpSetGroup, GroupID: id, If: cond, Group: longGroupAttributes()})
	}
	assert.LessOrEqual(t, int64(len(appendBatch(nil, setGroups))), Largest(0, 0, maxWrites), "set_group, which names no user")
	groups := longGroups(maxUsers, true)
	for _, op := range []membership.Op{membership.OpAddGroups, membership.OpReplaceGroups, membership.OpRemoveGroups} {
		c := &Batch{Time: time.UnixMilli(-1 << 62).UTC(), Actor: 9223372036854775807, Principal: longestPrincipal, MaxDepth: membership.MaxMaxDepth, MaxAncestors: membership.MaxMaxAncestors,
			Idem: testIdem(string(make([]byte, membership.MaxIdempotencyKeyBytes)))}
		for i := range maxWrites {
			c.Writes = append(c.Writes, membership.Write{Op: op, GroupID: id, If: cond, MaxDepth: membership.MaxMaxDepth, MaxAncestors: membership.MaxMaxAncestors,
				Subgroups: groups[i*maxUsers/maxWrites : (i+1)*maxUsers/maxWrites]})
		}
		assert.LessOrEqual(t, int64(len(appendBatch(nil, c))), bound, "op %s", op)
	}
	assert.LessOrEqual(t, Largest(1<<30, maxUsers, 1), bound, "and a single write's")
}
