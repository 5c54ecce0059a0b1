package memory

import (
	"context"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory/packed"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// edgeUID draws uids around the narrow/wide boundary of the reverse
// pairs (per-shard user 2^32 = uid 2^32*shards), near MaxInt64, small ones,
// and random ones.
func edgeUID(rng *rand.Rand, shards int) membership.UID {
	edge := int64(1<<32) * int64(shards)
	switch rng.IntN(6) {
	case 0:
		return membership.UID(edge - 3*int64(shards) + rng.Int64N(6*int64(shards)))
	case 1:
		return membership.UID(math.MaxInt64 - rng.Int64N(3*int64(shards)))
	case 2:
		return membership.UID(1 + rng.Int64N(math.MaxInt64-1))
	case 3:
		return membership.UID(edge*int64(1+rng.IntN(3)) + rng.Int64N(4) - 2)
	default:
		return membership.UID(1 + rng.Int64N(300))
	}
}

// reverseDump reads the reverse index directly: uid -> group ids, sorted.
func reverseDump(m *Store) map[membership.UID][]string {
	out := map[membership.UID][]string{}
	n := uint64(len(m.shards)) // as many as the reverse index has
	for k := range m.shards {
		m.reverse.EachPair(k, 0, func(p packed.Pair) bool {
			uid := membership.UID(uint64(p.User)*n + uint64(k))
			out[uid] = append(out[uid], m.groups.At(p.Group).ID)
			return true
		})
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

// forwardDump is uid -> group ids from the groups' members.
func forwardDump(m *Store) map[membership.UID][]string {
	out := map[membership.UID][]string{}
	for i := range m.shards {
		for g := range m.shards[i].groups.All {
			for p := range g.Members.All {
				out[p] = append(out[p], g.ID)
			}
		}
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

func checkReloaded(t *testing.T, step string, live, loaded *Store, uids []membership.UID) {
	t.Helper()
	requireSameState(t, step, sortedExport(live), sortedExport(loaded))
	sa, sb := live.Stats(), loaded.Stats()
	sa.ChangesKeptBytes, sb.ChangesKeptBytes = 0, 0 // an estimate, not the loader's
	require.Equal(t, sa, sb, step)
	require.Equal(t, live.ExpiryCount(), loaded.ExpiryCount(), step)
	fl, fo := forwardDump(live), forwardDump(loaded)
	require.Equal(t, fl, fo, step)
	require.Equal(t, fl, reverseDump(live), step+": live reverse")
	require.Equal(t, fo, reverseDump(loaded), step+": loaded reverse")
	require.Equal(t, int64(len(fo)), loaded.Stats().Users, step)
	for _, uid := range uids {
		a, na := storetest.UserGroups(t, live, uid, membership.GroupListOptions{})
		b, nb := storetest.UserGroups(t, loaded, uid, membership.GroupListOptions{})
		require.Equal(t, a, b, "%s uid %d", step, uid)
		require.Equal(t, na, nb, step)
	}
	// Nicknames of users in no group are forgotten on both.
	require.Equal(t, live.nicknames.Export(), loaded.nicknames.Export(), step)
}

// requireSameState compares two exports item by item, naming the first
// that differs (not the whole state).
func requireSameState(t *testing.T, step string, a, b *snap.State) {
	t.Helper()
	require.Equal(t, a.LastRevision, b.LastRevision, step)
	require.Equal(t, a.NicknamesRevision, b.NicknamesRevision, step)
	require.Equal(t, a.RemovedRevision, b.RemovedRevision, step)
	require.Equal(t, len(a.Nicknames), len(b.Nicknames), step+": nicknames")
	for uid, n := range a.Nicknames {
		require.Equal(t, n, b.Nicknames[uid], "%s: nickname of %d", step, uid)
	}
	require.Equal(t, len(a.Groups), len(b.Groups), step+": groups")
	for i := range a.Groups {
		ga, gb := a.Groups[i], b.Groups[i]
		require.Equal(t, ga.ID, gb.ID, step)
		require.Equal(t, ga.Revision, gb.Revision, "%s: %s", step, ga.ID)
		require.True(t, slices.Equal(ga.UIDs, gb.UIDs), "%s: uids of %s", step, ga.ID)
		require.Equal(t, len(ga.Expiries), len(gb.Expiries), "%s: %s", step, ga.ID)
		for j := range ga.Expiries {
			require.Equal(t, ga.Expiries[j].UID, gb.Expiries[j].UID, step)
			require.True(t, ga.Expiries[j].At.Equal(gb.Expiries[j].At), step)
		}
	}
	ca, cb := storetest.EmptiesAsNil(a.Changes), storetest.EmptiesAsNil(b.Changes)
	require.Equal(t, len(ca), len(cb), step+": changes")
	for i := range ca {
		require.Equal(t, fmt.Sprint(ca[i]), fmt.Sprint(cb[i]), "%s: change %d", step, i)
	}
	require.Equal(t, len(a.Keys), len(b.Keys), step+": keys")
	for i := range a.Keys {
		require.Equal(t, fmt.Sprint(a.Keys[i]), fmt.Sprint(b.Keys[i]), "%s: key %d", step, i)
	}
}

// reload writes m's snapshot and loads it a group at a time into a new
// store of the same shards and epoch.
func reload(t *testing.T, m *Store, shards int) *Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.snap")
	require.NoError(t, snap.WriteFile(path, m.Export()))
	n := NewWith(Options{Shards: shards, ChangesKeep: 1 << 20, Epoch: m.Epoch()})
	l := n.Loader()
	rest, err := snap.ReadFile(path, l.Group)
	require.NoError(t, err)
	l.Finish(rest)
	return n
}

// A store reloaded from its snapshot (a restart) is the live store in every
// index and count, and stays so under the same writes after, at the narrow
// and wide pairs' boundary, near MaxInt64, with bulk adds, group numbers
// reused, and all groups deleted.
func TestAReloadedStoreIsTheLiveStore(t *testing.T) {
	ctx := context.Background()
	for _, shards := range []int{1, 7, 64} {
		t.Run(fmt.Sprint(shards), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(shards), 77))
			live := NewWith(Options{Shards: shards, ChangesKeep: 1 << 20})
			other := reload(t, live, shards) // loaded from an empty snapshot
			var seen []membership.UID
			uid := func() membership.UID {
				if len(seen) > 0 && rng.IntN(3) == 0 {
					return seen[rng.IntN(len(seen))]
				}
				u := edgeUID(rng, shards)
				seen = append(seen, u)
				return u
			}
			groups := []string{"a", "b", "c", "d", "e", "f"}
			base := time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()
			users := func(n int) []membership.User {
				us := make([]membership.User, n)
				for i := range us {
					us[i] = membership.User{UID: uid()}
					if rng.IntN(4) == 0 {
						us[i].HasNickname, us[i].Nickname = true, fmt.Sprint("n", rng.IntN(5))
					}
					if rng.IntN(6) == 0 {
						us[i].Expiry = membership.Expiry{Set: true, At: base.Add(time.Duration(rng.IntN(100)) * time.Minute)}
					}
				}
				return us
			}
			now := time.Now().UTC().Truncate(time.Millisecond)
			for step := range 120 {
				now = now.Add(time.Millisecond)
				g := groups[rng.IntN(len(groups))]
				var w membership.Write
				switch r := rng.IntN(20); {
				case r < 6:
					w = membership.Write{Op: membership.OpAdd, GroupID: g, Users: users(1 + rng.IntN(20))}
				case r < 8:
					w = membership.Write{Op: membership.OpAdd, GroupID: g, Users: users(1024 + rng.IntN(600))}
				case r < 9:
					w = membership.Write{Op: membership.OpAdd, GroupID: g, Users: users(64 + rng.IntN(100))}
				case r < 12:
					var us []membership.UID
					for range 1 + rng.IntN(40) {
						us = append(us, uid())
					}
					w = membership.Write{Op: membership.OpRemove, GroupID: g, UIDs: us}
				case r < 14:
					w = membership.Write{Op: membership.OpReplace, GroupID: g, Users: users(rng.IntN(30))}
				case r < 16:
					w = membership.Write{Op: membership.OpDeleteGroup, GroupID: g}
				case r < 17:
					w = membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{uid()}}
				case r < 18:
					// Delete every group: all numbers freed, reused after.
					b := membership.Batch{Time: now}
					for _, id := range groups {
						b.Writes = append(b.Writes, membership.Write{Op: membership.OpDeleteGroup, GroupID: id})
					}
					_, err := live.Batch(ctx, b)
					require.NoError(t, err)
					_, err = other.Batch(ctx, b)
					require.NoError(t, err)
					continue
				default:
					b := membership.Batch{Time: now}
					for range 1 + rng.IntN(4) {
						b.Writes = append(b.Writes, membership.Write{Op: membership.OpAdd, GroupID: groups[rng.IntN(len(groups))], Users: users(1 + rng.IntN(1500))})
					}
					b = storetest.KeyedBatch(b, fmt.Sprint("b", step))
					_, err := live.Batch(ctx, b)
					require.NoError(t, err)
					_, err = other.Batch(ctx, b)
					require.NoError(t, err)
					continue
				}
				w.Time = now
				if rng.IntN(3) == 0 {
					w = storetest.Keyed(w, fmt.Sprint("k", step))
				}
				ra, ea := live.Write(ctx, w)
				rb, eb := other.Write(ctx, w)
				require.Equal(t, ea, eb, "step %d", step)
				require.Equal(t, ra, rb, "step %d", step)
				if step%20 == 19 {
					checkReloaded(t, fmt.Sprint("before reload ", step), live, other, seen)
					other = reload(t, live, shards)
					checkReloaded(t, fmt.Sprint("after reload ", step), live, other, seen)
				}
			}
			checkReloaded(t, "end", live, other, seen)
			// The keys replay alike.
			ka, kb := live.Export().Keys, other.Export().Keys
			require.Equal(t, ka, kb)
		})
	}
}

// Group numbers reused: groups numbered out of order (all deleted, made
// again in another order) so a user's pairs come in descending numbers.
func TestAReloadAfterGroupNumbersReused(t *testing.T) {
	ctx := context.Background()
	m := New()
	ids := make([]string, 40)
	for i := range ids {
		ids[i] = fmt.Sprintf("g%02d", i)
	}
	add := func(id string, uids ...membership.UID) {
		us := make([]membership.User, len(uids))
		for i, u := range uids {
			us[i] = membership.User{UID: u}
		}
		_, err := storetest.Add(ctx, m, id, us)
		require.NoError(t, err)
	}
	for _, id := range ids {
		add(id, 5)
	}
	for _, id := range ids {
		_, err := m.Write(ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: id})
		require.NoError(t, err)
	}
	big := make([]membership.UID, 3000)
	for i := range big {
		big[i] = membership.UID(i*64 + 5)
	}
	for _, id := range ids {
		add(id, big...)
		add(id, math.MaxInt64, 1<<38, 1<<38-64+5)
	}
	n := reload(t, m, DefaultShards)
	require.Equal(t, forwardDump(m), reverseDump(n))
	require.Equal(t, m.Stats().Users, n.Stats().Users)
	require.Equal(t, m.Stats().Members, n.Stats().Members)
	got, _ := storetest.UserGroups(t, n, 5, membership.GroupListOptions{})
	require.True(t, slices.IsSortedFunc(got, strings.Compare))
	require.Len(t, got, 40)
}

// Bulk adds (shard by shard on every core) from many writers at once, into
// groups that share users, with removes, readers and GOMAXPROCS changing
// under them: the reverse index and the user count end as the groups say.
func TestBulkAddsUnderLoadKeepTheReverseIndex(t *testing.T) {
	ctx := context.Background()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, shards := range []int{1, 64} {
		m := NewWith(Options{Shards: shards, ChangesKeep: 16})
		groups := []string{"a", "b", "c", "d"}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for w := range 4 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), uint64(shards)))
				for i := range 10 {
					g := groups[rng.IntN(len(groups))]
					if i%5 == 4 {
						var uids []membership.UID
						for range 600 {
							uids = append(uids, edgeUID(rng, shards))
						}
						_, err := storetest.Remove(ctx, m, g, uids)
						if !assert.NoError(t, err) { // off the test goroutine: no require
							return
						}
						continue
					}
					us := make([]membership.User, 1024+rng.IntN(2000))
					for j := range us {
						us[j] = membership.User{UID: edgeUID(rng, shards)}
					}
					_, err := storetest.Add(ctx, m, g, us)
					if !assert.NoError(t, err) {
						return
					}
				}
			})
		}
		var readers sync.WaitGroup
		readers.Go(func() {
			rng := rand.New(rand.NewPCG(9, 9))
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = m.UserGroups(ctx, edgeUID(rng, shards), membership.GroupListOptions{}, func(int, iter.Seq[string]) {})
				_ = m.Stats()
			}
		})
		readers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				runtime.GOMAXPROCS(1 + i%3)
			}
		})
		wg.Wait()
		close(stop)
		readers.Wait()
		f := forwardDump(m)
		require.Equal(t, f, reverseDump(m), "shards %d", shards)
		require.Equal(t, int64(len(f)), m.Stats().Users, "shards %d", shards)
		n := reload(t, m, shards)
		require.Equal(t, f, reverseDump(n))
		require.Equal(t, m.Stats().Users, n.Stats().Users)
	}
}
