package memory

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// diffModel is the simple model of a store: each group's uids.
type diffModel map[string]map[membership.UID]bool

func (md diffModel) userGroups(uid membership.UID) []string {
	var out []string
	for id, g := range md {
		if g[uid] {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func (md diffModel) members(id string) []membership.UID {
	var out []membership.UID
	for uid := range md[id] {
		out = append(out, uid)
	}
	slices.Sort(out)
	return out
}

// spreadUID draws uids in clusters near 1, near math.MaxInt64, in the
// middle, and anywhere.
func spreadUID(rng *rand.Rand) membership.UID {
	switch rng.IntN(6) {
	case 0:
		return membership.UID(1 + rng.Int64N(300))
	case 1:
		return membership.UID(math.MaxInt64 - rng.Int64N(300))
	case 2:
		return membership.UID(1<<40 + rng.Int64N(1<<uint(rng.IntN(30)+1)))
	case 3:
		return membership.UID(1 + rng.Int64N(math.MaxInt64))
	case 4:
		return membership.UID(math.MaxInt64/2 + rng.Int64N(5000))
	default:
		return membership.UID(1 + rng.Int64N(64*4))
	}
}

func checkAgainstModel(t *testing.T, m *Store, md diffModel, seen map[membership.UID]bool, groupIDs []string, rng *rand.Rand, step int) {
	t.Helper()
	ctx := context.Background()
	for _, id := range groupIDs {
		want := md.members(id)
		var got []membership.UID
		total := -1
		_, err := m.ListMembers(ctx, id, membership.ListOptions{}, func(n int, ms iter.Seq[membership.Member]) {
			total = n
			for mb := range ms {
				got = append(got, mb.UID)
			}
		})
		require.NoError(t, err)
		require.Equal(t, len(want), total, "step %d group %s total", step, id)
		require.Equal(t, want, got, "step %d group %s members", step, id)
		// Pages from random, and boundary, afters.
		for range 3 {
			var after membership.UID
			switch rng.IntN(4) {
			case 0:
				if len(want) > 0 {
					after = want[rng.IntN(len(want))]
				}
			case 1:
				if len(want) > 0 {
					after = want[rng.IntN(len(want))] - 1
				}
			case 2:
				after = math.MaxInt64
			default:
				after = spreadUID(rng)
			}
			limit := rng.IntN(5)
			var page []membership.UID
			_, err := m.ListMembers(ctx, id, membership.ListOptions{After: after, Limit: limit}, func(n int, ms iter.Seq[membership.Member]) {
				for mb := range ms {
					page = append(page, mb.UID)
				}
			})
			require.NoError(t, err)
			i, _ := slices.BinarySearch(want, after+1)
			if after == math.MaxInt64 {
				i = len(want)
			}
			wp := want[i:]
			if limit > 0 && len(wp) > limit {
				wp = wp[:limit]
			}
			if len(wp) == 0 {
				wp = nil
			}
			require.Equal(t, wp, page, "step %d group %s after %d limit %d", step, id, after, limit)
		}
		for range 3 {
			uid := spreadUID(rng)
			if len(want) > 0 && rng.IntN(2) == 0 {
				uid = want[rng.IntN(len(want))]
			}
			_, ok, err := m.Member(ctx, id, uid)
			require.NoError(t, err)
			require.Equal(t, md[id][uid], ok, "step %d group %s member %d", step, id, uid)
		}
	}
	for uid := range seen {
		want := md.userGroups(uid)
		var got []string
		total := -1
		require.NoError(t, m.UserGroups(ctx, uid, membership.GroupListOptions{}, func(n int, ids iter.Seq[string]) {
			total = n
			for id := range ids {
				got = append(got, id)
			}
		}))
		require.Equal(t, len(want), total, "step %d user %d total", step, uid)
		require.Equal(t, want, got, "step %d user %d groups", step, uid)
	}
	st := m.Stats()
	members, users := 0, map[membership.UID]bool{}
	groups := 0
	for _, g := range md {
		if len(g) > 0 {
			groups++
		}
		members += len(g)
		for uid := range g {
			users[uid] = true
		}
	}
	require.Equal(t, fmt.Sprint(groups, members, len(users)), fmt.Sprint(st.Groups, st.Members, st.Users), "step %d stats", step)
}

// roundTrip exports m, encodes and decodes the snapshot, and imports it
// into a new store of the same shards.
func roundTrip(t *testing.T, m *Store, shards int, prep func(*Store)) *Store {
	t.Helper()
	st := m.Export()
	var buf bytes.Buffer
	require.NoError(t, snap.Encode(&buf, st))
	got, err := snap.Decode(buf.Bytes(), "x")
	require.NoError(t, err)
	n := NewWith(Options{Shards: shards, ChangesKeep: membership.DefaultChangesKeep})
	prep(n)
	n.Import(got)
	return n
}

// TestTheStoreAgreesWithAModel runs a seeded random sequence of writes on the
// store beside a map model, checking lists, pages, checks, user groups and
// counts, and round trips through a snapshot now and then, continuing on
// the imported store.
func TestTheStoreAgreesWithAModel(t *testing.T) {
	// bigNumbers gives the store group numbers of 21 bits, as a store
	// that has seen a million groups come and go.
	bigNumbers := func(m *Store) {
		m.setTables(group.NewTables(len(m.shards), m.seed, 1<<20/uint32(len(m.shards))))
	}
	for _, big := range []bool{false, true} {
		for _, shards := range []int{1, 3, 64} {
			for seed := range uint64(2) {
				t.Run(fmt.Sprintf("big%v/shards%d/seed%d", big, shards, seed), func(t *testing.T) {
					prep := func(*Store) {}
					if big {
						prep = bigNumbers
					}
					ctx := context.Background()
					rng := rand.New(rand.NewPCG(seed, uint64(shards)))
					m := NewWith(Options{Shards: shards, ChangesKeep: membership.DefaultChangesKeep})
					prep(m)
					md := diffModel{}
					seen := map[membership.UID]bool{}
					var groupIDs []string
					for i := range 40 {
						groupIDs = append(groupIDs, fmt.Sprintf("g%02d", i))
					}
					// A pool of uids, so that removes and re-adds hit.
					var pool []membership.UID
					for range 400 {
						pool = append(pool, spreadUID(rng))
					}
					pick := func() membership.UID {
						if rng.IntN(4) == 0 {
							u := spreadUID(rng)
							pool = append(pool, u)
							return u
						}
						return pool[rng.IntN(len(pool))]
					}
					for step := range 3000 {
						id := groupIDs[rng.IntN(len(groupIDs))]
						if md[id] == nil {
							md[id] = map[membership.UID]bool{}
						}
						switch op := rng.IntN(20); {
						case op < 9:
							n := 1 + rng.IntN(1+rng.IntN(60))
							var users []membership.User
							for range n {
								u := pick()
								users = append(users, membership.User{UID: u})
								md[id][u] = true
								seen[u] = true
							}
							_, err := storetest.Add(ctx, m, id, users)
							require.NoError(t, err)
						case op < 15:
							n := 1 + rng.IntN(1+rng.IntN(60))
							var uids []membership.UID
							cur := md.members(id)
							for range n {
								var u membership.UID
								if len(cur) > 0 && rng.IntN(4) != 0 {
									// first, last, or any
									switch rng.IntN(3) {
									case 0:
										u = cur[0]
									case 1:
										u = cur[len(cur)-1]
									default:
										u = cur[rng.IntN(len(cur))]
									}
								} else {
									u = pick()
								}
								uids = append(uids, u)
								delete(md[id], u)
							}
							_, err := storetest.Remove(ctx, m, id, uids)
							require.NoError(t, err)
						case op < 17:
							var users []membership.User
							nw := map[membership.UID]bool{}
							for range rng.IntN(80) {
								u := pick()
								if !nw[u] {
									users = append(users, membership.User{UID: u})
								}
								nw[u] = true
								seen[u] = true
							}
							md[id] = nw
							_, err := m.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: id, Users: users})
							require.NoError(t, err)
						case op < 18:
							md[id] = map[membership.UID]bool{}
							_, err := m.Write(ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: id})
							require.NoError(t, err)
						default:
							u := pick()
							for _, g := range md {
								delete(g, u)
							}
							_, err := m.Write(ctx, membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{u}})
							require.NoError(t, err)
						}
						if step%100 == 99 {
							checkAgainstModel(t, m, md, seen, groupIDs, rng, step)
						}
						if step%500 == 250 {
							m = roundTrip(t, m, shards, prep)
							checkAgainstModel(t, m, md, seen, groupIDs, rng, step)
						}
					}
					checkAgainstModel(t, m, md, seen, groupIDs, rng, -1)
				})
			}
		}
	}
}
