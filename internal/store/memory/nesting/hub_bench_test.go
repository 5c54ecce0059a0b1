package nesting

import (
	"fmt"
	"runtime"
	"testing"

	"example.com/groupmembership/membership"
)

// BenchmarkHubAncestors builds a hub: a group in parents groups that
// holds children groups, each of which holds one group of its own, and
// reports the heap the graph takes, the steps over ancestor sets its
// nestings took, and the cost of a check of the deepest groups against a
// parent of the hub (IsAbove).
func BenchmarkHubAncestors(b *testing.B) {
	for _, size := range []int{1000, 2000} {
		b.Run(fmt.Sprintf("parents=children=%d", size), func(b *testing.B) {
			var g *Graph
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				g = hub(size, size)
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB")
				b.ReportMetric(float64(g.Steps()), "steps")
			}
			runtime.KeepAlive(g)
		})
	}
}

// BenchmarkHubIsAbove checks whether a parent of a hub is above a group
// two levels below it (hub).
func BenchmarkHubIsAbove(b *testing.B) {
	g := hub(1000, 1000)
	leaf, top := g.Node("leaf0500"), g.Node("parent0999")
	for b.Loop() {
		if !leaf.IsAbove(top) {
			b.Fatal("not above")
		}
	}
}

// hub returns a graph of a hub in parents groups, holding children
// groups, child%04d holding leaf%04d: half the parents nest it before it
// holds its children, half after.
func hub(parents, children int) *Graph {
	g := New()
	for i := range parents / 2 {
		g.Set(fmt.Sprintf("parent%04d", i), "hub", 0)
	}
	for i := range children {
		g.Set("hub", fmt.Sprintf("child%04d", i), 0)
		g.Set(fmt.Sprintf("child%04d", i), fmt.Sprintf("leaf%04d", i), 0)
	}
	for i := parents / 2; i < parents; i++ {
		g.Set(fmt.Sprintf("parent%04d", i), "hub", 0)
		g.Stamp(membership.Revision(i)) // a write each
	}
	return g
}
