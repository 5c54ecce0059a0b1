package durable

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/internal/store/storetest/memberstest"
	"example.com/groupmembership/internal/store/wal"
	"example.com/groupmembership/membership"
)

// keyedRequest is a keyed write or batch a test sent, and what it
// answered the first time.
type keyedRequest struct {
	name  string
	write membership.Write
	batch *membership.Batch
	res   membership.Result
	bres  membership.BatchResult
}

// send sends r to s again.
func (r keyedRequest) send(s membership.Store) (membership.Result, membership.BatchResult, error) {
	if r.batch != nil {
		res, err := s.Batch(context.Background(), *r.batch)
		return membership.Result{}, res, err
	}
	res, err := s.Write(context.Background(), r.write)
	return res, membership.BatchResult{}, err
}

// checkReplayed checks that every request of reqs, sent to s again, is a
// replay of its first answer, taking no revision and changing nothing.
func checkReplayed(t *testing.T, s *Store, reqs []keyedRequest) {
	t.Helper()
	before := stateOf(t, s)
	for _, r := range reqs {
		res, bres, err := r.send(s)
		require.NoError(t, err, r.name)
		if r.batch != nil {
			assert.True(t, bres.Replayed, r.name)
			bres.Replayed = false
			assert.Equal(t, r.bres, bres, r.name)
		} else {
			assert.True(t, res.Replayed, r.name)
			res.Replayed = false
			assert.Equal(t, r.res, res, r.name)
		}
	}
	assert.Equal(t, before, stateOf(t, s), "the repeats changed nothing")
}

// logSize returns the size of dir's newest log.
func logSize(t *testing.T, dir string) int64 {
	t.Helper()
	return fileSize(t, newestLog(t, dir))
}

// keyedScript sends, to the durable store d in dir, keyed writes of every
// kind: an add, a batch, a batch of no write, a write that changes nothing
// (logged all the same), a conditional write, a remove_user and a write
// with no fingerprint of its own (the store gives it the request's), then
// writes that would undo them if they were applied again. A keyed write
// whose precondition fails is refused without a record, and its key stays
// free. It returns the requests and their first answers.
func keyedScript(t *testing.T, d *Store, dir string) []keyedRequest {
	t.Helper()
	ctx := context.Background()
	var reqs []keyedRequest
	write := func(name string, w membership.Write) {
		t.Helper()
		res, err := d.Write(ctx, w)
		require.NoError(t, err, name)
		require.False(t, res.Replayed, name)
		reqs = append(reqs, keyedRequest{name: name, write: w, res: res})
	}
	_, err := storetest.Add(ctx, d, "g", []membership.User{{UID: 1}})
	require.NoError(t, err)
	write("add", storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 2}, {UID: 3, Nickname: "C", HasNickname: true}}}, "add"))
	b := storetest.KeyedBatch(membership.Batch{Actor: 7, Writes: []membership.Write{
		{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{1}},
		{Op: membership.OpAdd, GroupID: "h", Users: []membership.User{{UID: 1}}},
	}}, "move")
	bres, err := d.Batch(ctx, b)
	require.NoError(t, err)
	reqs = append(reqs, keyedRequest{name: "batch", batch: &b, bres: bres})
	empty := storetest.KeyedBatch(membership.Batch{Writes: []membership.Write{}}, "empty")
	eres, err := d.Batch(ctx, empty)
	require.NoError(t, err)
	reqs = append(reqs, keyedRequest{name: "batch of no write", batch: &empty, bres: eres})

	size := logSize(t, dir)
	write("no change", storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 2}}}, "noop"))
	assert.Zero(t, reqs[len(reqs)-1].res.Count)
	assert.Greater(t, logSize(t, dir), size, "a keyed write that changes nothing is logged, so that its key is kept")

	rev, err := d.Revision(ctx, "g")
	require.NoError(t, err)
	write("conditional", storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 4}},
		If: membership.Precondition{Revisions: []membership.Revision{1, rev}}}, "cond"))
	write("remove_user", storetest.Keyed(membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{3}}, "ru"))
	write("passed revisions", storetest.Keyed(membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{2}, Actor: 5,
		If: membership.Precondition{Revisions: []membership.Revision{1, 2, d.mem.LatestRevision()}}}, "nofp"))

	size = logSize(t, dir)
	refused := storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 5}}, If: membership.Precondition{Empty: true}}, "refused")
	_, err = d.Write(ctx, refused)
	require.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err))
	assert.Equal(t, size, logSize(t, dir), "a keyed write refused at once is not logged")

	// Writes in between, which a repeat applied again would undo.
	_, err = storetest.Remove(ctx, d, "g", []membership.UID{4})
	require.NoError(t, err)
	_, err = d.Batch(ctx, membership.Batch{Writes: []membership.Write{
		{Op: membership.OpRemove, GroupID: "h", UIDs: []membership.UID{1}},
		{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}, {UID: 2}, {UID: 3}}},
	}})
	require.NoError(t, err)
	return reqs
}

// checkKeysKept checks that the store d remembers the keys of reqs, and
// that the key refused in keyedScript is free.
func checkKeysKept(t *testing.T, d *Store, reqs []keyedRequest) {
	t.Helper()
	ctx := context.Background()
	checkReplayed(t, d, reqs)
	_, err := d.Write(ctx, storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 9}}}, "add"))
	assert.Equal(t, membership.CodeIdempotencyKeyReused, membership.ErrorCode(err), "a remembered key, for another request")
	_, err = d.Write(ctx, storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 2}}}, "move"))
	assert.Equal(t, membership.CodeIdempotencyKeyReused, membership.ErrorCode(err), "a batch's key, for a write")
	res, err := d.Write(ctx, storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "z", Users: []membership.User{{UID: 5}}}, "refused"))
	require.NoError(t, err, "the key of a write refused is free")
	assert.False(t, res.Replayed)
	assert.Equal(t, 1, res.Count)
}

// A keyed write or batch is remembered across a restart, a crash and a
// snapshot: its repeat is a replay of its first answer, taking no revision.
func TestDurableKeepsKeysAcrossRestarts(t *testing.T) {
	for _, stop := range []string{"close", "crash", "snapshot"} {
		t.Run(stop, func(t *testing.T) {
			dir := t.TempDir()
			d := openTestDurable(t, dir, markedOpts())
			reqs := keyedScript(t, d, dir)
			checkReplayed(t, d, reqs)
			want := stateOf(t, d)
			switch stop {
			case "close":
				require.NoError(t, d.Close())
			case "crash":
				d.log.Mark()
				crash(t, d)
			case "snapshot":
				require.NoError(t, d.Close())
				// The first change after the start starts a snapshot of
				// everything before it; the logs before it are not read.
				d = openTestDurable(t, dir, Options{ChangesKeep: keepAll, SnapshotBytes: 1})
				_, err := storetest.Add(context.Background(), d, "y", []membership.User{{UID: 8}})
				require.NoError(t, err)
				want = stateOf(t, d)
				require.NoError(t, d.Close())
				logs, snapshots, err := files(dir)
				require.NoError(t, err)
				newest := snapshots[len(snapshots)-1]
				st, err := snap.ReadFile(snap.Path(dir, newest), nil)
				require.NoError(t, err)
				assert.Len(t, st.Keys, len(reqs), "the snapshot holds the keys")
				for _, n := range logs {
					if n < newest {
						require.NoError(t, os.Remove(wal.Path(dir, n)))
					}
				}
			}
			d = openTestDurable(t, dir, markedOpts())
			defer d.Close()
			assert.Equal(t, want, stateOf(t, d))
			checkKeysKept(t, d, reqs)
		})
	}
}

// Every keyed record of the log is a first application: a store reopened
// with other bounds on its keys (a longer retention, a larger budget)
// applies every record as the store did live. Here the key "k" was
// forgotten (the budget holds one key) before it was sent again, so its
// second write was applied; reopened with the default bounds, which would
// remember "k", the store applies it all the same.
func TestOtherKeyBoundsOnReopenChangeNoHistory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := markedOpts()
	opts.IdempotencyBytes = 1 // the newest key only
	d := openTestDurable(t, dir, opts)
	add := storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}}}, "k")
	_, err := d.Write(ctx, add)
	require.NoError(t, err)
	_, err = storetest.Remove(ctx, d, "g", []membership.UID{1})
	require.NoError(t, err)
	_, err = d.Write(ctx, storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "h", Users: []membership.User{{UID: 9}}}, "other"))
	require.NoError(t, err)
	again, err := d.Write(ctx, add)
	require.NoError(t, err)
	require.False(t, again.Replayed, "k was forgotten: applied anew")
	want := stateOf(t, d)
	require.Equal(t, []membership.Member{{UID: 1}}, want.Lists["g"])
	d.log.Mark()
	crash(t, d)

	for _, reopened := range []Options{markedOpts(), opts} {
		d = openTestDurable(t, dir, reopened)
		assert.Equal(t, want, stateOf(t, d), "the same history, whatever the bounds")
		require.NoError(t, d.Close())
	}
}

// Writers racing with one key and one If-Match: one applies it, every
// other waits for it and gets its reply, none a failed precondition, though
// the group's revision has moved on by then.
func TestDurableRacingRepeatsOfAConditionalWriteAreReplays(t *testing.T) {
	ctx := context.Background()
	d := openTestDurable(t, t.TempDir(), Options{})
	defer d.Close()
	for round := range 20 {
		group := fmt.Sprint("g", round)
		res, err := storetest.Add(ctx, d, group, []membership.User{{UID: 1}})
		require.NoError(t, err)
		// The batch writes to a group of its own: its change must not move
		// the revision the write's If-Match names.
		w := storetest.Keyed(membership.Write{Op: membership.OpReplace, GroupID: group, Users: []membership.User{{UID: 2}},
			If: membership.Precondition{Revisions: []membership.Revision{res.Revision}}}, group)
		_, err = storetest.Add(ctx, d, group+"b", []membership.User{{UID: 1}})
		require.NoError(t, err)
		b := storetest.KeyedBatch(membership.Batch{Writes: []membership.Write{{Op: membership.OpAdd, GroupID: group + "b", Users: []membership.User{{UID: 3}},
			If: membership.Precondition{Exists: true}}}}, group+"-batch")
		const writers = 6
		results := make([]membership.Result, writers)
		bresults := make([]membership.BatchResult, writers)
		errs := make([]error, 2*writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range writers {
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = d.Write(ctx, w)
			}()
			go func() {
				defer wg.Done()
				<-start
				bresults[i], errs[writers+i] = d.Batch(ctx, b)
			}()
		}
		close(start)
		wg.Wait()
		applied, appliedBatches := 0, 0
		for i := range writers {
			require.NoError(t, errs[i], "round %d", round)
			require.NoError(t, errs[writers+i], "round %d", round)
			if !results[i].Replayed {
				applied++
			}
			if !bresults[i].Replayed {
				appliedBatches++
			}
		}
		assert.Equal(t, 1, applied, "round %d", round)
		assert.Equal(t, 1, appliedBatches, "round %d", round)
	}
}

// A backup holds the keys remembered: a store restored from it answers a
// repeat as the store backed up did.
func TestBackupKeepsKeys(t *testing.T) {
	dir := t.TempDir()
	d := openTestDurable(t, dir, markedOpts())
	defer d.Close()
	reqs := keyedScript(t, d, dir)
	backup := d.Backup()
	var file bytes.Buffer
	_, err := backup.WriteTo(&file)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "backup")
	require.NoError(t, os.WriteFile(path, file.Bytes(), 0o600))
	restored := filepath.Join(t.TempDir(), "restored")
	_, err = Restore(path, restored)
	require.NoError(t, err)
	r := openTestDurable(t, restored, Options{ChangesKeep: keepAll})
	defer r.Close()
	checkKeysKept(t, r, reqs)
}

// A backup taken while keyed writes are applied holds the key of every
// write it holds, and of none it does not: restored, a repeat of a write
// at or before the backup's revision is a replay, and of one after it is
// applied.
func TestBackupUnderConcurrentKeyedWritesHoldsTheirKeys(t *testing.T) {
	d := openTestDurable(t, t.TempDir(), Options{ChangesKeep: keepAll, SnapshotBytes: 8 << 10})
	defer d.Close()
	const writers, each = 4, 150
	sent := make([][]keyedRequest, writers)
	errs := make([]error, writers)
	backups := make(chan *snap.Backup, 1)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for i := range each {
				uid := membership.UID(w*each + i + 1)
				req := keyedRequest{name: fmt.Sprint(uid)}
				if rng.IntN(4) == 0 {
					b := storetest.KeyedBatch(membership.Batch{Writes: []membership.Write{
						{Op: membership.OpAdd, GroupID: fmt.Sprint("g", rng.IntN(3)), Users: []membership.User{{UID: uid}}},
					}}, req.name)
					req.batch = &b
				} else {
					req.write = storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: fmt.Sprint("g", rng.IntN(3)), Users: []membership.User{{UID: uid}}}, req.name)
				}
				var err error
				if req.res, req.bres, err = req.send(d); err != nil {
					errs[w] = err
					return
				}
				sent[w] = append(sent[w], req)
				if w == 0 && i == each/2 {
					backups <- d.Backup() // while the others write
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	backup := <-backups
	var file bytes.Buffer
	_, err := backup.WriteTo(&file)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "backup")
	require.NoError(t, os.WriteFile(path, file.Bytes(), 0o600))
	restored := filepath.Join(t.TempDir(), "restored")
	_, err = Restore(path, restored)
	require.NoError(t, err)
	r := openTestDurable(t, restored, Options{ChangesKeep: keepAll})
	defer r.Close()
	in, after := 0, 0
	for _, reqs := range sent {
		for _, req := range reqs {
			rev := req.res.Revision
			if req.batch != nil {
				rev = req.bres.Revision
			}
			res, bres, err := req.send(r)
			require.NoError(t, err, req.name)
			replayed := res.Replayed || bres.Replayed
			if rev <= backup.Revision() {
				in++
				assert.True(t, replayed, "write %s, at revision %d, is in the backup (revision %d)", req.name, rev, backup.Revision())
			} else {
				after++
				assert.False(t, replayed, "write %s, at revision %d, is not in the backup (revision %d)", req.name, rev, backup.Revision())
			}
		}
	}
	assert.Positive(t, in)
	assert.Positive(t, after)
}

// A log of version 5, as the build before Idempotency-Keys wrote it, is
// still read, and the records after it go into a new log of the current
// version: a build that reads version 5 at most refuses that one by its
// version.
func TestDurableReadsAVersion5Log(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	_, err := d.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{{UID: 1}, {UID: 2}}, Actor: 3})
	require.NoError(t, err)
	_, err = d.Batch(ctx, membership.Batch{Writes: []membership.Write{{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{2}}}})
	require.NoError(t, err)
	require.NoError(t, d.Close())
	path := newestLog(t, dir)
	v5, err := os.ReadFile(path)
	require.NoError(t, err)
	v5[4] = 5 // records without a key are as version 5 wrote them
	require.NoError(t, os.WriteFile(path, v5, 0o600))

	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	got, _ := storetest.ListAll(t, d, "g")
	assert.Equal(t, []membership.Member{{UID: 1}}, got)
	w := storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 4}}}, "k")
	first, err := d.Write(ctx, w)
	require.NoError(t, err)
	require.NoError(t, d.Close())
	old, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, v5, old, "the old log is left as it was")
	newest, err := os.ReadFile(newestLog(t, dir))
	require.NoError(t, err)
	h, err := wal.ReadHeader(newest)
	require.NoError(t, err)
	assert.Equal(t, wal.Version, h.Version)

	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	got, _ = storetest.ListAll(t, d, "g")
	assert.Equal(t, []membership.Member{{UID: 1}, {UID: 4}}, got)
	checkReplayed(t, d, []keyedRequest{{name: "write", write: w, res: first}})
}

// Every backup taken while keyed writes are applied holds the key of every
// keyed write whose change it holds: memory remembers a key just after it
// applies the change, and a backup must not come between.
func TestBackupsNeverHoldAKeyedChangeWithoutItsKey(t *testing.T) {
	d := openTestDurable(t, t.TempDir(), Options{ChangesKeep: keepAll})
	defer d.Close()
	memberstest.BackupsHoldKeysWithTheirChanges(t, d, d.Backup, 8, 2000, 300)
}
