package store

import (
	"context"
	"iter"
	"math/rand/v2"
	"strconv"
	"testing"

	"example.com/groupmembership/membership"
)

// filledMemory returns a store with groups "g0".."g<groups-1>" of perGroup
// random members each.
func filledMemory(b *testing.B, groups, perGroup int) *Memory {
	b.Helper()
	m := NewMemory()
	rng := rand.New(rand.NewPCG(1, 2))
	for g := range groups {
		users := make([]membership.User, perGroup)
		for i := range users {
			users[i] = membership.User{UID: membership.UID(rng.Int64N(1e9) + 1)}
		}
		if _, err := m.AddMembers(context.Background(), "g"+strconv.Itoa(g), users); err != nil {
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
		if _, err := m.AddMembers(ctx, "g"+strconv.Itoa(rng.IntN(1000)), users); err != nil {
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
		if _, err := m.AddMembers(ctx, group, users); err != nil {
			b.Fatal(err)
		}
		if _, err := m.RemoveMembers(ctx, group, uids); err != nil {
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
				if _, err := m.ListMembers(ctx, "g0", func(_ int, members iter.Seq[membership.Member]) {
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
