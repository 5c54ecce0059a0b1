package durable

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/internal/store/storetest/batchtest"
	"example.com/groupmembership/internal/store/wal"
	"example.com/groupmembership/internal/store/wal/record"
	"example.com/groupmembership/membership"
)

func TestDurableBatches(t *testing.T) {
	batchtest.Contract(t, func(t *testing.T) membership.Store {
		d := openTestDurable(t, t.TempDir(), Options{ChangesKeep: keepAll})
		t.Cleanup(func() { _ = d.Close() })
		return d
	})
}

// batchScript makes, on s, a history of batches and single writes: moves,
// nicknames kept across a move, a batch that changes nothing, preconditions
// that hold and one that fails. It returns what each batch answered.
func batchScript(t *testing.T, s membership.Store) []batchOutcome {
	t.Helper()
	ctx := context.Background()
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
	_, err := storetest.Add(ctx, s, "g", []membership.User{{UID: 1, Nickname: "Ann", HasNickname: true}, {UID: 2}})
	require.NoError(t, err)
	do(membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{1}},
		membership.Write{Op: membership.OpAdd, GroupID: "h", Users: storetest.UsersOf(1, 3)})
	do(membership.Write{Op: membership.OpReplace, GroupID: "k", Users: storetest.UsersOf(4, 5), If: membership.Precondition{Empty: true}},
		membership.Write{Op: membership.OpDeleteGroup, GroupID: "g", If: ifMatch("g")})
	do(membership.Write{Op: membership.OpAdd, GroupID: "h", Users: storetest.UsersOf(1)},
		membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{9}})
	do(membership.Write{Op: membership.OpAdd, GroupID: "n", Users: storetest.UsersOf(6)},
		membership.Write{Op: membership.OpDeleteGroup, GroupID: "k", If: membership.Precondition{Revisions: []membership.Revision{1}}})
	do(membership.Write{Op: membership.OpReplace, GroupID: "k"},
		membership.Write{Op: membership.OpAdd, GroupID: "n", Users: []membership.User{{UID: 7, Nickname: "Gus", HasNickname: true}}, If: ifMatch("n")})
	_, err = storetest.Remove(ctx, s, "h", []membership.UID{3})
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
	d.log.Mark()
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
	st, err := snap.ReadFile(snap.Path(dir, snapshots[len(snapshots)-1]), nil)
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
	_, err := storetest.Add(ctx, d, "g", []membership.User{{UID: 1}})
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
	b := record.Batch(move("b"))
	err = d.commitHolding(&b, nil).err
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
	d.log.Mark()
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
	next, err := storetest.Add(ctx, d, "g", []membership.User{{UID: 3}})
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
