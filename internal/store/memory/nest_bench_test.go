package memory

import (
	"context"
	"iter"
	"runtime"
	"strconv"
	"testing"

	"example.com/groupmembership/membership"
)

// The targets of groups in groups, each a pair side by side (kind=direct,
// kind=transitive or kind=nested): compare them with
// benchstat -col /kind.

func nestAll(b *testing.B, m *Store, parent string, children ...string) {
	b.Helper()
	w := membership.Write{Op: membership.OpAddGroups, GroupID: parent}
	for _, c := range children {
		w.Subgroups = append(w.Subgroups, membership.Subgroup{GroupID: c})
	}
	if _, err := m.Write(context.Background(), w); err != nil {
		b.Fatal(err)
	}
}

func addUIDs(b *testing.B, m *Store, group string, uids ...membership.UID) {
	b.Helper()
	users := make([]membership.User, len(uids))
	for i, uid := range uids {
		users[i] = membership.User{UID: uid}
	}
	if _, err := m.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: group, Users: users}); err != nil {
		b.Fatal(err)
	}
}

// deepNesting returns a store whose group "top" has a chain of 8
// nestings below it (top > l1 > … > l8) and 10,000 groups below it in
// all: each level of the chain holds 1,249 or 1,250 leaves besides the
// next. User 1 is in l8 and in four groups outside.
func deepNesting(b *testing.B) *Store {
	m := New()
	prev := "top"
	leaves := 10000 - 8
	for level := 1; level <= 8; level++ {
		id := "l" + strconv.Itoa(level)
		children := []string{id}
		for i := range leaves / 8 {
			children = append(children, id+"/leaf"+strconv.Itoa(i))
		}
		if level == 8 {
			for i := leaves / 8 * 8; i < leaves; i++ {
				children = append(children, id+"/extra"+strconv.Itoa(i))
			}
		}
		nestAll(b, m, prev, children...)
		prev = id
	}
	addUIDs(b, m, "l8", 1)
	for i := range 4 {
		addUIDs(b, m, "outside"+strconv.Itoa(i), 1)
	}
	return m
}

// BenchmarkNestCheck is a check of user 1 in a group: directly in l8
// (CheckMembers), and through 8 nestings in top, which has 10,000 groups
// below it (CheckTransitive).
func BenchmarkNestCheck(b *testing.B) {
	m := deepNesting(b)
	ctx := context.Background()
	b.Run("kind=direct", func(b *testing.B) {
		checks := []membership.Check{{GroupID: "l8", UID: 1}}
		for b.Loop() {
			found, _, err := m.CheckMembers(ctx, checks)
			if err != nil || !found[0] {
				b.Fatal(found, err)
			}
		}
	})
	b.Run("kind=transitive", func(b *testing.B) {
		checks := []membership.Check{{GroupID: "top", UID: 1}}
		for b.Loop() {
			found, _, err := m.CheckTransitive(ctx, checks)
			if err != nil || !found[0] {
				b.Fatal(found, err)
			}
		}
	})
}

// BenchmarkNestMember is the record of user 1: directly in l8 (Member),
// and through 8 nestings in top, which has 10,000 groups below it, with
// its via (TransitiveMember), and the revision of top's transitive list
// (TransitiveRevision, a conditional list's first step).
func BenchmarkNestMember(b *testing.B) {
	m := deepNesting(b)
	ctx := context.Background()
	b.Run("kind=direct", func(b *testing.B) {
		for b.Loop() {
			if _, ok, err := m.Member(ctx, "l8", 1); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("kind=transitive", func(b *testing.B) {
		for b.Loop() {
			_, via, ok, _, err := m.TransitiveMember(ctx, "top", 1)
			if err != nil || !ok || len(via) != 9 {
				b.Fatal(via, ok, err)
			}
		}
	})
	b.Run("kind=revision", func(b *testing.B) {
		for b.Loop() {
			if _, err := m.TransitiveRevision(ctx, "top"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// wideNesting returns a store whose group "top" has 1,000 subgroups of
// 1,000 users each, 1,000,000 distinct users interleaved (user u is in
// subgroup u mod 1,000), and a group "flat" of the same users directly.
func wideNesting(b *testing.B) *Store {
	m := New()
	subs := make([]string, 1000)
	for i := range subs {
		subs[i] = "sub" + strconv.Itoa(i)
		uids := make([]membership.UID, 1000)
		for k := range uids {
			uids[k] = membership.UID(k*1000 + i + 1)
		}
		addUIDs(b, m, subs[i], uids...)
	}
	nestAll(b, m, "top", subs...)
	all := make([]membership.UID, 1000000)
	for i := range all {
		all[i] = membership.UID(i + 1)
	}
	addUIDs(b, m, "flat", all...)
	return m
}

// BenchmarkNestPage is a page of 100 members, from the first and from the
// middle: of "flat", directly (ListMembers), and of "top", through its
// 1,000 subgroups (ListTransitiveMembers, its total counted before).
func BenchmarkNestPage(b *testing.B) {
	m := wideNesting(b)
	ctx := context.Background()
	for _, after := range []membership.UID{0, 500000} {
		opts := membership.ListOptions{After: after, Limit: 100}
		b.Run("after="+strconv.Itoa(int(after))+"/kind=direct", func(b *testing.B) {
			for b.Loop() {
				n := 0
				_, err := m.ListMembers(ctx, "flat", opts, func(total int, members iter.Seq[membership.Member]) {
					for range members {
						n++
					}
				})
				if err != nil || n != 100 {
					b.Fatal(n, err)
				}
			}
		})
		b.Run("after="+strconv.Itoa(int(after))+"/kind=transitive", func(b *testing.B) {
			for b.Loop() {
				n, all := 0, 0
				_, err := m.ListTransitiveMembers(ctx, "top", opts, func(total int, members iter.Seq[membership.Member]) {
					all = total
					for range members {
						n++
					}
				})
				if err != nil || n != 100 || all != 1000000 {
					b.Fatal(n, all, err)
				}
			}
		})
	}
}

// BenchmarkNestAdd3 adds 3 new users to a group with no nesting, and to a
// group with 100 ancestors: the nesting must cost it nothing.
func BenchmarkNestAdd3(b *testing.B) {
	m := New()
	addUIDs(b, m, "alone", 1)
	addUIDs(b, m, "nested", 1)
	for i := range 100 {
		nestAll(b, m, "parent"+strconv.Itoa(i), "nested")
	}
	ctx := context.Background()
	for _, group := range []string{"alone", "nested"} {
		kind := "direct"
		if group == "nested" {
			kind = "nested"
		}
		b.Run("kind="+kind, func(b *testing.B) {
			next := membership.UID(1 << 40)
			for b.Loop() {
				users := []membership.User{{UID: next}, {UID: next + 1}, {UID: next + 2}}
				next += 3
				if _, err := m.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: group, Users: users}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNestEdgeBytes reports the heap a nesting costs, in the graph
// and the groups, with 10,000 groups nested 8 deep (deepNesting).
func BenchmarkNestEdgeBytes(b *testing.B) {
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		m := deepNesting(b)
		runtime.GC()
		runtime.ReadMemStats(&after)
		m.nestMu.RLock()
		edges := m.nest.Edges()
		m.nestMu.RUnlock()
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(edges), "bytes/edge")
		runtime.KeepAlive(m)
	}
}
