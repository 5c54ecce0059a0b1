package memory

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/membership"
)

// A round applied together (WriteExpiries) leaves the store, its feed and
// its counts exactly as the same writes applied one after another: users in
// several groups that all expire (the last of their changes clears their
// nickname), a group's memberships split over several writes, a write that
// names a uid twice, expiries extended or ended since they were found due,
// groups emptied (and dropped), users left in other groups.
func TestARoundAppliedTogetherIsTheWritesOneAfterAnother(t *testing.T) {
	for seed := range uint64(4) {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			ctx := context.Background()
			at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			one, together := twins(Options{ChangesKeep: 1 << 20, Shards: 8})
			rng := rand.New(rand.NewPCG(seed, 7))
			var writes []membership.Write
			for g := range 12 {
				w := membership.Write{Op: membership.OpAdd, GroupID: "g" + strconv.Itoa(g), Time: at.Add(-time.Hour)}
				for range 1 + rng.IntN(300) {
					u := membership.User{UID: membership.UID(1 + rng.IntN(400))}
					if g >= 9 || rng.IntN(4) > 0 { // most expire, some stay; groups 9 to 11 expire whole
						u.Expiry = membership.Expiry{Set: true, At: at.Add(-time.Duration(rng.IntN(3)) * time.Second)}
					}
					if rng.IntN(3) == 0 {
						u.Nickname, u.HasNickname = "n"+strconv.Itoa(int(u.UID)), true
					}
					w.Users = append(w.Users, u)
				}
				writes = append(writes, w)
			}
			for _, w := range writes {
				_, err := one.Apply(w)
				require.NoError(t, err)
				_, err = together.Apply(w)
				require.NoError(t, err)
			}
			due := one.DueExpiries(at, 1<<20)
			require.Equal(t, len(due), len(together.DueExpiries(at, 1<<20)))
			require.NotEmpty(t, due)
			var ws []membership.Write
			for _, d := range due {
				w := d.Write
				if len(w.UIDs) > 4 { // a group in two writes, the second naming a uid twice
					half := len(w.UIDs) / 2
					first, second := w, w
					first.UIDs, second.UIDs = w.UIDs[:half], append([]membership.UID{w.UIDs[half]}, w.UIDs[half:]...)
					ws = append(ws, first, second)
					continue
				}
				ws = append(ws, w)
			}
			// Since they were found due: one expiry extended, one ended,
			// in both stores alike, of groups 0 to 8 (the first and last
			// writes to them, in the due set's order, which is the
			// groups' numbers').
			var kept []membership.Write
			for _, w := range ws {
				if n, _ := strconv.Atoi(w.GroupID[1:]); n < 9 {
					kept = append(kept, w)
				}
			}
			first, last := kept[0], kept[len(kept)-1]
			stale := membership.Write{Op: membership.OpAdd, GroupID: first.GroupID, Time: at, Users: []membership.User{
				{UID: first.UIDs[0], Expiry: membership.Expiry{Set: true, At: at.Add(time.Hour)}},
				{UID: last.UIDs[0], Expiry: membership.Expiry{Set: true}},
			}}
			if last.GroupID != first.GroupID {
				stale.Users = stale.Users[:1]
			}
			for _, s := range []*Store{one, together} {
				_, err := s.Apply(stale)
				require.NoError(t, err)
			}
			for i := range ws {
				ws[i].Time = at.Add(time.Second)
			}

			var want []membership.Result
			for _, w := range ws {
				res, err := one.Apply(w)
				require.NoError(t, err)
				want = append(want, res)
			}
			got, err := together.ApplyExpiries(ws)
			require.NoError(t, err)
			assert.Equal(t, want, got)

			assert.Equal(t, sortedExport(one), sortedExport(together))
			assert.Equal(t, one.Stats(), together.Stats())
			assert.Equal(t, one.ExpiryCount(), together.ExpiryCount())
			assert.Equal(t, one.LatestRevision(), together.LatestRevision())
			wantChanges, _, err := one.Changes(ctx, membership.ChangeOptions{Limit: 1 << 20})
			require.NoError(t, err)
			gotChanges, _, err := together.Changes(ctx, membership.ChangeOptions{Limit: 1 << 20})
			require.NoError(t, err)
			assert.Equal(t, wantChanges, gotChanges)
			cleared := 0
			for _, c := range gotChanges {
				if c.Op == membership.OpExpire {
					cleared += len(c.Nicknames)
				}
			}
			assert.Positive(t, cleared, "some expiry left a user with a nickname in no group")
			assert.Equal(t, int64(9), together.Stats().Groups, "groups 9 to 11 emptied and dropped")
		})
	}
}

// A round holds expires only: any other write is refused, and nothing of
// the round applied.
func TestARoundRefusesAnyOtherOp(t *testing.T) {
	ctx := context.Background()
	m := New()
	at := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	_, err := m.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{
		{UID: 1, Expiry: membership.Expiry{Set: true, At: at.Add(2 * time.Hour)}},
	}})
	require.NoError(t, err)
	rev := m.LatestRevision()
	_, err = m.WriteExpiries(ctx, []membership.Write{
		{Op: membership.OpExpire, GroupID: "g", UIDs: []membership.UID{1}, AsOf: at.Add(3 * time.Hour)},
		{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{1}},
	})
	require.ErrorContains(t, err, "write 1: not an expire without an Idempotency key")
	assert.Equal(t, rev, m.LatestRevision())
	_, ok, err := m.Member(ctx, "g", 1)
	require.NoError(t, err)
	assert.True(t, ok)
}

// A round of expires that end nothing (none due, no group) records no
// change, and answers each as Write would have.
func TestARoundThatEndsNothingRecordsNothing(t *testing.T) {
	ctx := context.Background()
	at := time.Now().Truncate(time.Millisecond)
	add := membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{
		{UID: 1, Expiry: membership.Expiry{Set: true, At: at.Add(time.Hour)}},
	}}
	round := []membership.Write{
		{Op: membership.OpExpire, GroupID: "g", UIDs: []membership.UID{1}, AsOf: at},
		{Op: membership.OpExpire, GroupID: "absent", UIDs: []membership.UID{1}, AsOf: at},
		{Op: membership.OpExpire, GroupID: "g", AsOf: at.Add(2 * time.Hour)},
	}
	one, together := New(), New()
	var want []membership.Result
	for _, m := range []*Store{one, together} {
		_, err := m.Write(ctx, add)
		require.NoError(t, err)
	}
	for _, w := range round {
		res, err := one.Write(ctx, w)
		require.NoError(t, err)
		want = append(want, res)
	}
	rev := together.LatestRevision()
	results, err := together.WriteExpiries(ctx, round)
	require.NoError(t, err)
	assert.Equal(t, want, results)
	assert.Equal(t, membership.Revision(1), results[0].Revision, "g's")
	assert.Equal(t, rev, together.LatestRevision())
	results, err = together.WriteExpiries(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, results)
}

// sortedExport returns m's state with its groups in id order: Export
// gives them in no order of its own.
func sortedExport(m *Store) *snap.State {
	st := m.Export()
	slices.SortFunc(st.Groups, func(a, b snap.Group) int { return strings.Compare(a.ID, b.ID) })
	return st
}

// Expiries due at one time come in the order of their groups' ids, made
// in any order, in any shards: not in that of the groups' numbers, which
// are their slots' in their shards.
func TestExpiriesDueAtOneTimeComeByGroupID(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	m := NewWith(Options{ChangesKeep: 1 << 20})
	rng := rand.New(rand.NewPCG(5, 6))
	var ids []string
	for _, g := range rng.Perm(40) {
		id := "g" + strconv.Itoa(100+g)
		ids = append(ids, id)
		w := membership.Write{Op: membership.OpAdd, GroupID: id, Time: at.Add(-time.Hour),
			Users: []membership.User{{UID: membership.UID(g + 1), Expiry: membership.Expiry{Set: true, At: at}}}}
		_, err := m.Write(ctx, w)
		require.NoError(t, err)
	}
	slices.Sort(ids)
	due := m.DueExpiries(at, 1000)
	var got []string
	for _, d := range due {
		got = append(got, d.Write.GroupID)
	}
	assert.Equal(t, ids, got)
}
