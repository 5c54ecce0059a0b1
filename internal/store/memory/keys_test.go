package memory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

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

	_, _, ok, err := m.Replay(w.Idem, false, at.Add(2*time.Hour))
	require.NoError(t, err)
	assert.False(t, ok, "past its retention, the key is not remembered")
	_, _, ok, err = m.Replay(w.Idem, false, at.Add(time.Minute))
	require.NoError(t, err)
	assert.True(t, ok, "but it was not forgotten")

	w.Time = at.Add(59 * time.Minute) // logged before the Replay above
	again, err := m.Apply(w)
	require.NoError(t, err)
	assert.True(t, again.Replayed, "a repeat applied as of its commit time is a replay")
	assert.Equal(t, first.Revision, again.Revision)
	assert.Equal(t, int64(1), m.Stats().Keys.Held)
}
