package durable

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// BenchmarkDurableAdd measures acknowledged adds of 3 users per second,
// each one fsynced before it returns, from 1 and from 50 concurrent clients,
// with group commit and with one fsync per change (NoGroupCommit), in one run;
// and the fsyncs of MARK per second beside them.
func BenchmarkDurableAdd(b *testing.B) {
	for _, groupCommit := range []bool{false, true} {
		for _, clients := range []int{1, 50} {
			name := "fsync-per-change"
			if groupCommit {
				name = "group-commit"
			}
			b.Run(name+"/clients="+strconv.Itoa(clients), func(b *testing.B) {
				d, err := Open(b.TempDir(), Options{ChangesKeep: keepAll, NoGroupCommit: !groupCommit})
				if err != nil {
					b.Fatal(err)
				}
				defer d.Close()
				var next atomic.Int64
				ctx := context.Background()
				b.SetParallelism((clients + 1) / 2) // RunParallel runs this many per core, on 2 cores
				if clients == 1 {
					b.SetParallelism(1)
				}
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					rng := rand.New(rand.NewPCG(uint64(next.Add(1)), 0))
					for pb.Next() {
						users := []membership.User{{UID: membership.UID(rng.Int64N(1e9) + 1)}, {UID: membership.UID(rng.Int64N(1e9) + 1)}, {UID: membership.UID(rng.Int64N(1e9) + 1)}}
						if _, err := storetest.Add(ctx, d, "g"+strconv.Itoa(rng.IntN(1000)), users); err != nil {
							b.Error(err)
							return
						}
					}
				})
				took := time.Since(start).Seconds()
				b.ReportMetric(float64(b.N)/took, "writes/s")
				b.ReportMetric(float64(d.Stats().Disk.MarkWrites)/took, "mark-fsyncs/s")
			})
		}
	}
}

// BenchmarkDurableRestart measures opening a data directory that holds
// 1,000,000 memberships (1000 groups of 1000 random users), from the log
// alone and from a snapshot.
func BenchmarkDurableRestart(b *testing.B) {
	for _, fromSnapshot := range []bool{false, true} {
		name := "from-log"
		snapshotBytes := int64(1 << 40)
		if fromSnapshot {
			name, snapshotBytes = "from-snapshot", 1<<20
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			d, err := Open(dir, Options{ChangesKeep: keepAll, SnapshotBytes: snapshotBytes})
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for g := range 1000 {
				users := make([]membership.User, 1000)
				for i := range users {
					users[i] = membership.User{UID: membership.UID(rng.Int64N(1e9) + 1)}
				}
				if _, err := storetest.Add(context.Background(), d, "g"+strconv.Itoa(g), users); err != nil {
					b.Fatal(err)
				}
			}
			if err := d.Close(); err != nil {
				b.Fatal(err)
			}
			benchOpen(b, dir, Options{ChangesKeep: keepAll, SnapshotBytes: snapshotBytes})
		})
	}
}

// BenchmarkDurableRestartAfterRewrites opens a directory whose state (one
// group of 1000) was rewritten by 100,000 and by 1,000,000 changes, against
// the same state written once: with snapshots, restart replays at most
// SnapshotBytes of log, however long the history.
func BenchmarkDurableRestartAfterRewrites(b *testing.B) {
	for _, rewrites := range []int{0, 100_000, 1_000_000} {
		b.Run("rewrites="+strconv.Itoa(rewrites), func(b *testing.B) {
			dir := b.TempDir()
			opts := Options{ChangesKeep: keepAll, SnapshotBytes: 1 << 20}
			d, err := Open(dir, opts)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			users := make([]membership.User, 1000)
			for i := range users {
				users[i] = membership.User{UID: membership.UID(i + 1)}
			}
			if _, err := storetest.Add(ctx, d, "g", users); err != nil {
				b.Fatal(err)
			}
			// Each change removes a member or adds it back, from 50 writers.
			var next atomic.Int64
			done := make(chan struct{})
			for range 50 {
				go func() {
					for {
						i := next.Add(1)
						if i > int64(rewrites) {
							done <- struct{}{}
							return
						}
						uid := membership.UID(i%1000 + 1)
						var err error
						if i/1000%2 == 0 {
							_, err = storetest.Remove(ctx, d, "g", []membership.UID{uid})
						} else {
							_, err = storetest.Add(ctx, d, "g", []membership.User{{UID: uid}})
						}
						if err != nil {
							b.Error(err)
						}
					}
				}()
			}
			for range 50 {
				<-done
			}
			if err := d.Close(); err != nil {
				b.Fatal(err)
			}
			benchOpen(b, dir, opts)
		})
	}
}

// benchOpen times opening dir; closing is not timed.
func benchOpen(b *testing.B, dir string, opts Options) {
	b.ResetTimer()
	for b.Loop() {
		d, err := Open(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := d.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
