package nesting

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heapBytes returns the bytes of live heap, after a collection.
func heapBytes() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Groups in two parents that gain many ancestors, in a write then rolled
// back (refused), or that lose them again, keep no room for them: a group
// whose up lost them takes the parent that brings the most for its up
// again, and a group's extra is made again once it holds a quarter of the
// most it held, so the heap goes back to what it was.
func TestExtrasGiveBackTheRoomOfAncestorsLost(t *testing.T) {
	const groups, above = 400, 300
	g := New()
	for i := range above {
		g.Set(fmt.Sprintf("a%04d", i), "first", 0)  // first is below 300
		g.Set(fmt.Sprintf("b%04d", i), "second", 0) // and so is second
	}
	for i := range groups {
		g.Set("first", fmt.Sprintf("s%04d", i), 0) // each s's up
		g.Set("hub", fmt.Sprintf("s%04d", i), 0)
	}
	g.Stamp(1)
	base := heapBytes()
	s := g.Node("s0000")
	require.Equal(t, 1, len(s.extra), "hub")

	g.Begin()
	g.Set("second", "hub", 0) // each s gains second and its 300
	require.Greater(t, len(s.extra), above, "what it has through one of its parents or the other")
	grown := heapBytes()
	g.Rollback()
	rolledBack := heapBytes()
	assert.Equal(t, 1, len(s.extra))
	assert.Less(t, int64(rolledBack)-int64(base), (int64(grown)-int64(base))/4,
		"heap growth after the rollback (%d before, %d with the write, %d after)", base, grown, rolledBack)

	g.Set("second", "hub", 0)
	g.Stamp(2)
	g.Remove("second", "hub")
	g.Stamp(3)
	lost := heapBytes()
	assert.Equal(t, 1, len(s.extra))
	assert.Less(t, int64(lost)-int64(base), (int64(grown)-int64(base))/4,
		"heap growth after the ancestors were lost (%d before, %d after)", base, lost)
	// Fewer than its up brings: they go to its extra, and leave it.
	for i := range above / 2 {
		g.Set(fmt.Sprintf("c%04d", i), "third", 0)
	}
	g.Stamp(4)
	base = heapBytes()
	g.Set("third", "hub", 0)
	g.Stamp(5)
	require.Same(t, g.Node("first"), s.up)
	require.Greater(t, len(s.extra), above/2)
	grown = heapBytes()
	g.Remove("third", "hub")
	g.Stamp(6)
	lost = heapBytes()
	assert.Equal(t, 1, len(s.extra))
	assert.Less(t, int64(lost)-int64(base), (int64(grown)-int64(base))/4,
		"heap growth after the ancestors were lost from extras (%d before, %d with them, %d after)", base, grown, lost)
	for _, n := range g.nodes {
		assert.True(t, n.extraPeak < compactBelow || len(n.extra) >= int(n.extraPeak)/4, "%s holds %d of %d", n.ID, len(n.extra), n.extraPeak)
	}
}
