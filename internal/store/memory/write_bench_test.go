package memory

import (
	"context"
	"fmt"
	"iter"
	"runtime"
	"testing"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// BenchmarkMemoryGroupsPage lists a page of 100 groups from a random place
// among a million, with the total of a prefix.
func BenchmarkMemoryGroupsPage(b *testing.B) {
	m := New()
	ctx := context.Background()
	for i := range 1_000_000 {
		if _, err := storetest.Add(ctx, m, fmt.Sprintf("group-%07d", i), []membership.User{{UID: membership.UID(i + 1)}}); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		i = (i + 7919) % 1_000_000
		n := 0
		_, err := m.Groups(ctx, membership.GroupsOptions{Prefix: "group-", After: fmt.Sprintf("group-%07d", i), Limit: 101},
			func(total int, groups iter.Seq[membership.GroupSize]) {
				for range groups {
					n++
				}
			})
		if err != nil || n == 0 {
			b.Fatal(err, n)
		}
	}
}

// BenchmarkMemoryReplace1000 replaces a group of 1,000 by 1,000 users of
// which half are new, and back.
func BenchmarkMemoryReplace1000(b *testing.B) {
	m := filledMemory(b, 1000, 1000)
	ctx := context.Background()
	sets := [2][]membership.User{}
	for i := range 1000 {
		sets[0] = append(sets[0], membership.User{UID: membership.UID(i + 1)})
		sets[1] = append(sets[1], membership.User{UID: membership.UID(i + 501)})
	}
	if _, err := m.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: "r", Users: sets[0]}); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		res, err := m.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: "r", Users: sets[i%2]})
		if err != nil || res.Count != 500 || res.Removed != 500 {
			b.Fatal(err, res)
		}
	}
}

// BenchmarkMemoryDeleteGroupMillion deletes a group of a million members,
// each also in a small group, and reports how much the heap grew while it
// ran, besides what the group held.
func BenchmarkMemoryDeleteGroupMillion(b *testing.B) {
	ctx := context.Background()
	var grew uint64
	for b.Loop() {
		b.StopTimer()
		m := New()
		users := make([]membership.User, 0, 10_000)
		for i := range 1_000_000 {
			users = append(users, membership.User{UID: membership.UID(i*3 + 1)})
			if len(users) == cap(users) {
				if _, err := storetest.Add(ctx, m, "big", users); err != nil {
					b.Fatal(err)
				}
				if _, err := storetest.Add(ctx, m, fmt.Sprint("small", i), users[:10]); err != nil {
					b.Fatal(err)
				}
				users = users[:0]
			}
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		res, err := m.Write(ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: "big"})
		b.StopTimer()
		runtime.ReadMemStats(&after)
		if err != nil || res.Count != 1_000_000 {
			b.Fatal(err, res)
		}
		grew = max(grew, after.TotalAlloc-before.TotalAlloc)
		runtime.KeepAlive(m)
		b.StartTimer()
	}
	b.ReportMetric(float64(grew), "B-allocated")
}
