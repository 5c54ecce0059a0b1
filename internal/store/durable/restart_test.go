package durable

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// edgeUID draws uids around the narrow/wide boundary of memory's reverse
// pairs (per-shard user 2^32, 64 shards), near MaxInt64, anywhere, and
// small ones.
func edgeUID(rng *rand.Rand) membership.UID {
	const edge = int64(1<<32) * 64 // per-shard user 2^32 with 64 shards
	switch rng.IntN(5) {
	case 0:
		return membership.UID(edge - 200 + rng.Int64N(400))
	case 1:
		return membership.UID(math.MaxInt64 - rng.Int64N(200))
	case 2:
		return membership.UID(1 + rng.Int64N(math.MaxInt64-1))
	default:
		return membership.UID(1 + rng.Int64N(3000))
	}
}

// storeView is what a store shows, as comparable values: its figures,
// every list with its revision, the reverse index of some uids, the feed,
// the keys and the nicknames it remembers.
type storeView struct {
	stats   string
	groups  map[string][]membership.Member
	revs    map[string]membership.Revision
	reverse map[membership.UID][]string
	changes string
	keys    string
	nicks   string
}

// viewOf returns d's view, with the reverse index of uids.
func viewOf(t *testing.T, d *Store, uids []membership.UID) storeView {
	t.Helper()
	v := storeView{groups: map[string][]membership.Member{}, revs: map[string]membership.Revision{}, reverse: map[membership.UID][]string{}}
	s := d.Stats()
	v.stats = fmt.Sprint(s.Groups, s.Members, s.Users, s.Revision, s.ChangesKept, s.Keys.Held)
	groups, _ := storetest.Groups(t, d, membership.GroupsOptions{Limit: 10000})
	for _, g := range groups {
		v.groups[g.ID], v.revs[g.ID] = storetest.ListAll(t, d, g.ID)
	}
	for _, uid := range uids {
		got, n := storetest.UserGroups(t, d, uid, membership.GroupListOptions{})
		require.Equal(t, len(got), n)
		if n > 0 {
			v.reverse[uid] = got
		}
	}
	cs := storetest.AllChanges(t, d, 0)
	v.changes = fmt.Sprint(storetest.EmptiesAsNil(cs))
	st := d.mem.Export()
	v.keys = fmt.Sprint(st.Keys)
	v.nicks = fmt.Sprint(st.Nicknames)
	return v
}

// requireSameView stops the test, naming step, unless a and b are equal.
func requireSameView(t *testing.T, step string, a, b storeView) {
	t.Helper()
	require.Equal(t, a.stats, b.stats, step)
	require.Equal(t, len(a.groups), len(b.groups), step)
	for id, ms := range a.groups {
		require.Equal(t, ms, b.groups[id], "%s: %s", step, id)
		require.Equal(t, a.revs[id], b.revs[id], "%s: revision of %s", step, id)
	}
	require.Equal(t, a.reverse, b.reverse, step)
	require.True(t, a.changes == b.changes, "%s: the change feed differs", step)
	require.True(t, a.keys == b.keys, "%s: the keys differ", step)
	require.True(t, a.nicks == b.nicks, "%s: the nicknames differ", step)
}

// Restart after restart, with snapshots written often (a small
// SnapshotBytes), the store is what it was: both indexes, counts, group
// revisions, the feed, keys, nicknames, with bulk adds, uids at the
// narrow/wide boundary and near MaxInt64, groups all deleted and made
// again.
func TestDurableRestartsKeepEverything(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := Options{ChangesKeep: keepAll, SnapshotBytes: 20000}
	d := openTestDurable(t, dir, opts)
	rng := rand.New(rand.NewPCG(5, 6))
	var seen []membership.UID
	uid := func() membership.UID {
		if len(seen) > 0 && rng.IntN(3) == 0 {
			return seen[rng.IntN(len(seen))]
		}
		u := edgeUID(rng)
		seen = append(seen, u)
		return u
	}
	users := func(n int) []membership.User {
		us := make([]membership.User, n)
		for i := range us {
			us[i] = membership.User{UID: uid()}
			if rng.IntN(5) == 0 {
				us[i].HasNickname, us[i].Nickname = true, fmt.Sprint("n", rng.IntN(4))
			}
			if rng.IntN(7) == 0 {
				us[i].Expiry = membership.Expiry{Set: true, At: time.Now().Add(time.Duration(1+rng.IntN(50)) * time.Hour).Truncate(time.Millisecond).UTC()}
			}
		}
		return us
	}
	groups := []string{"a", "b", "c", "d", "e"}
	snapshotsSeen := 0
	for round := range 12 {
		for i := range 25 {
			g := groups[rng.IntN(len(groups))]
			var w membership.Write
			switch r := rng.IntN(12); {
			case r < 4:
				w = membership.Write{Op: membership.OpAdd, GroupID: g, Users: users(1 + rng.IntN(10))}
			case r < 6:
				w = membership.Write{Op: membership.OpAdd, GroupID: g, Users: users(1024 + rng.IntN(500))}
			case r < 8:
				var us []membership.UID
				for range 1 + rng.IntN(30) {
					us = append(us, uid())
				}
				w = membership.Write{Op: membership.OpRemove, GroupID: g, UIDs: us}
			case r < 9:
				w = membership.Write{Op: membership.OpReplace, GroupID: g, Users: users(rng.IntN(20))}
			case r < 10:
				w = membership.Write{Op: membership.OpDeleteGroup, GroupID: g}
			case r < 11:
				w = membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{uid()}}
			default:
				b := membership.Batch{}
				for _, id := range groups {
					b.Writes = append(b.Writes, membership.Write{Op: membership.OpDeleteGroup, GroupID: id})
				}
				_, err := d.Batch(ctx, storetest.KeyedBatch(b, fmt.Sprint("del", round, i)))
				require.NoError(t, err)
				continue
			}
			if rng.IntN(3) == 0 {
				w = storetest.Keyed(w, fmt.Sprint("k", round, i))
			}
			_, err := d.Write(ctx, w)
			require.NoError(t, err)
		}
		before := viewOf(t, d, seen)
		require.NoError(t, d.Close())
		_, snaps, err := files(dir)
		require.NoError(t, err)
		if len(snaps) > 0 {
			snapshotsSeen++
			_, err := snap.ReadFile(snap.Path(dir, snaps[len(snaps)-1]), nil)
			require.NoError(t, err)
		}
		d = openTestDurable(t, dir, opts)
		after := viewOf(t, d, seen)
		requireSameView(t, fmt.Sprint("round ", round), before, after)
	}
	require.NoError(t, d.Close())
	require.Greater(t, snapshotsSeen, 3, "snapshots were loaded")
}

// A newest snapshot broken in its last group (checksum good) with no
// older snapshot: without -repair it is refused; with -repair the store
// is rebuilt from the logs from the first, equal to what it was.
func TestDurableRepairsABrokenOnlySnapshotFromTheFirstLog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// The logs are kept from the first while no snapshot after the first
	// has been read back; write exactly one snapshot.
	opts := Options{ChangesKeep: keepAll, SnapshotBytes: 1 << 30}
	d := openTestDurable(t, dir, opts)
	us := make([]membership.User, 2000)
	for i := range us {
		us[i] = membership.User{UID: membership.UID(int64(1<<32)*64 - 1000 + int64(i))}
	}
	_, err := storetest.Add(ctx, d, "big", us)
	require.NoError(t, err)
	_, err = storetest.Add(ctx, d, "small", us[:3])
	require.NoError(t, err)
	var uids []membership.UID
	for _, u := range us {
		uids = append(uids, u.UID)
	}
	before := viewOf(t, d, uids)
	require.NoError(t, d.Close())
	logs, snaps, err := files(dir)
	require.NoError(t, err)
	t.Logf("logs %v snapshots %v", logs, snaps)
	require.Empty(t, snaps, "no snapshot yet: SnapshotBytes is a GiB")
	// Make a snapshot 2 after log 1 by hand from a good export, broken late.
	st := d.mem.Export()
	slices.SortFunc(st.Groups, func(a, b snap.Group) int { return strings.Compare(a.ID, b.ID) })
	st.Groups = append(st.Groups, snap.Group{ID: "late", Revision: 1, UIDs: []membership.UID{9, 9}})
	// Not part of the chain unless a log 2 follows: give it the sequence of
	// the newest log so that it is the newest file.
	require.NoError(t, snap.WriteFile(snap.Path(dir, logs[len(logs)-1]), st))
	_, err = Open(dir, opts)
	require.Error(t, err)
	t.Log(err)
	d, err = Open(dir, Options{ChangesKeep: keepAll, SnapshotBytes: 1 << 30, Repair: true})
	require.NoError(t, err)
	after := viewOf(t, d, uids)
	requireSameView(t, "repaired", before, after)
	require.NoError(t, d.Close())
}
