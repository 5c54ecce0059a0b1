package expiry

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/durable"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
)

// BenchmarkExpireAMillion ends a million memberships due at the same
// time, 1,000 groups of 1,000 random users in a memory store, as the
// server's expirer would when they come due: the cost of ExpireDue alone
// (make bench-expiry measures it in the service, under load).
func BenchmarkExpireAMillion(b *testing.B) {
	benchmarkExpireAMillion(b, func(b *testing.B) expiringStore { return memory.New() })
}

// BenchmarkExpireAMillionDataDir is BenchmarkExpireAMillion with
// -data-dir: every change logged and fsynced (the machine's disk) before
// it is applied.
func BenchmarkExpireAMillionDataDir(b *testing.B) {
	benchmarkExpireAMillion(b, func(b *testing.B) expiringStore {
		d, err := durable.Open(b.TempDir(), durable.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = d.Close() })
		return d
	})
}

type expiringStore interface {
	store.Expiring
	membership.Store
}

func benchmarkExpireAMillion(b *testing.B, open func(b *testing.B) expiringStore) {
	t0 := time.Now().Add(time.Hour).Truncate(time.Second)
	for b.Loop() {
		b.StopTimer()
		s := open(b)
		rng := rand.New(rand.NewPCG(1, 2))
		for g := range 1000 {
			w := membership.Write{Op: membership.OpAdd, GroupID: "g" + strconv.Itoa(g)}
			seen := map[int64]bool{}
			for len(w.Users) < 1000 {
				uid := rng.Int64N(1e9) + 1
				if !seen[uid] {
					seen[uid] = true
					w.Users = append(w.Users, membership.User{UID: membership.UID(uid), Expiry: membership.Expiry{Set: true, At: t0}})
				}
			}
			if _, err := s.Write(context.Background(), w); err != nil {
				b.Fatal(err)
			}
		}
		e := New(s, func() time.Time { return t0.Add(time.Second) }, nil)
		b.StartTimer()
		n, err := e.ExpireDue(context.Background())
		if err != nil || n != 1_000_000 {
			b.Fatal(n, err)
		}
	}
}
