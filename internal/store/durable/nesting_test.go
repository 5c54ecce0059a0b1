package durable

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
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

// nestGroups are the groups nestingScript writes to.
var nestGroups = []string{"all-staff", "backend", "engineering", "frontend", "ops", "top", "x"}

// nestOutcome is what one write or batch of nestingScript answered: its
// result, or its error's code.
type nestOutcome struct {
	Result  membership.Result
	Batch   membership.BatchResult
	Code    membership.Code
	Message string
}

// nestingScript makes nesting writes of every op on s, alone and in
// batches, with expiries, a key, refusals (a cycle, a chain too deep, in
// a write and in a batch) and a group deleted, and returns what each
// answered. at is a time ahead of the clock, for expiries.
func nestingScript(t *testing.T, s membership.Store, at time.Time) []nestOutcome {
	t.Helper()
	ctx := context.Background()
	var out []nestOutcome
	outcome := func(o nestOutcome, err error) nestOutcome {
		if err != nil {
			o.Code, o.Message = membership.ErrorCode(err), membership.ErrorMessage(err)
		}
		return o
	}
	write := func(w membership.Write) {
		res, err := s.Write(ctx, w)
		out = append(out, outcome(nestOutcome{Result: res}, err))
	}
	batch := func(ws ...membership.Write) {
		res, err := s.Batch(ctx, membership.Batch{Writes: ws, Actor: 40, MaxDepth: membership.DefaultMaxDepth})
		out = append(out, outcome(nestOutcome{Batch: res}, err))
	}
	write(membership.Write{Op: membership.OpAdd, GroupID: "backend", Users: []membership.User{{UID: 1}, storetest.ExpiresAt(2, at)}})
	write(membership.Write{Op: membership.OpAdd, GroupID: "frontend", Users: []membership.User{{UID: 3, Nickname: "Cy", HasNickname: true}}})
	nest := storetest.Nest("engineering", "backend")
	nest.Subgroups = append(nest.Subgroups, storetest.NestedUntil("frontend", at.Add(time.Minute)))
	nest.Actor = 7
	write(nest)
	write(storetest.Nest("all-staff", "engineering"))
	write(storetest.Nest("backend", "all-staff")) // a cycle
	deep := storetest.Nest("top", "all-staff")
	deep.MaxDepth = 2 // top > all-staff > engineering > backend is 3 deep
	write(deep)
	write(storetest.Keyed(storetest.Nest("ops", "frontend"), "nest-ops"))
	write(storetest.Keyed(storetest.Nest("ops", "frontend"), "nest-ops")) // a repeat
	write(membership.Write{Op: membership.OpRemoveGroups, GroupID: "engineering", Subgroups: []membership.Subgroup{{GroupID: "frontend"}}})
	replace := storetest.Nest("ops", "backend", "x")
	replace.Op = membership.OpReplaceGroups
	replace.If = membership.Precondition{Exists: true}
	write(replace)
	// Nestings that only the batch's first write makes possible.
	batch(membership.Write{Op: membership.OpRemoveGroups, GroupID: "all-staff", Subgroups: []membership.Subgroup{{GroupID: "engineering"}}},
		storetest.Nest("backend", "all-staff"),
		membership.Write{Op: membership.OpAdd, GroupID: "all-staff", Users: []membership.User{{UID: 9}}})
	// A cycle its first nesting makes with the state before it.
	batch(membership.Write{Op: membership.OpAdd, GroupID: "x", Users: []membership.User{{UID: 5}}}, storetest.Nest("all-staff", "engineering"))
	// A cycle of two of its changes.
	batch(storetest.Nest("x", "top"), storetest.Nest("top", "x"))
	write(membership.Write{Op: membership.OpDeleteGroup, GroupID: "engineering"})
	return out
}

// nestView is what the nesting reads answer of every group of
// nestingScript, for comparing stores.
type nestView struct {
	Subgroups, Parents map[string][]membership.Nested
	Transitive         map[string][]membership.Member
	Revisions          map[string]membership.Revision
	Groups             []membership.GroupSize
}

func nestViewOf(t *testing.T, s membership.Store) nestView {
	t.Helper()
	v := nestView{Subgroups: map[string][]membership.Nested{}, Parents: map[string][]membership.Nested{},
		Transitive: map[string][]membership.Member{}, Revisions: map[string]membership.Revision{}}
	for _, g := range nestGroups {
		v.Subgroups[g], _, _ = storetest.Subgroups(t, s, g, membership.NestingListOptions{})
		v.Parents[g], _, _ = storetest.Parents(t, s, g, membership.NestingListOptions{})
		v.Transitive[g], _, _ = storetest.TransitiveMembers(t, s, g, membership.ListOptions{})
		_, v.Revisions[g] = storetest.ListAll(t, s, g)
	}
	v.Groups, _ = storetest.Groups(t, s, membership.GroupsOptions{})
	return v
}

// writeBackup writes d's backup to the file at path.
func writeBackup(t *testing.T, d *Store, path string) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	_, err = d.Backup().WriteTo(f)
	require.NoError(t, errors.Join(err, f.Close()))
}

// Nesting writes answer on the durable store as on memory, and a start
// after a crash, replaying the log, gives back the nestings, their ends,
// revisions, keys and feed.
func TestDurableNestingsReplayAfterACrash(t *testing.T) {
	at := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
	ref := memory.New()
	want := nestingScript(t, ref, at)
	wantView := nestViewOf(t, ref)
	require.Equal(t, membership.CodeCycle, want[4].Code, "the script does what it says")
	require.Equal(t, membership.CodeTooDeep, want[5].Code)
	require.True(t, want[7].Result.Replayed)
	require.Empty(t, want[10].Code, "a batch whose nesting its first write makes possible")
	require.Equal(t, membership.CodeCycle, want[11].Code)
	require.Equal(t, membership.CodeCycle, want[12].Code)

	dir := t.TempDir()
	d := openTestDurable(t, dir, markedOpts())
	assert.Equal(t, want, nestingScript(t, d, at), "each write answers as memory's")
	assert.Equal(t, wantView, nestViewOf(t, d))
	wantState := sortedExport(d)
	d.log.Mark()
	crash(t, d)

	d = openTestDurable(t, dir, markedOpts())
	defer d.Close()
	assert.Equal(t, wantView, nestViewOf(t, d), "the log replayed")
	assert.Equal(t, wantState, sortedExport(d))
	res, err := d.Write(context.Background(), storetest.Keyed(storetest.Nest("ops", "frontend"), "nest-ops"))
	require.NoError(t, err)
	assert.True(t, res.Replayed, "the key is remembered")
}

// A snapshot holds the nestings, their ends, the groups that have
// subgroups but no member and the feed's nesting changes: a start from it
// alone gives them back; so does a backup restored, but for the feed.
func TestDurableNestingsSurviveASnapshotAndABackup(t *testing.T) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	nestingScript(t, d, at)
	require.NoError(t, d.Close())

	// Started again, the first change starts a snapshot that covers every
	// change before it.
	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll, SnapshotBytes: 1})
	_, err := d.Write(ctx, storetest.Nest("x", "frontend"))
	require.NoError(t, err)
	wantView, wantState := nestViewOf(t, d), sortedExport(d)
	require.NotEmpty(t, wantState.Nestings)
	require.Contains(t, wantState.Groups, snap.Group{ID: "all-staff", Revision: wantView.Revisions["all-staff"], UIDs: []membership.UID{9}},
		"the script leaves all-staff a member")
	require.NoError(t, d.Close())
	_, snapshots, err := files(dir)
	require.NoError(t, err)
	st, err := snap.ReadFile(snap.Path(dir, snapshots[len(snapshots)-1]), nil)
	require.NoError(t, err)
	assert.Equal(t, wantState.Nestings, st.Nestings, "the snapshot holds the nestings")
	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	assert.Equal(t, wantView, nestViewOf(t, d), "the snapshot loaded")
	assert.Equal(t, wantState, sortedExport(d))
	res, err := d.Write(ctx, storetest.Keyed(storetest.Nest("ops", "frontend"), "nest-ops"))
	require.NoError(t, err)
	assert.True(t, res.Replayed, "the key is remembered")

	backup := filepath.Join(t.TempDir(), "b.backup")
	writeBackup(t, d, backup)
	require.NoError(t, d.Close())
	restored := filepath.Join(t.TempDir(), "restored")
	_, err = Restore(backup, restored)
	require.NoError(t, err)
	d = openTestDurable(t, restored, Options{ChangesKeep: keepAll})
	defer d.Close()
	assert.Equal(t, wantView, nestViewOf(t, d), "the backup restored")
	got := sortedExport(d)
	assert.Equal(t, wantState.Nestings, got.Nestings)
	assert.Equal(t, wantState.Groups, got.Groups)
}

// A nesting write that would make a cycle or a chain too deep is refused
// without a record, alone or as the first nesting of a batch that nothing
// before it can have changed the nesting of.
func TestDurableRefusesANestingWithoutARecord(t *testing.T) {
	ctx := context.Background()
	d := openTestDurable(t, t.TempDir(), Options{ChangesKeep: keepAll})
	defer d.Close()
	for _, w := range []membership.Write{storetest.Nest("a", "b"), storetest.Nest("b", "c")} {
		_, err := d.Write(ctx, w)
		require.NoError(t, err)
	}
	size := d.log.Size()
	_, err := d.Write(ctx, storetest.Nest("c", "a"))
	assert.Equal(t, membership.CodeCycle, membership.ErrorCode(err))
	deep := storetest.Nest("c", "d")
	deep.MaxDepth = 2
	_, err = d.Write(ctx, deep)
	assert.Equal(t, membership.CodeTooDeep, membership.ErrorCode(err))
	ref := memory.New()
	for _, w := range []membership.Write{storetest.Nest("a", "b"), storetest.Nest("b", "c")} {
		_, err := ref.Write(ctx, w)
		require.NoError(t, err)
	}
	for _, b := range []membership.Batch{
		{MaxDepth: membership.DefaultMaxDepth, Writes: []membership.Write{{Op: membership.OpAdd, GroupID: "z", Users: []membership.User{{UID: 1}}}, storetest.Nest("c", "a")}},
		{MaxDepth: 2, Writes: []membership.Write{storetest.Nest("c", "d")}},
	} {
		_, err = d.Batch(ctx, b)
		_, want := ref.Batch(ctx, b)
		require.Error(t, want)
		assert.Equal(t, membership.ErrorCode(want), membership.ErrorCode(err))
		assert.Equal(t, membership.ErrorMessage(want), membership.ErrorMessage(err), "refused as memory refuses it")
	}
	assert.Equal(t, size, d.log.Size(), "nothing was logged")
}

// A nesting write logged after its check, but refused when applied (a
// write that overtook it made its cycle or its depth), is refused again
// on every replay, with the bounds on depth and ancestors its record keeps: a replay
// gives the state and the revisions it had.
func TestDurableReplaysANestingRefusedWhenApplied(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDurable(t, dir, markedOpts())
	for _, w := range []membership.Write{storetest.Nest("a", "b"), storetest.Nest("b", "c")} {
		_, err := d.Write(ctx, w)
		require.NoError(t, err)
	}
	// As if each passed its check before the writes above were applied.
	cycle := record.Write(storetest.Nest("c", "a"))
	r := d.commitHolding(&cycle, nil)
	assert.Equal(t, membership.CodeCycle, membership.ErrorCode(r.err))
	deep := record.Write(storetest.Nest("c", "d"))
	deep.MaxDepth = 2
	r = d.commitHolding(&deep, nil)
	assert.Equal(t, membership.CodeTooDeep, membership.ErrorCode(r.err))
	deepBatch := &record.Batch{MaxDepth: 2, Writes: []membership.Write{storetest.Nest("c", "d")}}
	r = d.commitHolding(deepBatch, nil)
	assert.Equal(t, membership.CodeTooDeep, membership.ErrorCode(r.err))
	// c is below a and b: a third above it is one too many for 2.
	many := record.Write(storetest.Nest("top", "a"))
	many.MaxAncestors = 2
	r = d.commitHolding(&many, nil)
	assert.Equal(t, membership.CodeTooManyAncestors, membership.ErrorCode(r.err))
	manyBatch := &record.Batch{MaxAncestors: 2, Writes: []membership.Write{storetest.Nest("top", "a")}}
	r = d.commitHolding(manyBatch, nil)
	assert.Equal(t, membership.CodeTooManyAncestors, membership.ErrorCode(r.err))
	loose := record.Write(storetest.Nest("c", "e"))
	loose.MaxDepth = 0
	r = d.commitHolding(&loose, nil)
	require.NoError(t, r.err, "0 is no bound")
	wantView := nestViewOf(t, d)
	wantState := sortedExport(d)
	d.log.Mark()
	crash(t, d)

	d = openTestDurable(t, dir, markedOpts())
	defer d.Close()
	assert.Equal(t, wantState, sortedExport(d), "replayed as applied: c holds e, not a, not d; top holds nothing")
	assert.Equal(t, wantView, nestViewOf(t, d))
}

// Nestings that end by themselves end through the log: the expirer's
// expire_groups writes are logged, and a start after a crash replays them;
// one of more than record.MaxExpireGroups subgroups is refused.
func TestDurableExpiresNestingsThroughTheLog(t *testing.T) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
	dir := t.TempDir()
	d := openTestDurable(t, dir, markedOpts())
	w := storetest.Nest("a", "b")
	w.Subgroups = append(w.Subgroups, storetest.NestedUntil("c", at), storetest.NestedUntil("d", at.Add(time.Minute)))
	_, err := d.Write(ctx, w)
	require.NoError(t, err)
	due := d.DueExpiries(at, 100)
	require.Len(t, due, 1)
	ws := []membership.Write{due[0].Write}
	require.Equal(t, membership.OpExpireGroups, ws[0].Op)
	results, err := d.WriteExpiries(ctx, ws)
	require.NoError(t, err)
	assert.Equal(t, 1, results[0].Count)
	wantState := sortedExport(d)
	subs, _, _ := storetest.Subgroups(t, d, "a", membership.NestingListOptions{})
	assert.Equal(t, []membership.Nested{{GroupID: "b"}, {GroupID: "d", Expires: at.Add(time.Minute)}}, subs)
	d.log.Mark()
	crash(t, d)

	d = openTestDurable(t, dir, markedOpts())
	defer d.Close()
	assert.Equal(t, wantState, sortedExport(d), "the expire_groups replayed")
	assert.Equal(t, membership.OpExpireGroups, wantState.Changes[len(wantState.Changes)-1].Op)

	many := membership.Write{Op: membership.OpExpireGroups, GroupID: "a", AsOf: at, Subgroups: make([]membership.Subgroup, record.MaxExpireGroups+1)}
	_, err = d.Write(ctx, many)
	assert.Equal(t, membership.CodeInvalidQuery, membership.ErrorCode(err))
	_, err = d.WriteExpiries(ctx, []membership.Write{many})
	assert.Equal(t, membership.CodeInvalidQuery, membership.ErrorCode(err))
	old := storetest.Nest("a", "e")
	old.Subgroups[0].Expiry = membership.Expiry{Set: true, At: time.UnixMilli(-5).UTC()}
	_, err = d.Write(ctx, old)
	assert.Equal(t, membership.CodeInvalidGroups, membership.ErrorCode(err), "an expiry a record cannot hold")
}

// Two writers that race a into b and b into a cannot both win: each pair
// ends with exactly one nesting, whichever was first, and a start after a
// crash replays every pair as it was decided, the one that lost (refused
// by its check, or logged and refused when applied) included.
func TestDurableCycleRaceHasOneWinnerAcrossACrash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDurable(t, dir, markedOpts())
	const pairs = 200
	won := make([][2]bool, pairs)
	var wg sync.WaitGroup
	for side := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range pairs {
				a, b := fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
				if side == 1 {
					a, b = b, a
				}
				_, err := d.Write(ctx, storetest.Nest(a, b))
				won[i][side] = err == nil
				if err != nil {
					assert.Equal(t, membership.CodeCycle, membership.ErrorCode(err), "pair %d", i)
				}
			}
		}()
	}
	wg.Wait()
	for i := range pairs {
		assert.NotEqual(t, won[i][0], won[i][1], "pair %d: exactly one wins", i)
		subs, _, _ := storetest.Subgroups(t, d, fmt.Sprintf("a%d", i), membership.NestingListOptions{})
		assert.Equal(t, won[i][0], len(subs) == 1, "pair %d", i)
	}
	wantState := sortedExport(d)
	d.log.Mark()
	crash(t, d)
	t.Logf("%d nesting records for %d pairs: the rest lost when applied", loggedNestings(t, dir), pairs)

	d = openTestDurable(t, dir, markedOpts())
	defer d.Close()
	assert.Equal(t, wantState, sortedExport(d), "replayed as decided")
}

// loggedNestings returns how many nesting writes the logs in dir hold.
func loggedNestings(t *testing.T, dir string) int {
	t.Helper()
	logs, _, err := files(dir)
	require.NoError(t, err)
	n := 0
	for _, seq := range logs {
		data, err := os.ReadFile(wal.Path(dir, seq))
		require.NoError(t, err)
		_, err = wal.Read(data, func(payload []byte) error {
			r, err := record.Decode(payload)
			if w, ok := r.(*record.Write); ok && membership.IsNestingOp(w.Op) {
				n++
			}
			return err
		})
		require.NoError(t, err)
	}
	return n
}

// A parent whose subgroups, more than one expire_groups record takes, end
// at once has them ended in writes that each fit, all in one round; one
// given back is due again.
func TestDurableSplitsAnExpireGroupsARecordCannotHold(t *testing.T) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
	d := openTestDurable(t, t.TempDir(), Options{ChangesKeep: keepAll})
	defer d.Close()
	w := storetest.Nest("p")
	for i := range record.MaxExpireGroups + 5 {
		w.Subgroups = append(w.Subgroups, storetest.NestedUntil(fmt.Sprintf("c%05d", i), at))
	}
	_, err := d.Write(ctx, w)
	require.NoError(t, err)

	due := d.DueExpiries(at, 1<<20)
	require.Len(t, due, 2)
	assert.Len(t, due[0].Write.Subgroups, record.MaxExpireGroups)
	assert.Len(t, due[1].Write.Subgroups, 5)
	assert.Equal(t, "c10004", due[1].Write.Subgroups[4].GroupID, "in order")
	d.RequeueExpiries(due[1:])
	results, err := d.WriteExpiries(ctx, []membership.Write{due[0].Write})
	require.NoError(t, err)
	assert.Equal(t, record.MaxExpireGroups, results[0].Count)
	again := d.DueExpiries(at, 1<<20)
	require.Len(t, again, 1, "the part given back")
	results, err = d.WriteExpiries(ctx, []membership.Write{again[0].Write})
	require.NoError(t, err)
	assert.Equal(t, 5, results[0].Count)
	subs, total, _ := storetest.Subgroups(t, d, "p", membership.NestingListOptions{})
	assert.Empty(t, subs)
	assert.Zero(t, total)
}

// A remove_groups ignores its subgroups' expiries, as memory does, and its
// record holds none: one it could not hold (before 1970) neither refuses
// the write nor reaches the log, which replays.
func TestDurableRemoveGroupsLogsNoExpiry(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDurable(t, dir, markedOpts())
	_, err := d.Write(ctx, storetest.Nest("a", "b", "c"))
	require.NoError(t, err)
	before := membership.Expiry{Set: true, At: time.UnixMilli(-5).UTC()}
	res, err := d.Write(ctx, membership.Write{Op: membership.OpRemoveGroups, GroupID: "a", Subgroups: []membership.Subgroup{{GroupID: "b", Expiry: before}}})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Count)
	_, err = d.Batch(ctx, membership.Batch{Writes: []membership.Write{{Op: membership.OpRemoveGroups, GroupID: "a",
		Subgroups: []membership.Subgroup{{GroupID: "c", Expiry: membership.Expiry{Set: true, TTL: time.Hour}}}}}})
	require.NoError(t, err)
	wantState := sortedExport(d)
	d.log.Mark()
	crash(t, d)

	d = openTestDurable(t, dir, markedOpts())
	defer d.Close()
	assert.Equal(t, wantState, sortedExport(d))
	assert.Empty(t, wantState.Nestings)
}
