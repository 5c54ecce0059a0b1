package durable

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/internal/store/wal"
	"example.com/groupmembership/internal/store/wal/record"
	"example.com/groupmembership/membership"
)

// outcome is what one write answered: its result, or its error's code.
type outcome struct {
	Result membership.Result
	Code   membership.Code
}

// writeScript makes, on s, a history of every op with and without
// preconditions, some that hold and some that fail, nicknames given,
// changed and forgotten, with and without actors, and returns what each
// write answered.
func writeScript(t *testing.T, s membership.Store) []outcome {
	t.Helper()
	ctx := context.Background()
	ifMatch := func(group string) membership.Precondition {
		rev, err := s.Revision(ctx, group)
		require.NoError(t, err)
		return membership.Precondition{Revisions: []membership.Revision{rev - 1, rev}}
	}
	var out []outcome
	do := func(w membership.Write) {
		if len(out)%2 == 0 {
			w.Actor = membership.UID(100 + len(out)) // every other write names one
		}
		res, err := s.Write(ctx, w)
		o := outcome{Result: res}
		if err != nil {
			o.Code = membership.ErrorCode(err)
		}
		out = append(out, o)
	}
	do(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{storetest.Nicknamed(1, "Ann"), {UID: 2}, storetest.Nicknamed(3, "Cy")}})
	do(membership.Write{Op: membership.OpAdd, GroupID: "h", Users: []membership.User{{UID: 2}, storetest.Nicknamed(4, "Di")}})
	do(membership.Write{Op: membership.OpAdd, GroupID: "k", Users: []membership.User{{UID: 3}, storetest.Nicknamed(5, "Ed")}})
	do(membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{storetest.Nicknamed(1, "Al"), {UID: 2}, storetest.Nicknamed(6, "Fay")}, If: ifMatch("g")})
	do(membership.Write{Op: membership.OpReplace, GroupID: "h", If: membership.Precondition{Exists: true}})
	do(membership.Write{Op: membership.OpDeleteGroup, GroupID: "k", If: membership.Precondition{Empty: true}})
	do(membership.Write{Op: membership.OpDeleteGroup, GroupID: "k", If: ifMatch("k")})
	do(membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{2}})
	do(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 3}}, If: membership.Precondition{Empty: true}})
	do(membership.Write{Op: membership.OpReplace, GroupID: "n", Users: []membership.User{storetest.Nicknamed(7, "Gus"), {UID: 6}}, If: membership.Precondition{Empty: true}})
	do(membership.Write{Op: membership.OpReplace, GroupID: "n", Users: []membership.User{{UID: 6}, storetest.Nicknamed(7, "Gus")}})
	do(membership.Write{Op: membership.OpDeleteGroup, GroupID: "k"})
	do(membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{5}})
	do(membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{6}, If: membership.Precondition{Revisions: []membership.Revision{1}}})
	do(membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{6}, If: ifMatch("g")})
	return out
}

var (
	scriptGroups = []string{"g", "h", "k", "n"}
	scriptUIDs   = []membership.UID{1, 2, 3, 4, 5, 6, 7}
)

// storeState is what a store shows of itself: every list, revision and
// user's groups, the groups' sizes and the whole feed.
type storeState struct {
	Lists      map[string][]membership.Member
	Revisions  map[string]membership.Revision
	UserGroups map[membership.UID][]string
	Groups     []membership.GroupSize
	Changes    []membership.Change
}

func stateOf(t *testing.T, s membership.Store) storeState {
	t.Helper()
	st := storeState{Lists: map[string][]membership.Member{}, Revisions: map[string]membership.Revision{}, UserGroups: map[membership.UID][]string{}}
	for _, g := range scriptGroups {
		st.Lists[g], st.Revisions[g] = storetest.ListAll(t, s, g)
	}
	for _, uid := range scriptUIDs {
		st.UserGroups[uid], _ = storetest.UserGroups(t, s, uid, membership.GroupListOptions{})
	}
	_, err := s.Groups(context.Background(), membership.GroupsOptions{}, func(_ int, groups iter.Seq[membership.GroupSize]) {
		for g := range groups {
			st.Groups = append(st.Groups, g)
		}
	})
	require.NoError(t, err)
	changes, _, err := s.Changes(context.Background(), membership.ChangeOptions{})
	if membership.ErrorCode(err) != membership.CodeChangesGone { // a restored store's feed starts after its backup
		require.NoError(t, err)
	}
	st.Changes = storetest.EmptiesAsNil(changes)
	return st
}

// untimed returns st with its changes' times cleared: two stores give
// the same changes different times.
func untimed(st storeState) storeState {
	st.Changes = slices.Clone(st.Changes)
	for i := range st.Changes {
		st.Changes[i].Time = time.Time{}
	}
	return st
}

// The durable store answers every op as memory does, and a start after a
// crash, replaying the log, or after a snapshot, loading it, gives back the
// lists, revisions, nicknames and feed.
func TestDurableWritesReplayAfterACrash(t *testing.T) {
	ref := memory.New()
	want := writeScript(t, ref)
	wantState := stateOf(t, ref)
	require.Equal(t, []membership.Member{{UID: 1, Nickname: "Al"}}, wantState.Lists["g"], "the script does what it says")
	require.Equal(t, membership.CodePreconditionFailed, want[5].Code)

	dir := t.TempDir()
	d := openTestDurable(t, dir, markedOpts())
	since := time.Now()
	assert.Equal(t, want, writeScript(t, d), "each write answers as memory's")
	before := stateOf(t, d)
	assert.Equal(t, untimed(wantState), untimed(before))
	storetest.Untimed(t, before.Changes, since)
	d.log.Mark()
	crash(t, d)

	d = openTestDurable(t, dir, markedOpts())
	assert.Equal(t, before, stateOf(t, d), "the log replayed, every change with its time and actor")
	res, err := d.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: "z", Users: []membership.User{{UID: 1}}})
	require.NoError(t, err)
	assert.Equal(t, ref.LatestRevision()+1, res.Revision, "revisions go on")
	require.NoError(t, d.Close())
}

// A snapshot taken after the new ops holds their state and their changes
// in the feed: a start from it alone gives them back.
func TestDurableSnapshotKeepsTheNewOps(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	writeScript(t, d)
	require.NoError(t, d.Close())
	// Started again, the first batch starts a snapshot: the only one
	// being written, so it is written, and it covers every change.
	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll, SnapshotBytes: 1})
	_, err := d.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: "h", Users: []membership.User{{UID: 4, Nickname: "Dee", HasNickname: true}}})
	require.NoError(t, err)
	want := stateOf(t, d)
	require.NoError(t, d.Close())

	data, err := os.ReadFile(newestLog(t, dir))
	require.NoError(t, err)
	res, err := wal.Read(data, func([]byte) error { return nil })
	require.NoError(t, err)
	require.Zero(t, res.Records, "the newest log is empty: the snapshot holds everything")
	_, snapshots, err := files(dir)
	require.NoError(t, err)
	st, err := snap.ReadFile(snap.Path(dir, snapshots[len(snapshots)-1]), nil)
	require.NoError(t, err)
	ops := map[membership.Op]bool{}
	for _, c := range st.Changes {
		ops[c.Op] = true
	}
	assert.Equal(t, map[membership.Op]bool{membership.OpAdd: true, membership.OpRemove: true, membership.OpReplace: true, membership.OpDeleteGroup: true, membership.OpRemoveUser: true}, ops)

	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	assert.Equal(t, want, stateOf(t, d))
}

// A backup taken after the new ops holds the state they left, and a
// directory restored from it lists it.
func TestDurableBackupAfterTheNewOps(t *testing.T) {
	d := openTestDurable(t, t.TempDir(), Options{ChangesKeep: keepAll})
	defer d.Close()
	writeScript(t, d)
	want := stateOf(t, d)
	path := filepath.Join(t.TempDir(), "backup")
	f, err := os.Create(path)
	require.NoError(t, err)
	_, err = d.Backup().WriteTo(f)
	require.NoError(t, errors.Join(err, f.Close()))

	dir := filepath.Join(t.TempDir(), "restored")
	rev, err := Restore(path, dir)
	require.NoError(t, err)
	assert.Equal(t, d.mem.LatestRevision(), rev)
	r := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer r.Close()
	got := stateOf(t, r)
	assert.Empty(t, got.Changes, "a backup holds the state, not the feed")
	got.Changes = want.Changes
	assert.Equal(t, want, got)
}

// A write whose precondition held when it was checked, before it was
// queued, but not when the committer applied it (another write to the
// group came between), is logged, answered CodePreconditionFailed, takes
// no revision, and fails again when the log is replayed.
func TestDurableRacedPreconditionFailsOnReplayToo(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDurable(t, dir, markedOpts())
	_, err := d.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}}})
	require.NoError(t, err)
	rev := revisionOf(t, d)
	was := membership.Precondition{Revisions: []membership.Revision{rev}}
	first, err := d.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{{UID: 2}}, If: was})
	require.NoError(t, err)
	// The second write, checked before the first was applied, as a racing
	// one is: queued as Write would have queued it.
	err = d.commitHolding(&record.Write{Op: membership.OpDeleteGroup, GroupID: "g", If: was}, nil).err
	require.Error(t, err)
	assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err))
	var e *membership.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, first.Revision, e.Revision, "the error tells the group's revision")
	want := stateOf(t, d)
	assert.Equal(t, []membership.Member{{UID: 2}}, want.Lists["g"], "the raced write changed nothing")
	d.log.Mark()
	crash(t, d)

	data, err := os.ReadFile(newestLog(t, dir))
	require.NoError(t, err)
	res, err := wal.Read(data, func([]byte) error { return nil })
	require.NoError(t, err)
	assert.Equal(t, 3, res.Records, "the raced write is in the log")

	d = openTestDurable(t, dir, markedOpts())
	defer d.Close()
	assert.Equal(t, want, stateOf(t, d), "and fails again on replay")
	next, err := d.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 3}}})
	require.NoError(t, err)
	assert.Equal(t, first.Revision+1, next.Revision, "the failed write took no revision")
}

// Writers racing with the same If-Match: one wins, the others are told
// CodePreconditionFailed, and a restart gives the same state.
func TestDurableRacingIfMatchHasOneWinner(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	_, err := d.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}}})
	require.NoError(t, err)
	cond := membership.Precondition{Revisions: []membership.Revision{revisionOf(t, d)}}
	writes := make([]membership.Write, 16)
	for w := range writes {
		writes[w] = membership.Write{Op: membership.OpReplace, GroupID: "g", Users: storetest.UsersOf(membership.UID(w + 10)), If: cond}
	}
	storetest.OneWon(t, storetest.WriteAtOnce(d, writes))
	want := stateOf(t, d)
	assert.Len(t, want.Changes, 2)
	require.NoError(t, d.Close())

	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	assert.Equal(t, want, stateOf(t, d))
}

// Writes that change nothing, or whose precondition fails already, are
// answered from memory and not logged.
func TestDurableDoesNotLogWritesThatChangeNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	_, err := d.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1, Nickname: "A", HasNickname: true}, {UID: 2}}})
	require.NoError(t, err)
	rev := revisionOf(t, d)
	size := fileSize(t, newestLog(t, dir))
	for _, tt := range []struct {
		name     string
		w        membership.Write
		wantCode membership.Code
	}{
		{"delete of an empty group", membership.Write{Op: membership.OpDeleteGroup, GroupID: "none"}, ""},
		{"remove_user of a user in no group", membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{9}}, ""},
		{"replace by the same", membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{{UID: 2}, {UID: 1, Nickname: "A", HasNickname: true}}}, ""},
		{"replace by the same, nicknames kept", membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{{UID: 2}, {UID: 1}}}, ""},
		{"add of members", membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 2}}}, ""},
		{"remove of a non-member", membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{3}}, ""},
		{"if-match that fails", membership.Write{Op: membership.OpReplace, GroupID: "g", If: membership.Precondition{Revisions: []membership.Revision{rev + 1}}}, membership.CodePreconditionFailed},
		{"if-none-match * of a group", membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 5}}, If: membership.Precondition{Empty: true}}, membership.CodePreconditionFailed},
		{"if-match * of an empty group", membership.Write{Op: membership.OpDeleteGroup, GroupID: "none", If: membership.Precondition{Exists: true}}, membership.CodePreconditionFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := d.Write(ctx, tt.w)
			if tt.wantCode != "" {
				assert.Equal(t, tt.wantCode, membership.ErrorCode(err))
			} else {
				require.NoError(t, err)
				assert.Zero(t, res.Count)
				assert.Zero(t, res.Removed)
				assert.NotZero(t, res.Revision)
			}
			assert.Equal(t, size, fileSize(t, newestLog(t, dir)), "nothing logged")
		})
	}
}

// The revisions of an If-Match that the group has passed are not logged:
// they can no longer match. More than record.MaxPreconditionRevisions others are
// refused.
func TestDurableBoundsTheRevisionsOfAPrecondition(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	for uid := range membership.UID(3) {
		_, err := d.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: uid + 1}}})
		require.NoError(t, err)
	}
	rev := revisionOf(t, d)
	many := make([]membership.Revision, 0, 1000+record.MaxPreconditionRevisions)
	for i := range 1000 {
		many = append(many, rev-membership.Revision(i%int(rev)))
	}
	size := fileSize(t, newestLog(t, dir))
	_, err := d.Write(ctx, membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{1}, If: membership.Precondition{Revisions: many}})
	require.NoError(t, err)
	assert.Less(t, fileSize(t, newestLog(t, dir))-size, int64(40), "one revision logged, not a thousand")

	rev = revisionOf(t, d)
	future := []membership.Revision{rev}
	for i := range record.MaxPreconditionRevisions {
		future = append(future, rev+1+membership.Revision(i))
	}
	_, err = d.Write(ctx, membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{2}, If: membership.Precondition{Revisions: future}})
	assert.Equal(t, membership.CodeInvalidQuery, membership.ErrorCode(err))
	_, err = d.Write(ctx, membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{2}, If: membership.Precondition{Revisions: future[:record.MaxPreconditionRevisions]}})
	assert.NoError(t, err, "as many as MaxPreconditionRevisions are taken")
	got, _ := storetest.ListAll(t, d, "g")
	assert.Equal(t, []membership.Member{{UID: 3}}, got)
}

// A write that replaces or deletes a group of many members is one record,
// and replays as one change.
func TestDurableReplaceAndDeleteOfALargeGroup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	_, err := d.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: storetest.UserRange(1, 5000)})
	require.NoError(t, err)
	res, err := d.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: "g", Users: storetest.UserRange(2500, 5000)})
	require.NoError(t, err)
	assert.Equal(t, membership.Result{Count: 2499, Removed: 2499, Revision: 2}, res)
	res, err = d.Write(ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: "g"})
	require.NoError(t, err)
	assert.Equal(t, membership.Result{Count: 5000, Revision: 3}, res)
	_, err = d.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: "h", Users: storetest.UserRange(1, 3)})
	require.NoError(t, err)
	want := stateOf(t, d)
	require.NoError(t, d.Close())

	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	assert.Equal(t, want, stateOf(t, d))
	assert.Equal(t, fmt.Sprint([]membership.Op{membership.OpAdd, membership.OpReplace, membership.OpDeleteGroup, membership.OpReplace}),
		fmt.Sprint(opsOf(want.Changes)))
}

func opsOf(changes []membership.Change) []membership.Op {
	ops := make([]membership.Op, len(changes))
	for i, c := range changes {
		ops[i] = c.Op
	}
	return ops
}
