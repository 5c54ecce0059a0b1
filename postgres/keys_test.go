package postgres

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/postgres/internal/pgtest"
)

// viaLog writes w to the log and returns its writer's answer, past what
// the instance would answer from its memory: as an instance that has not
// applied the change with w's key yet would.
func viaLog(t *testing.T, s *Store, w membership.Write) (membership.Result, error) {
	t.Helper()
	c, err := changeOf(w)
	require.NoError(t, err)
	return s.commit(context.Background(), c)
}

// batchViaLog is viaLog of a batch.
func batchViaLog(s *Store, b membership.Batch) (membership.BatchResult, error) {
	o := s.submit(context.Background(), batchChange(b))
	return o.batch, o.err
}

// latestOf returns the latest revision s has applied.
func latestOf(t *testing.T, s *Store) membership.Revision {
	t.Helper()
	_, latest, err := s.Changes(context.Background(), membership.ChangeOptions{})
	require.NoError(t, err)
	return latest
}

// settle writes a change on s and waits until each of others has applied
// it: they have then applied every change s had, replays included (which
// take no revision to wait for).
func settle(t *testing.T, s *Store, others ...*Store) {
	t.Helper()
	uid := membership.UID(latestOf(t, s) + 1) // new to the group: the add changes it
	res, err := storetest.Add(context.Background(), s, "settle", storetest.UsersOf(uid))
	require.NoError(t, err)
	require.NotZero(t, res.Count)
	for _, o := range others {
		untilApplied(t, o, res.Revision)
	}
}

// syncBuffer is a bytes.Buffer for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// openLogged opens a store on url whose log is returned.
func openLogged(t *testing.T, url string) (*Store, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	s, err := Open(context.Background(), url, Options{ChangesKeep: membership.DefaultChangesKeep, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, logs
}

// A keyed write retried on another instance is a replay there: that
// instance answers it from what it applied, without a row, or, when the
// retry reaches the log before that instance has applied the first, the
// log answers it so; either way with the first's result, and nothing is
// applied twice.
func TestAKeyedRetryOnAnotherInstanceIsAReplay(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	first, err := a.Write(ctx, storetest.KeyedAdd("g", "k", 1, 2))
	require.NoError(t, err)
	assert.False(t, first.Replayed)
	assert.Equal(t, 2, first.Count)
	between, err := storetest.Remove(ctx, a, "g", []membership.UID{1}) // another writer, in between
	require.NoError(t, err)
	untilApplied(t, b, between.Revision)

	rows := logRows(t, b)
	again, err := b.Write(ctx, storetest.KeyedAdd("g", "k", 1, 2))
	require.NoError(t, err)
	assert.True(t, again.Replayed)
	again.Replayed = false
	assert.Equal(t, first, again, "the first's result, its revision included")
	assert.Equal(t, rows, logRows(t, b), "answered from what the instance applied: no row")

	again, err = viaLog(t, b, storetest.KeyedAdd("g", "k", 1, 2))
	require.NoError(t, err)
	assert.True(t, again.Replayed, "the log's answer")
	again.Replayed = false
	assert.Equal(t, first, again, "the log's answer: the first's result")
	assert.Equal(t, rows+1, logRows(t, b))
	assert.Equal(t, between.Revision, latestOf(t, b), "a replay takes no revision")

	settle(t, b, a)
	uids := []membership.UID{1, 2}
	want := snapshotOf(t, a, []string{"g"}, uids)
	assert.Equal(t, []membership.Member{{UID: 2}}, want.Lists["g"], "user 1 was not added again")
	assert.Equal(t, want, snapshotOf(t, b, []string{"g"}, uids), "both instances list the same")
}

// Writers on two instances send one keyed request at once: it is applied
// once, on both instances alike, and every writer gets its result.
func TestWritersWithOneKeyOnTwoInstancesApplyItOnce(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	stores := []*Store{a, b}
	const rounds, writers = 5, 16
	var all []membership.UID
	for round := range rounds {
		before := latestOf(t, a)
		require.Equal(t, before, latestOf(t, b), "round %d starts with both instances at one revision", round)
		key := fmt.Sprintf("race-%d", round)
		uid := membership.UID(10 * (round + 1))
		all = append(all, uid, uid+1, uid+2)
		results := make([]membership.Result, writers)
		errs := make([]error, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				<-start
				results[i], errs[i] = stores[i%2].Write(ctx, storetest.KeyedAdd("g", key, uid, uid+1, uid+2))
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i := range writers {
			require.NoError(t, errs[i], "round %d, writer %d", round, i)
			if !results[i].Replayed {
				assert.Equal(t, -1, winner, "round %d: writers %d and %d both applied it", round, winner, i)
				winner = i
			}
		}
		require.NotEqual(t, -1, winner, "round %d: nobody applied it", round)
		want := results[winner]
		assert.Equal(t, membership.Result{Count: 3, Revision: before + 1}, want, "round %d", round)
		for i := range writers {
			got := results[i]
			got.Replayed = false
			assert.Equal(t, want, got, "round %d, writer %d gets the first result", round, i)
		}
		for _, s := range stores {
			assert.Equal(t, before+1, latestOf(t, s), "round %d: one revision", round)
		}
		var inLog int
		require.NoError(t, a.pool.QueryRow(ctx, "SELECT count(*) FROM membership_changes WHERE idem_key = $1", key).Scan(&inLog))
		t.Logf("round %d: %d of %d writers reached the log (the winner on instance %d)", round, inLog, writers, winner%2)
	}
	settle(t, a, b)
	settle(t, b, a)
	want := snapshotOf(t, a, []string{"g"}, all)
	assert.Len(t, want.Lists["g"], 3*rounds)
	assert.Equal(t, want, snapshotOf(t, b, []string{"g"}, all), "both instances list the same")
	changes := 0
	for _, c := range want.Feed {
		if c.GroupID == "g" {
			changes++
		}
	}
	assert.Equal(t, rounds, changes, "one change a round")
}

// The same key with another request is refused on any instance, from
// what it applied or in the log, and changes nothing.
func TestAKeyReusedOnAnotherInstanceIsRefused(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a := openOn(t, url, membership.DefaultChangesKeep)
	b, logs := openLogged(t, url)
	first, err := a.Write(ctx, storetest.KeyedAdd("g", "k", 1))
	require.NoError(t, err)
	untilApplied(t, b, first.Revision)
	batch := storetest.KeyedBatch(membership.Batch{Writes: []membership.Write{{Op: membership.OpAdd, GroupID: "g", Users: storetest.UsersOf(1)}}}, "k")

	rows := logRows(t, b)
	_, err = b.Write(ctx, storetest.KeyedAdd("g", "k", 2))
	assert.Equal(t, membership.CodeIdempotencyKeyReused, membership.ErrorCode(err), "%v", err)
	_, err = b.Batch(ctx, batch)
	assert.Equal(t, membership.CodeIdempotencyKeyReused, membership.ErrorCode(err), "a batch with a write's key: %v", err)
	assert.Equal(t, rows, logRows(t, b), "refused without a row")

	_, err = viaLog(t, b, storetest.KeyedAdd("g", "k", 2))
	assert.Equal(t, membership.CodeIdempotencyKeyReused, membership.ErrorCode(err), "the log's answer: %v", err)
	_, err = batchViaLog(b, batch)
	assert.Equal(t, membership.CodeIdempotencyKeyReused, membership.ErrorCode(err), "the log's answer to a batch: %v", err)
	assert.Equal(t, first.Revision, latestOf(t, b), "refused: no revision")

	settle(t, b, a)
	uids := []membership.UID{1, 2}
	want := snapshotOf(t, a, []string{"g"}, uids)
	assert.Equal(t, []membership.Member{{UID: 1}}, want.Lists["g"])
	assert.Equal(t, want, snapshotOf(t, b, []string{"g"}, uids))
	assert.NotContains(t, logs.String(), "applying a change of the log failed", "a reused key is an answer, not a failure")
}

// A keyed batch retried on another instance is a replay there, as a
// write is.
func TestAKeyedBatchRetriedOnAnotherInstanceIsAReplay(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	_, err := storetest.Add(ctx, a, "from", storetest.UsersOf(1, 2))
	require.NoError(t, err)
	move := storetest.KeyedBatch(membership.Batch{Actor: 4, Writes: []membership.Write{
		{Op: membership.OpRemove, GroupID: "from", UIDs: []membership.UID{1}},
		{Op: membership.OpAdd, GroupID: "to", Users: storetest.UsersOf(1)},
	}}, "move")
	first, err := a.Batch(ctx, move)
	require.NoError(t, err)
	assert.False(t, first.Replayed)
	back, err := a.Batch(ctx, membership.Batch{Writes: []membership.Write{ // moved back, in between
		{Op: membership.OpRemove, GroupID: "to", UIDs: []membership.UID{1}},
		{Op: membership.OpAdd, GroupID: "from", Users: storetest.UsersOf(1)},
	}})
	require.NoError(t, err)
	untilApplied(t, b, back.Revision)

	rows := logRows(t, b)
	again, err := b.Batch(ctx, move)
	require.NoError(t, err)
	assert.True(t, again.Replayed)
	again.Replayed = false
	assert.Equal(t, first, again, "the first's results and revision")
	assert.Equal(t, rows, logRows(t, b), "answered from what the instance applied: no row")

	again, err = batchViaLog(b, move)
	require.NoError(t, err)
	assert.True(t, again.Replayed, "the log's answer")
	again.Replayed = false
	assert.Equal(t, first, again, "the log's answer: the first's results")
	assert.Equal(t, rows+1, logRows(t, b))
	assert.Equal(t, back.Revision, latestOf(t, b), "a replay takes no revision")

	_, err = b.Write(ctx, storetest.KeyedAdd("to", "move", 1))
	assert.Equal(t, membership.CodeIdempotencyKeyReused, membership.ErrorCode(err), "a write with a batch's key: %v", err)

	settle(t, b, a)
	groups, uids := []string{"from", "to"}, []membership.UID{1, 2}
	want := snapshotOf(t, a, groups, uids)
	assert.Equal(t, []membership.Member{{UID: 1}, {UID: 2}}, want.Lists["from"], "the move was not made again")
	assert.Empty(t, want.Lists["to"])
	assert.Equal(t, want, snapshotOf(t, b, groups, uids))
}

// An instance started after keyed changes were logged rebuilds the keys
// from the log: a repeat there is a replay, a write that changed nothing
// included, the same key for another request is refused, and the key of a
// write that failed is free.
func TestAnInstanceStartedAfterwardsRemembersTheKeys(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a := openOn(t, url, membership.DefaultChangesKeep)
	w := storetest.KeyedAdd("g", "k", 1, 2)
	first, err := a.Write(ctx, w)
	require.NoError(t, err)
	batch := storetest.KeyedBatch(membership.Batch{Writes: []membership.Write{
		{Op: membership.OpAdd, GroupID: "h", Users: storetest.UsersOf(3)},
		{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{2}},
	}}, "kb")
	firstBatch, err := a.Batch(ctx, batch)
	require.NoError(t, err)
	noop := storetest.KeyedAdd("g", "noop", 1)
	firstNoop, err := a.Write(ctx, noop)
	require.NoError(t, err)
	assert.Zero(t, firstNoop.Count, "it changes nothing")
	failing := storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: storetest.UsersOf(5), If: membership.Precondition{Empty: true}}, "failing")
	_, err = a.Write(ctx, failing)
	require.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err), "%v", err)
	_, err = storetest.Remove(ctx, a, "g", []membership.UID{1}) // in between
	require.NoError(t, err)

	c := openOn(t, url, membership.DefaultChangesKeep) // reads the whole log
	rows := logRows(t, c)
	again, err := c.Write(ctx, w)
	require.NoError(t, err)
	assert.True(t, again.Replayed)
	again.Replayed = false
	assert.Equal(t, first, again)
	again, err = c.Write(ctx, noop)
	require.NoError(t, err)
	assert.True(t, again.Replayed, "a keyed write that changed nothing is remembered")
	again.Replayed = false
	assert.Equal(t, firstNoop, again)
	againBatch, err := c.Batch(ctx, batch)
	require.NoError(t, err)
	assert.True(t, againBatch.Replayed)
	againBatch.Replayed = false
	assert.Equal(t, firstBatch, againBatch)
	_, err = c.Write(ctx, storetest.KeyedAdd("g", "k", 9))
	assert.Equal(t, membership.CodeIdempotencyKeyReused, membership.ErrorCode(err), "%v", err)
	assert.Equal(t, rows, logRows(t, c), "all answered from what the instance applied")

	again, err = viaLog(t, c, w)
	require.NoError(t, err)
	assert.True(t, again.Replayed, "the log's answer on the new instance")

	_, err = c.Write(ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: "g"})
	require.NoError(t, err)
	res, err := c.Write(ctx, failing)
	require.NoError(t, err, "the failed write's key is free: the retry is a first attempt")
	assert.False(t, res.Replayed)
	assert.Equal(t, 1, res.Count)

	settle(t, c, a)
	groups, uids := []string{"g", "h"}, []membership.UID{1, 2, 3, 5}
	want := snapshotOf(t, a, groups, uids)
	assert.Equal(t, []membership.Member{{UID: 5}}, want.Lists["g"])
	assert.Equal(t, want, snapshotOf(t, c, groups, uids))
}

// A keyed write that changes nothing still goes to the log, so that every
// instance remembers its key; without a key it is answered without a row.
func TestAKeyedWriteThatChangesNothingIsLogged(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	setup, err := storetest.Add(ctx, a, "g", storetest.UsersOf(1))
	require.NoError(t, err)
	untilApplied(t, b, setup.Revision)
	nothing := []membership.Write{
		{Op: membership.OpAdd, GroupID: "g"},
		{Op: membership.OpRemove, GroupID: "g"},
		{Op: membership.OpDeleteGroup, GroupID: "empty"},
		{Op: membership.OpRemoveUser, UIDs: []membership.UID{99}},
	}
	rows := logRows(t, a)
	for _, w := range nothing {
		_, err := a.Write(ctx, w)
		require.NoError(t, err, w.Op)
	}
	require.Equal(t, rows, logRows(t, a), "without a key: answered without a row")
	for i, w := range nothing {
		rows := logRows(t, a)
		key := fmt.Sprint("nothing-", i)
		first, err := a.Write(ctx, storetest.Keyed(w, key))
		require.NoError(t, err, w.Op)
		assert.False(t, first.Replayed)
		assert.Zero(t, first.Count)
		assert.Equal(t, rows+1, logRows(t, a), "%s with a key: a row", w.Op)
		again, err := b.Write(ctx, storetest.Keyed(w, key))
		require.NoError(t, err, w.Op)
		assert.True(t, again.Replayed, "%s: the other instance remembers the key", w.Op)
		again.Replayed = false
		assert.Equal(t, first, again, w.Op)
	}
	assert.Equal(t, setup.Revision, latestOf(t, a), "nothing took a revision")
}

// place writes w to the log at pos, placed at at, as the sequencer would.
func place(t *testing.T, pool *pgxpool.Pool, pos int64, at time.Time, w membership.Write) {
	t.Helper()
	c, err := changeOf(w)
	require.NoError(t, err)
	var key *string
	var fingerprint []byte
	if w.Idem.Key != "" {
		key, fingerprint = &w.Idem.Key, w.Idem.Fingerprint[:]
	}
	_, err = pool.Exec(context.Background(), `INSERT INTO membership_changes
		(pos, sequenced_at, ticket, op, group_id, uids, nicknames, if_revisions, if_exists, if_empty, actor, idem_key, idem_fingerprint)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		pos, at, pos, c.op, c.groupID, c.uids, c.nicknames, c.ifRevisions, c.ifExists, c.ifEmpty, c.actor, key, fingerprint)
	require.NoError(t, err)
}

// An instance whose clock is past a key's retention (it runs behind the
// log, or ahead of the database's clock) still decides the keyed changes
// it applies as every instance does, as of their times in the log: asking
// whether a retry repeats a key forgets nothing.
func TestAskingAboutAKeyPastItsRetentionForgetsNothing(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	opts := Options{ChangesKeep: membership.DefaultChangesKeep, IdempotencyRetention: time.Hour}
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	_, err = Migrate(ctx, pool)
	require.NoError(t, err)
	t0 := time.Now().Add(-3 * time.Hour)
	w := storetest.KeyedAdd("g", "k", 1)
	place(t, pool, 1, t0, w)
	b, err := openStill(ctx, url, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })

	// A retry on b: past the retention by b's clock, it is a new request,
	// for the log; its context ends before it is written, so that nothing
	// more reaches the log.
	ended, cancel := context.WithCancel(ctx)
	cancel()
	_, err = b.Write(ended, w)
	require.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err), "%v", err)
	// The log holds, within the retention of the first by the log's times,
	// a removal, then the same request again: a repeat, everywhere.
	place(t, pool, 2, t0.Add(10*time.Minute), membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{1}})
	place(t, pool, 3, t0.Add(20*time.Minute), w)
	require.NoError(t, b.catchUp(ctx, b.pool))
	c, err := openStill(ctx, url, opts) // reads the whole log
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.Equal(t, 3, logRows(t, c))
	want := snapshotOf(t, c, []string{"g"}, []membership.UID{1})
	assert.Empty(t, want.Lists["g"], "the third change repeats the first: user 1 is not added again")
	assert.Equal(t, want, snapshotOf(t, b, []string{"g"}, []membership.UID{1}), "the instance that was asked decides alike")
}

// The database refuses a key without a fingerprint of 16 bytes, a
// fingerprint without a key, and an empty key.
func TestTheLogRefusesAKeyWithoutItsFingerprint(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, 0)
	k, empty := "k", ""
	for _, bad := range []struct {
		key         *string
		fingerprint []byte
	}{
		{&k, nil},
		{&k, []byte{1, 2, 3}},
		{nil, make([]byte, 16)},
		{&empty, make([]byte, 16)},
	} {
		_, err := s.pool.Exec(ctx, `INSERT INTO membership_changes (ticket, op, group_id, uids, idem_key, idem_fingerprint)
			VALUES (1, 1, 'g', '{1}', $1, $2)`, bad.key, bad.fingerprint)
		assert.ErrorContains(t, err, "membership_changes_idem_check", "%v % x", bad.key, bad.fingerprint)
	}
	assert.Zero(t, logRows(t, s))
}

// While the database is away, an instance answers a retry of a keyed
// write it has applied from memory; a keyed write it has not is refused.
func TestAReplayIsAnsweredWhileTheDatabaseIsAway(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	p := newProxy(t, fmt.Sprintf("%s:%d", cfg.Host, cfg.Port))
	s, err := Open(ctx, fmt.Sprintf("postgres://%s@%s/%s", cfg.User, p.ln.Addr(), cfg.Database), Options{CommitTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer s.Close()
	first, err := s.Write(ctx, storetest.KeyedAdd("g", "k", 1))
	require.NoError(t, err)

	p.cut()
	untilWritable(t, s, false)
	again, err := s.Write(ctx, storetest.KeyedAdd("g", "k", 1))
	require.NoError(t, err)
	assert.True(t, again.Replayed)
	again.Replayed = false
	assert.Equal(t, first, again)
	_, err = s.Write(ctx, storetest.KeyedAdd("g", "k2", 2))
	assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err), "%v", err)
}

// The bounds of the keys are the database's, set by the first instance:
// an instance started with other flags decides the keyed changes of the
// log as every other does, so that no instance, and no restart with other
// flags, gives the log another history.
func TestEveryInstanceUsesTheDatabasesKeyBounds(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	first, err := openStill(ctx, url, Options{ChangesKeep: membership.DefaultChangesKeep, IdempotencyRetention: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = first.Close() })
	t0 := time.Now().Add(-3 * time.Hour)
	w := storetest.KeyedAdd("g", "k", 1)
	place(t, first.pool, 1, t0, w)
	place(t, first.pool, 2, t0.Add(10*time.Minute), membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{1}})
	place(t, first.pool, 3, t0.Add(20*time.Minute), w)
	require.NoError(t, first.catchUp(ctx, first.pool))

	other, err := openStill(ctx, url, Options{ChangesKeep: membership.DefaultChangesKeep, IdempotencyRetention: time.Minute, IdempotencyBytes: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	want := snapshotOf(t, first, []string{"g"}, []membership.UID{1})
	assert.Empty(t, want.Lists["g"], "the third change repeats the first within the database's hour")
	assert.Equal(t, want, snapshotOf(t, other, []string{"g"}, []membership.UID{1}), "an instance whose flags say a minute decides alike")
	assert.Equal(t, membership.DefaultIdempotencyBytes, int(other.Stats().Keys.MaxBytes))
}
