package memory

import (
	"context"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory/expiry"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/membership"
)

// roundUID draws uids near 0, near MaxInt64, around shard boundaries, and
// from a small pool so that users share groups.
func roundUID(rng *rand.Rand) membership.UID {
	switch rng.IntN(5) {
	case 0:
		return membership.UID(rng.Int64N(8))
	case 1:
		return membership.UID(math.MaxInt64 - rng.Int64N(8))
	case 2:
		return membership.UID(1 + rng.Int64N(math.MaxInt64-1))
	default:
		return membership.UID(rng.Int64N(120))
	}
}

// roundInternals is what Export does not show but later writes depend on:
// the due set, the group numbers, the nicknames.
func roundInternals(m *Store) string {
	var due []expiry.Key
	for k := range m.due.All {
		due = append(due, k)
	}
	names := map[uint32]string{}
	for i := range m.shards {
		for g := range m.shards[i].groups.All {
			names[g.Number] = g.ID
		}
	}
	nick := fmt.Sprint(m.nicknames.Export())
	return fmt.Sprintf("due=%v\nnames=%v\nnick=%s\nremovedRev=%d nickRev=%d nickCount=%d",
		due, names, nick, m.removedRevision.Load(), m.nicknames.Revision(), m.nicknames.Count())
}

func roundCompare(t *testing.T, step string, a, b *Store, ignoreTimes bool) {
	t.Helper()
	ctx := context.Background()
	ea, eb := sortedExport(a), sortedExport(b)
	if ignoreTimes {
		for _, st := range []*snap.State{ea, eb} {
			for i := range st.Changes {
				st.Changes[i].Time = time.Time{}
			}
		}
	}
	require.Equal(t, ea, eb, step)
	require.Equal(t, a.Stats(), b.Stats(), step)
	require.Equal(t, a.ExpiryCount(), b.ExpiryCount(), step)
	require.Equal(t, roundInternals(a), roundInternals(b), step)
	ca, _, err := a.Changes(ctx, membership.ChangeOptions{Limit: 1 << 20})
	require.NoError(t, err)
	cb, _, err := b.Changes(ctx, membership.ChangeOptions{Limit: 1 << 20})
	require.NoError(t, err)
	if ignoreTimes {
		for i := range ca {
			ca[i].Time = time.Time{}
		}
		for i := range cb {
			cb[i].Time = time.Time{}
		}
	}
	require.Equal(t, ca, cb, step)
	na, oka := a.NextExpiry()
	nb, okb := b.NextExpiry()
	require.Equal(t, oka, okb, step)
	require.True(t, na.Equal(nb), step)
}

// roundsOf builds an adversarial round from due: writes split and
// shuffled, uids named twice, non-members, absent groups, empty writes.
func roundsOf(rng *rand.Rand, due []membership.Write, asOf time.Time, groupIDs []string) []membership.Write {
	var ws []membership.Write
	for _, w := range due {
		uids := slices.Clone(w.UIDs)
		rng.Shuffle(len(uids), func(i, j int) { uids[i], uids[j] = uids[j], uids[i] })
		for len(uids) > 0 {
			n := 1 + rng.IntN(len(uids))
			part := slices.Clone(uids[:n])
			uids = uids[n:]
			if rng.IntN(3) == 0 {
				part = append(part, part[rng.IntN(len(part))])
			}
			if rng.IntN(3) == 0 {
				part = append(part, roundUID(rng))
			}
			ws = append(ws, membership.Write{Op: membership.OpExpire, GroupID: w.GroupID, UIDs: part, AsOf: asOf})
		}
	}
	for range rng.IntN(4) {
		id := groupIDs[rng.IntN(len(groupIDs))]
		var uids []membership.UID
		for range rng.IntN(4) {
			uids = append(uids, roundUID(rng))
		}
		ws = append(ws, membership.Write{Op: membership.OpExpire, GroupID: id, UIDs: uids, AsOf: asOf})
	}
	// Repeat a whole earlier write now and then: the same group, again.
	if len(ws) > 0 && rng.IntN(2) == 0 {
		ws = append(ws, ws[rng.IntN(len(ws))])
	}
	rng.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
	return ws
}

func roundRandomWrite(rng *rand.Rand, at time.Time, groupIDs []string) membership.Write {
	id := groupIDs[rng.IntN(len(groupIDs))]
	switch rng.IntN(10) {
	case 0:
		var uids []membership.UID
		for range 1 + rng.IntN(5) {
			uids = append(uids, roundUID(rng))
		}
		return membership.Write{Op: membership.OpRemove, GroupID: id, UIDs: uids, Time: at}
	case 1:
		return membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{roundUID(rng)}, Time: at}
	case 2:
		if rng.IntN(3) == 0 {
			return membership.Write{Op: membership.OpDeleteGroup, GroupID: id, Time: at}
		}
	}
	w := membership.Write{Op: membership.OpAdd, GroupID: id, Time: at}
	for range 1 + rng.IntN(12) {
		u := membership.User{UID: roundUID(rng)}
		switch rng.IntN(5) {
		case 0, 1, 2:
			u.Expiry = membership.Expiry{Set: true, At: at.Add(time.Duration(rng.IntN(4000)) * time.Millisecond)}
		case 3:
			u.Expiry = membership.Expiry{Set: true} // ends an expiry
		}
		if rng.IntN(3) == 0 {
			u.Nickname, u.HasNickname = "n"+strconv.Itoa(rng.IntN(5)), true
		}
		w.Users = append(w.Users, u)
	}
	return w
}

// ApplyExpiries (and WriteExpiries) against Apply (and Write) one after
// another, on twin stores, over many rounds with writes between them, for
// shard counts that are and are not powers of two.
func TestRoundsAreTheirWritesOneAfterAnother(t *testing.T) {
	for _, shards := range []int{1, 3, 8, 65} {
		for seed := range uint64(2) {
			for _, live := range []bool{false, true} {
				name := fmt.Sprintf("shards=%d/seed=%d/live=%v", shards, seed, live)
				t.Run(name, func(t *testing.T) {
					roundsAgainstWrites(t, shards, seed, live)
				})
			}
		}
	}
}

func roundsAgainstWrites(t *testing.T, shards int, seed uint64, live bool) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, uint64(shards)))
	opts := Options{ChangesKeep: 1 << 20, Shards: shards, Epoch: 7}
	one, together := twins(opts)
	groupIDs := make([]string, 16)
	for i := range groupIDs {
		groupIDs[i] = "g" + strconv.Itoa(i)
	}
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	both := func(w membership.Write) {
		ra, ea := one.Apply(w)
		rb, eb := together.Apply(w)
		require.Equal(t, ea, eb)
		require.Equal(t, ra, rb)
	}
	for range 60 {
		both(roundRandomWrite(rng, at.Add(-2*time.Second), groupIDs))
	}
	for round := range 12 {
		at = at.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
		max := 1 + rng.IntN(200)
		dueA := one.DueExpiries(at, max)
		dueB := together.DueExpiries(at, max)
		require.Equal(t, len(dueA), len(dueB))
		var due []membership.Write
		for _, d := range dueA {
			due = append(due, d.Write)
		}
		// Between finding them and applying them: other writes.
		for range rng.IntN(4) {
			both(roundRandomWrite(rng, at, groupIDs))
		}
		asOf := at
		if rng.IntN(4) == 0 {
			asOf = at.Add(-time.Duration(rng.IntN(1000)) * time.Millisecond)
		}
		ws := roundsOf(rng, due, asOf, groupIDs)
		step := fmt.Sprintf("round %d: %d writes", round, len(ws))
		var want, got []membership.Result
		if live {
			for _, w := range ws {
				r, err := one.Write(ctx, w)
				require.NoError(t, err)
				want = append(want, r)
			}
			var err error
			got, err = together.WriteExpiries(ctx, ws)
			require.NoError(t, err)
		} else {
			for i := range ws {
				ws[i].Time = at
				ws[i].Actor = membership.UID(round)
			}
			for _, w := range ws {
				r, err := one.Apply(w)
				require.NoError(t, err)
				want = append(want, r)
			}
			var err error
			got, err = together.ApplyExpiries(ws)
			require.NoError(t, err)
		}
		if len(want) == 0 {
			require.Empty(t, got, step)
		} else {
			require.Equal(t, want, got, step)
		}
		roundCompare(t, step, one, together, live)
		// Reuse of emptied groups' numbers, and users coming back.
		for range 1 + rng.IntN(8) {
			both(roundRandomWrite(rng, at, groupIDs))
		}
		for range 20 {
			uid := roundUID(rng)
			var ga, gb []string
			require.NoError(t, one.UserGroups(ctx, uid, membership.GroupListOptions{}, func(_ int, ids iter.Seq[string]) {
				for id := range ids {
					ga = append(ga, id)
				}
			}))
			require.NoError(t, together.UserGroups(ctx, uid, membership.GroupListOptions{}, func(_ int, ids iter.Seq[string]) {
				for id := range ids {
					gb = append(gb, id)
				}
			}))
			require.Equal(t, ga, gb, step)
		}
		roundCompare(t, step+" after", one, together, live)
	}
}
