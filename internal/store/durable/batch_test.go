package durable

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/internal/store/wal"
	"example.com/groupmembership/membership"
)

func TestDurableBatches(t *testing.T) {
	storetest.Batches(t, func(t *testing.T) membership.Store {
		d := openTestDurable(t, t.TempDir(), Options{ChangesKeep: keepAll})
		t.Cleanup(func() { _ = d.Close() })
		return d
	})
}

// batchEntries returns batches of every op a batch takes, with and without
// preconditions, and stamps: an entry's becomes its batch's.
func batchEntries() map[string]*batchEntry {
	out := map[string]*batchEntry{}
	var all []membership.Write
	for name, e := range entries() {
		if !batchTakes(e.Op) {
			continue
		}
		w := membership.Write(*e)
		w.Time, w.Actor, w.Idem = time.Time{}, 0, membership.Idempotency{}
		out[name] = &batchEntry{Writes: []membership.Write{w}, Time: e.Time, Actor: e.Actor, Idem: e.Idem}
		all = append(all, w)
	}
	out["all of them"] = &batchEntry{Writes: all, Time: time.UnixMilli(1764028800123).UTC(), Actor: 42}
	out["all of them, keyed"] = &batchEntry{Writes: all, Time: time.UnixMilli(1764028800123).UTC(), Actor: 42, Idem: testIdem("batch-1")}
	out["keyed, of no write"] = &batchEntry{Writes: []membership.Write{}, Time: time.UnixMilli(1764028800123).UTC(), Idem: testIdem("empty")}
	return out
}

// A batch's key follows its stamp, flagged in its op byte, before its
// writes; a keyed batch may have no write (it is remembered all the same).
func TestBatchRecordKey(t *testing.T) {
	remove := &entry{Op: membership.OpRemove, GroupID: "h", UIDs: []membership.UID{1}}
	c := &batchEntry{Writes: []membership.Write{membership.Write(*remove)}, Time: time.UnixMilli(0).UTC(),
		Idem: membership.Idempotency{Key: "k", Fingerprint: membership.Fingerprint{15: 7}}}
	want := append([]byte{0x26, 0, 0, 1, 'k'}, fingerprint7...)
	want = append(want, 1, 2, 1, 'h', 1, 1)
	assert.Equal(t, want, appendBatch(nil, c))
	got, err := decodeRecord(want)
	require.NoError(t, err)
	assert.Equal(t, c, got)

	c.Writes = []membership.Write{}
	want = append(append([]byte{0x26, 0, 0, 1, 'k'}, fingerprint7...), 0)
	assert.Equal(t, want, appendBatch(nil, c))
	got, err = decodeRecord(want)
	require.NoError(t, err)
	assert.Equal(t, c, got)
}

func TestBatchRecordRoundTrip(t *testing.T) {
	for name, c := range batchEntries() {
		t.Run(name, func(t *testing.T) {
			payload := appendBatch(nil, c)
			got, err := decodeRecord(payload)
			require.NoError(t, err)
			assert.Equal(t, c, got)
			assert.LessOrEqual(t, int64(len(payload)), c.cost(), "the cost counts the record")
		})
	}
}

// A batch's writes are laid out as the records of their ops: a batch of
// one add is op 6, a count of 1, and the add's record.
func TestBatchRecordHoldsItsWritesAsRecords(t *testing.T) {
	add := &entry{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}}, If: membership.Precondition{Empty: true}}
	remove := &entry{Op: membership.OpRemove, GroupID: "h", UIDs: []membership.UID{1}}
	want := append([]byte{opBatch, 0, 0, 2}, appendEntry(nil, add)...)
	want = append(want, appendEntry(nil, remove)...)
	got := appendBatch(nil, &batchEntry{Writes: []membership.Write{membership.Write(*add), membership.Write(*remove)}, Time: time.UnixMilli(0).UTC()})
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
		{"a batch with a stamp flag", []byte{0x46, 0, 0, 1, 4, 1, 'g'}},
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
		{"a keyed batch with a precondition flag", append(append([]byte{0xa6, 0, 0, 1, 'k'}, fingerprint7...), 1, 4, 1, 'g')},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeRecord(tt.payload)
			assert.Error(t, err)
		})
	}
	_, err := decodeEntry([]byte{6, 0, 0, 1, 4, 1, 'g'})
	assert.Error(t, err, "a batch is not an entry")
}

// FuzzDecodeRecord checks that decoding never panics, and that what it
// accepts is written back as it was read.
func FuzzDecodeRecord(f *testing.F) {
	for _, c := range batchEntries() {
		f.Add(appendBatch(nil, c))
	}
	for _, e := range entries() {
		f.Add(appendEntry(nil, e))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		c, err := decodeRecord(payload)
		if err != nil {
			return
		}
		again, err := decodeRecord(c.appendTo(nil))
		require.NoError(t, err)
		assert.Equal(t, c, again)
	})
}

// LargestEntry bounds the largest batch the limits allow: as many writes
// as the HTTP layer takes, each with the longest group id and
// precondition, and the users of all of them as many as one request may
// name, with the longest nicknames.
func TestLargestEntryBoundsABatch(t *testing.T) {
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
	bound := LargestEntry(1<<30, maxUsers, maxWrites)
	for _, op := range []membership.Op{membership.OpAdd, membership.OpReplace, membership.OpRemove, membership.OpDeleteGroup} {
		c := &batchEntry{Time: time.UnixMilli(-1 << 62).UTC(), Actor: 9223372036854775807,
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
	assert.LessOrEqual(t, LargestEntry(1<<30, maxUsers, 1), bound, "and a single write's")
}

// batchScript makes, on s, a history of batches and single writes: moves,
// nicknames kept across a move, a batch that changes nothing, preconditions
// that hold and one that fails. It returns what each batch answered.
func batchScript(t *testing.T, s membership.Store) []batchOutcome {
	t.Helper()
	ctx := context.Background()
	plain := func(uids ...membership.UID) []membership.User {
		us := make([]membership.User, len(uids))
		for i, uid := range uids {
			us[i] = membership.User{UID: uid}
		}
		return us
	}
	ifMatch := func(group string) membership.Precondition {
		rev, err := s.Revision(ctx, group)
		require.NoError(t, err)
		return membership.Precondition{Revisions: []membership.Revision{rev}}
	}
	var out []batchOutcome
	do := func(ws ...membership.Write) {
		res, err := s.Batch(ctx, membership.Batch{Writes: ws, Actor: membership.UID(len(out) + 40)})
		o := batchOutcome{Result: res}
		if err != nil {
			o.Code = membership.ErrorCode(err)
		}
		out = append(out, o)
	}
	_, err := s.AddMembers(ctx, "g", []membership.User{{UID: 1, Nickname: "Ann", HasNickname: true}, {UID: 2}})
	require.NoError(t, err)
	do(membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{1}},
		membership.Write{Op: membership.OpAdd, GroupID: "h", Users: plain(1, 3)})
	do(membership.Write{Op: membership.OpReplace, GroupID: "k", Users: plain(4, 5), If: membership.Precondition{Empty: true}},
		membership.Write{Op: membership.OpDeleteGroup, GroupID: "g", If: ifMatch("g")})
	do(membership.Write{Op: membership.OpAdd, GroupID: "h", Users: plain(1)},
		membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{9}})
	do(membership.Write{Op: membership.OpAdd, GroupID: "n", Users: plain(6)},
		membership.Write{Op: membership.OpDeleteGroup, GroupID: "k", If: membership.Precondition{Revisions: []membership.Revision{1}}})
	do(membership.Write{Op: membership.OpReplace, GroupID: "k"},
		membership.Write{Op: membership.OpAdd, GroupID: "n", Users: []membership.User{{UID: 7, Nickname: "Gus", HasNickname: true}}, If: ifMatch("n")})
	_, err = s.RemoveMembers(ctx, "h", []membership.UID{3})
	require.NoError(t, err)
	return out
}

// batchOutcome is what one batch answered: its result, or its error's code.
type batchOutcome struct {
	Result membership.BatchResult
	Code   membership.Code
}

// Batches answer on the durable store as on memory, and a start after a
// crash, replaying the log, gives back the lists, revisions, nicknames and
// feed, times and actors included; a start from a snapshot that holds the
// batches too.
func TestDurableBatchesReplayAfterACrash(t *testing.T) {
	ref := memory.New()
	want := batchScript(t, ref)
	refState := stateOf(t, ref)
	require.Equal(t, membership.CodePreconditionFailed, want[3].Code, "the script does what it says")
	require.Equal(t, want[2].Result.Revision, want[1].Result.Revision, "and has a batch that changes nothing")
	require.Equal(t, membership.UID(40), refState.Changes[1].Actor, "and gives each batch an actor")

	dir := t.TempDir()
	d := openTestDurable(t, dir, markedOpts())
	assert.Equal(t, want, batchScript(t, d), "each batch answers as memory's")
	wantState := stateOf(t, d)
	assert.Equal(t, untimed(refState), untimed(wantState))
	for _, c := range wantState.Changes {
		assert.False(t, c.Time.IsZero(), "change %d has the time of its commit", c.Revision)
	}
	d.markNow()
	crash(t, d)

	d = openTestDurable(t, dir, markedOpts())
	assert.Equal(t, wantState, stateOf(t, d), "the log replayed")
	res, err := d.Batch(context.Background(), membership.Batch{Writes: []membership.Write{{Op: membership.OpAdd, GroupID: "z", Users: []membership.User{{UID: 1}}}}})
	require.NoError(t, err)
	assert.Equal(t, ref.LatestRevision()+1, res.Revision, "revisions go on")
	wantState = stateOf(t, d)
	require.NoError(t, d.Close())

	// Started again, the first change starts a snapshot that covers every
	// change before it: a start from it alone gives the batches back.
	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll, SnapshotBytes: 1})
	_, err = d.Write(context.Background(), membership.Write{Op: membership.OpDeleteGroup, GroupID: "z"})
	require.NoError(t, err)
	wantState = stateOf(t, d)
	require.NoError(t, d.Close())
	_, snapshots, err := files(dir)
	require.NoError(t, err)
	st, err := snap.ReadFile(snapshotPath(dir, snapshots[len(snapshots)-1]))
	require.NoError(t, err)
	batches := 0
	for _, c := range st.Changes {
		if c.Op == membership.OpBatch {
			batches++
		}
	}
	assert.Equal(t, 4, batches, "the snapshot keeps the batches in the feed: the four that changed something")
	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	assert.Equal(t, wantState, stateOf(t, d), "the snapshot loaded")
}

// A batch whose precondition held when it was checked, before it was
// queued, but not when the committer applied it (another change to the
// group came between), is logged, refused CodePreconditionFailed naming
// the write, takes no revision, and is refused again on replay.
func TestDurableRacedBatchFailsOnReplayToo(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDurable(t, dir, markedOpts())
	_, err := d.AddMembers(ctx, "g", []membership.User{{UID: 1}})
	require.NoError(t, err)
	was := membership.Precondition{Revisions: []membership.Revision{revisionOf(t, d)}}
	move := func(to string) membership.Batch {
		return membership.Batch{Writes: []membership.Write{
			{Op: membership.OpAdd, GroupID: to, Users: []membership.User{{UID: 1}}},
			{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{1}, If: was},
		}}
	}
	first, err := d.Batch(ctx, move("a"))
	require.NoError(t, err)
	// The second batch, checked before the first was applied, as a racing
	// one is: queued as Batch would have queued it.
	b := batchEntry(move("b"))
	err = d.commit(&b).err
	var e *membership.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, membership.CodePreconditionFailed, e.Code)
	assert.Contains(t, e.Message, "element 1")
	assert.Equal(t, first.Revision, e.Revision, "the error tells the group's revision")
	// A third, checked after the first was applied, is refused at once,
	// without a record.
	_, err = d.Batch(ctx, move("c"))
	assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err))
	want := stateOf(t, d)
	d.markNow()
	crash(t, d)

	data, err := os.ReadFile(newestLog(t, dir))
	require.NoError(t, err)
	res, err := wal.Read(data, func([]byte) error { return nil })
	require.NoError(t, err)
	assert.Equal(t, 3, res.Records, "the raced batch is in the log, the one refused at once is not")

	d = openTestDurable(t, dir, markedOpts())
	defer d.Close()
	assert.Equal(t, want, stateOf(t, d), "and fails again on replay")
	got, _ := storetest.ListAll(t, d, "b")
	assert.Empty(t, got)
	next, err := d.AddMembers(ctx, "g", []membership.User{{UID: 3}})
	require.NoError(t, err)
	assert.Equal(t, first.Revision+1, next.Revision, "the failed batch took no revision")
}

// A log of version 4, as the build before batches wrote it, is still
// read, and the records after it go into a new log of the current version:
// a build that reads version 4 at most refuses that one by its version.
func TestDurableReadsAVersion4Log(t *testing.T) {
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	_, err := d.Write(context.Background(), membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{{UID: 1}, {UID: 2}}})
	require.NoError(t, err)
	require.NoError(t, d.Close())
	path := newestLog(t, dir)
	v4, err := os.ReadFile(path)
	require.NoError(t, err)
	v4[4] = 4
	require.NoError(t, os.WriteFile(path, v4, 0o600))

	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	_, err = d.Batch(context.Background(), membership.Batch{Writes: []membership.Write{
		{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{2}},
		{Op: membership.OpAdd, GroupID: "h", Users: []membership.User{{UID: 2}}},
	}})
	require.NoError(t, err)
	require.NoError(t, d.Close())
	old, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, v4, old, "the old log is left as it was")
	newest, err := os.ReadFile(newestLog(t, dir))
	require.NoError(t, err)
	h, err := wal.ReadHeader(newest)
	require.NoError(t, err)
	assert.Equal(t, wal.Version, h.Version)

	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	got, _ := storetest.ListAll(t, d, "h")
	assert.Equal(t, []membership.Member{{UID: 2}}, got)
}
