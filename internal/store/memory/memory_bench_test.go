package memory

import (
	"context"
	"iter"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// filledMemory returns a store with groups "g0".."g<groups-1>" of perGroup
// random members each.
func filledMemory(b *testing.B, groups, perGroup int) *Store {
	b.Helper()
	m := New()
	rng := rand.New(rand.NewPCG(1, 2))
	for g := range groups {
		users := make([]membership.User, perGroup)
		for i := range users {
			users[i] = membership.User{UID: membership.UID(rng.Int64N(1e9) + 1)}
		}
		if _, err := storetest.Add(context.Background(), m, "g"+strconv.Itoa(g), users); err != nil {
			b.Fatal(err)
		}
	}
	return m
}

func BenchmarkMemoryAdd3(b *testing.B) {
	m := filledMemory(b, 1000, 1000)
	rng := rand.New(rand.NewPCG(3, 4))
	ctx := context.Background()
	for b.Loop() {
		users := []membership.User{
			{UID: membership.UID(rng.Int64N(1e9) + 1)}, {UID: membership.UID(rng.Int64N(1e9) + 1)}, {UID: membership.UID(rng.Int64N(1e9) + 1)},
		}
		if _, err := storetest.Add(ctx, m, "g"+strconv.Itoa(rng.IntN(1000)), users); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMemoryAddRemove3(b *testing.B) {
	m := filledMemory(b, 1000, 1000)
	rng := rand.New(rand.NewPCG(3, 4))
	ctx := context.Background()
	for b.Loop() {
		uids := []membership.UID{membership.UID(rng.Int64N(1e9) + 1), membership.UID(rng.Int64N(1e9) + 1), membership.UID(rng.Int64N(1e9) + 1)}
		users := []membership.User{{UID: uids[0]}, {UID: uids[1]}, {UID: uids[2]}}
		group := "g" + strconv.Itoa(rng.IntN(1000))
		if _, err := storetest.Add(ctx, m, group, users); err != nil {
			b.Fatal(err)
		}
		if _, err := storetest.Remove(ctx, m, group, uids); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMemoryList(b *testing.B) {
	for _, size := range []int{10, 1000, 1000000} {
		m := filledMemory(b, 1, size)
		ctx := context.Background()
		b.Run("members="+strconv.Itoa(size), func(b *testing.B) {
			for b.Loop() {
				if _, err := m.ListMembers(ctx, "g0", membership.ListOptions{}, func(_ int, members iter.Seq[membership.Member]) {
					for range members {
					}
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(size), "ns/member")
		})
	}
}

// BenchmarkMemoryParallel adds 3 users to, or lists, a random one of 1000
// groups from every core at once, with one lock for the whole store
// (shards=1) and with the default shard count: what sharding buys under
// contention.
func BenchmarkMemoryParallel(b *testing.B) {
	for _, shards := range []int{1, DefaultShards} {
		b.Run("shards="+strconv.Itoa(shards), func(b *testing.B) {
			m := NewWith(Options{Shards: shards, ChangesKeep: membership.DefaultChangesKeep})
			ctx := context.Background()
			for g := range 1000 {
				users := make([]membership.User, 100)
				for i := range users {
					users[i] = membership.User{UID: membership.UID(i*7919 + 1)}
				}
				if _, err := storetest.Add(ctx, m, "g"+strconv.Itoa(g), users); err != nil {
					b.Fatal(err)
				}
			}
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(rand.Uint64(), 0))
				for pb.Next() {
					group := "g" + strconv.Itoa(rng.IntN(1000))
					if rng.IntN(2) == 0 {
						users := []membership.User{{UID: membership.UID(rng.Int64N(1e9) + 1)}, {UID: membership.UID(rng.Int64N(1e9) + 1)}, {UID: membership.UID(rng.Int64N(1e9) + 1)}}
						if _, err := storetest.Add(ctx, m, group, users); err != nil {
							b.Error(err)
							return
						}
					} else if _, err := m.ListMembers(ctx, group, membership.ListOptions{}, func(_ int, members iter.Seq[membership.Member]) {
						for range members {
						}
					}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkMemoryPage reads a page of 100 from the start, the middle and the
// end of a group of 1,000,000: keyset paging costs the same at any depth.
func BenchmarkMemoryPage(b *testing.B) {
	m := filledMemory(b, 1, 1_000_000)
	ctx := context.Background()
	var uids []membership.UID
	_, err := m.ListMembers(ctx, "g0", membership.ListOptions{}, func(_ int, members iter.Seq[membership.Member]) {
		for mb := range members {
			uids = append(uids, mb.UID)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, at := range []struct {
		name  string
		after membership.UID
	}{{"first", 0}, {"middle", uids[len(uids)/2]}, {"last", uids[len(uids)-101]}} {
		b.Run("page="+at.name, func(b *testing.B) {
			for b.Loop() {
				n := 0
				_, err := m.ListMembers(ctx, "g0", membership.ListOptions{After: at.after, Limit: 100}, func(_ int, members iter.Seq[membership.Member]) {
					for range members {
						n++
					}
				})
				if err != nil || n != 100 {
					b.Fatalf("got %d members, %v", n, err)
				}
			}
		})
	}
}

// BenchmarkMemoryBytesPerMembership loads 1000 groups of 1000 random users
// (uids up to 1e9, as make bench loads) and reports the live heap each
// membership takes, both indexes together, with the change feed off and
// with it keeping every change. It measures the heap after a collection,
// not the RSS that make bench reports, which adds the garbage collector's
// headroom.
func BenchmarkMemoryBytesPerMembership(b *testing.B) {
	benchmarkBytesPerMembership(b, membership.Expiry{})
}

// BenchmarkMemoryBytesPerExpiringMembership is
// BenchmarkMemoryBytesPerMembership with every user given an expiry (one
// time for all, as many would be; distinct times cost the same): what a
// membership with an expiry costs, its entries in its group's set of
// expiries and in the due set included.
func BenchmarkMemoryBytesPerExpiringMembership(b *testing.B) {
	at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	benchmarkBytesPerMembership(b, membership.Expiry{Set: true, At: at})
}

// benchmarkBytesPerMembership loads 1000 groups of 1000 random users, each
// with expiry, with the feed off and on, and reports the live heap per
// membership.
func benchmarkBytesPerMembership(b *testing.B, expiry membership.Expiry) {
	for _, keep := range []int{0, membership.DefaultChangesKeep} {
		b.Run("changes-keep="+strconv.Itoa(keep), func(b *testing.B) {
			var perMembership float64
			for b.Loop() {
				before := liveHeap()
				m := NewWith(Options{ChangesKeep: keep})
				rng := rand.New(rand.NewPCG(3, 4))
				for g := range 1000 {
					users := make([]membership.User, 0, 1000)
					seen := map[membership.UID]bool{}
					for len(users) < 1000 {
						uid := membership.UID(rng.Int64N(1e9) + 1)
						if !seen[uid] {
							seen[uid] = true
							users = append(users, membership.User{UID: uid, Expiry: expiry})
						}
					}
					_, _ = m.add("mem"+strconv.Itoa(g), users, membership.Precondition{}, feed.Stamp{Now: true})
				}
				perMembership = float64(liveHeap()-before) / 1e6
				runtime.KeepAlive(m)
			}
			b.ReportMetric(perMembership, "B/membership")
		})
	}
}

// liveHeap returns the bytes of live heap objects, after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// BenchmarkMemoryBytesSmallGroups loads small groups, as make bench's
// small-groups row does (100,000 groups of 10 and 1,000,000 groups of 3,
// users drawn from 1 to 100,000), with the change feed off, and reports
// the live heap each membership takes, both indexes together.
func BenchmarkMemoryBytesSmallGroups(b *testing.B) {
	for _, shape := range []struct{ groups, size int }{{100_000, 10}, {1_000_000, 3}} {
		b.Run("size="+strconv.Itoa(shape.size), func(b *testing.B) {
			var perMembership float64
			for b.Loop() {
				before := liveHeap()
				m := NewWith(Options{ChangesKeep: 0})
				loadSmallGroups(m, shape.groups, shape.size)
				perMembership = float64(liveHeap()-before) / float64(shape.groups*shape.size)
				runtime.KeepAlive(m)
			}
			b.ReportMetric(perMembership, "B/membership")
		})
	}
}

// loadSmallGroups writes groups "g0".."g<groups-1>" of size distinct users
// each, drawn from 1 to 100,000, into m, one write a group.
func loadSmallGroups(m *Store, groups, size int) {
	rng := rand.New(rand.NewPCG(5, 6))
	users := make([]membership.User, 0, size)
	for g := range groups {
		users = users[:0]
		for len(users) < size {
			uid := membership.UID(rng.Int64N(100_000) + 1)
			if !slicesContainsUID(users, uid) {
				users = append(users, membership.User{UID: uid})
			}
		}
		_, _ = m.add("g"+strconv.Itoa(g), users, membership.Precondition{}, feed.Stamp{Now: true})
	}
}

// slicesContainsUID reports whether users holds uid.
func slicesContainsUID(users []membership.User, uid membership.UID) bool {
	for _, u := range users {
		if u.UID == uid {
			return true
		}
	}
	return false
}
