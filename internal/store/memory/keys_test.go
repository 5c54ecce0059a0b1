package memory

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory/keys"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/internal/store/storetest/memberstest"
	"example.com/groupmembership/membership"
)

var keyT0 = time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)

// keyedAdd is an add of uids to group "g" with the Idempotency key, as of
// at (zero: none).
func keyedAdd(key string, at time.Time, uids ...membership.UID) membership.Write {
	w := storetest.KeyedAdd("g", key, uids...)
	w.Time = at // not in the fingerprint
	return w
}

func TestAKeyIsRememberedForItsRetentionAsOfEachWritesTime(t *testing.T) {
	m := NewWith(Options{ChangesKeep: 10, IdempotencyRetention: time.Hour})
	first, err := m.Apply(keyedAdd("k", keyT0, 1))
	require.NoError(t, err)
	_, err = m.Apply(membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{1}, Time: keyT0})
	require.NoError(t, err)

	res, err := m.Apply(keyedAdd("k", keyT0.Add(time.Hour), 1))
	require.NoError(t, err)
	assert.True(t, res.Replayed, "at the end of the retention the key is remembered")
	assert.Equal(t, first.Revision, res.Revision)

	res, err = m.Apply(keyedAdd("k", keyT0.Add(time.Hour+time.Millisecond), 1))
	require.NoError(t, err)
	assert.False(t, res.Replayed, "past the retention the key is forgotten, and the write applied anew")
	assert.Equal(t, 1, res.Count)
	assert.Equal(t, uint64(1), m.Stats().Keys.Dropped)
}

func TestTheOldestKeysAreDroppedPastTheBudget(t *testing.T) {
	// Each key below costs keys.EntryOverhead + 2 + keys.ResultBytes.
	cost := int64(keys.EntryOverhead + 2 + keys.ResultBytes)
	m := NewWith(Options{IdempotencyBytes: 3 * cost})
	for i := range 5 {
		_, err := m.Apply(keyedAdd(fmt.Sprintf("k%d", i), keyT0, membership.UID(i+1)))
		require.NoError(t, err)
	}
	st := m.Stats().Keys
	assert.Equal(t, int64(3), st.Held)
	assert.Equal(t, 3*cost, st.Bytes)
	assert.Equal(t, uint64(2), st.Dropped)
	for i, replayed := range []bool{false, false, true, true, true} {
		_, _, ok, err := m.keys.Replay("", keyedAdd(fmt.Sprintf("k%d", i), keyT0, membership.UID(i+1)).Idem, false, keyT0)
		require.NoError(t, err)
		assert.Equal(t, replayed, ok, "k%d", i)
	}
}

func TestTheNewestKeyIsKeptEvenOverTheBudget(t *testing.T) {
	m := NewWith(Options{IdempotencyBytes: 1})
	_, err := m.Apply(keyedAdd("k", keyT0, 1))
	require.NoError(t, err)
	res, err := m.Apply(keyedAdd("k", keyT0, 1))
	require.NoError(t, err)
	assert.True(t, res.Replayed)
}

func TestKeysGoThroughASnapshot(t *testing.T) {
	m := NewWith(Options{ChangesKeep: 10})
	first, err := m.Apply(keyedAdd("k", keyT0, 1, 2))
	require.NoError(t, err)
	b := storetest.KeyedBatch(membership.Batch{Time: keyT0, Writes: []membership.Write{{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{2}}}}, "b")
	firstBatch, err := m.Batch(context.Background(), b)
	require.NoError(t, err)

	copied := NewWith(Options{ChangesKeep: 10})
	copied.Import(m.Export())
	res, err := copied.Apply(keyedAdd("k", keyT0, 1, 2))
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	res.Replayed = false
	assert.Equal(t, first, res)
	again, err := copied.Batch(context.Background(), b)
	require.NoError(t, err)
	assert.True(t, again.Replayed)
	again.Replayed = false
	assert.Equal(t, firstBatch, again)
	_, err = copied.Apply(keyedAdd("k", keyT0, 3))
	assert.Equal(t, membership.CodeIdempotencyKeyReused, membership.ErrorCode(err))
	assert.Equal(t, int64(2), copied.Stats().Keys.Held)
}

// holdGroup holds g's shard, so that a write to it waits, until the
// returned func is called.
func holdGroup(m *Store, groupID string) (release func()) {
	s := m.shardOf(groupID)
	s.mu.Lock()
	return s.mu.Unlock
}

// untilInFlight returns once a keyed write is in flight in m, held up on
// its way to a group's shard.
func untilInFlight(t *testing.T) {
	t.Helper()
	require.True(t, waitForGoroutineIn("sync.(*RWMutex).Lock", "keys.(*Table).Do"), "a keyed write in flight")
}

func TestARepeatWhileTheFirstIsInFlightWaitsForIt(t *testing.T) {
	m := New()
	release := holdGroup(m, "g")
	type answer struct {
		res membership.Result
		err error
	}
	first, second := make(chan answer, 1), make(chan answer, 1)
	go func() {
		res, err := m.Write(context.Background(), keyedAdd("k", time.Time{}, 1))
		first <- answer{res, err}
	}()
	untilInFlight(t)

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.Write(canceled, keyedAdd("k", time.Time{}, 1))
	assert.Equal(t, membership.CodeIdempotencyKeyInFlight, membership.ErrorCode(err), "a repeat that cannot wait is told the first is in flight")

	go func() {
		res, err := m.Write(context.Background(), keyedAdd("k", time.Time{}, 1))
		second <- answer{res, err}
	}()
	release()
	a, b := <-first, <-second
	require.NoError(t, a.err)
	require.NoError(t, b.err)
	assert.False(t, a.res.Replayed)
	assert.True(t, b.res.Replayed, "the repeat waited for the first and got its result")
	assert.Equal(t, a.res.Revision, b.res.Revision)
	assert.Equal(t, membership.Revision(1), m.LatestRevision())
}

func TestARefusedWriteIsNotRemembered(t *testing.T) {
	m := New()
	_, err := m.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 9}}})
	require.NoError(t, err)
	w := keyedAdd("k", time.Time{}, 1)
	w.If.Empty = true
	w = storetest.Keyed(w, "k")
	_, err = m.Write(context.Background(), w)
	require.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err))
	assert.Equal(t, int64(0), m.Stats().Keys.Held, "a refused write is not remembered")
}

// Replay only reads: asked as of a time past a key's retention, it says it
// does not remember the key, but does not forget it. A store that keeps a
// log asks with the wall clock before it logs a write, while writes logged
// before, with earlier commit times, still wait to be applied: those must
// be decided as a replay of the log decides them, with no Replay in
// between.
func TestReplayForgetsNothing(t *testing.T) {
	m := NewWith(Options{IdempotencyRetention: time.Hour})
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	w := storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}}, Time: at}, "k")
	first, err := m.Apply(w)
	require.NoError(t, err)

	_, _, ok, err := m.keys.Replay(w.Principal, w.Idem, false, at.Add(2*time.Hour))
	require.NoError(t, err)
	assert.False(t, ok, "past its retention, the key is not remembered")
	_, _, ok, err = m.keys.Replay(w.Principal, w.Idem, false, at.Add(time.Minute))
	require.NoError(t, err)
	assert.True(t, ok, "but it was not forgotten")

	w.Time = at.Add(59 * time.Minute) // logged before the Replay above
	again, err := m.Apply(w)
	require.NoError(t, err)
	assert.True(t, again.Replayed, "a repeat applied as of its commit time is a replay")
	assert.Equal(t, first.Revision, again.Revision)
	assert.Equal(t, int64(1), m.Stats().Keys.Held)
}

// A backup never holds a keyed write's change without its key, nor a key
// without its change: a store restored from it answers a repeat of every
// keyed write it holds, and of no other, as a replay.
func TestBackupsHoldEveryKeyedChangeWithItsKey(t *testing.T) {
	m := New()
	memberstest.BackupsHoldKeysWithTheirChanges(t, m, m.Backup, 4, 2000, 200)
}
