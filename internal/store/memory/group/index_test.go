package group

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGroupIndexAgreesWithASortedList inserts and removes random ids,
// growing to thousands (leaves and inner nodes split) and shrinking to
// few (they merge, and the root comes down), then to none, and checks the tree's shape
// and every query of the index against a sorted list of the same ids.
func TestGroupIndexAgreesWithASortedList(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tables := NewTables(1, maphash.MakeSeed(), 0)
	ix := NewIndex(tables.At)
	var model []string
	for step := range 30000 {
		span := 8000
		if step >= 15000 {
			span = 300
		}
		id := fmt.Sprintf("%x", rng.IntN(span))
		if g := tables[0].Get(id); g != nil && (span == 300 || rng.IntN(3) == 0) {
			ix.Remove(g)
			tables[0].Remove(g)
			i, _ := slices.BinarySearch(model, id)
			model = slices.Delete(model, i, i+1)
		} else if g == nil {
			ix.Insert(tables[0].Add(id))
			i, _ := slices.BinarySearch(model, id)
			model = slices.Insert(model, i, id)
		}
		if step%500 == 0 || step == 29999 {
			checkIndex(t, &ix, model, step)
		}
	}
	for _, id := range model {
		g := tables[0].Get(id)
		ix.Remove(g)
		tables[0].Remove(g)
		if tables[0].Len() == 100 {
			assert.Equal(t, 1, ix.height, "the root came down")
		}
	}
	checkIndex(t, &ix, nil, 30000)
}

// checkIndex checks the shape of ix's tree and its queries against model,
// the sorted ids it holds.
func checkIndex(t *testing.T, ix *Index, model []string, step int) {
	t.Helper()
	require.Equal(t, len(model), ix.total, "step %d", step)
	var ids []string
	ix.ascend("", true, func(g *Group) bool { ids = append(ids, g.ID); return true })
	if len(model) == 0 {
		require.Empty(t, ids, "step %d", step)
		require.Nil(t, ix.root, "step %d", step)
		return
	}
	require.Equal(t, model, ids, "step %d", step)
	checkNode(t, ix, ix.root, ix.height, step)
	rng := rand.New(rand.NewPCG(uint64(step), 0))
	for range 20 {
		probe := model[rng.IntN(len(model))]
		if rng.IntN(2) == 0 {
			probe += "0" // between two ids, or after the last
		}
		below, _ := slices.BinarySearch(model, probe)
		assert.Equal(t, below, ix.below(probe), "step %d: below %q", step, probe)
		for _, inclusive := range []bool{false, true} {
			var got []string
			ix.ascend(probe, inclusive, func(g *Group) bool {
				got = append(got, g.ID)
				return len(got) < 100
			})
			from := below
			if !inclusive && from < len(model) && model[from] == probe {
				from++
			}
			want := model[from:min(from+100, len(model))]
			if len(want) == 0 {
				want = nil
			}
			assert.Equal(t, want, got, "step %d: ascend from %q inclusive=%v", step, probe, inclusive)
		}
	}
}

// checkNode checks x, at height h, and returns how many groups are below
// it: each child's count and first id right, no node over its most, and
// no child empty.
func checkNode(t *testing.T, ix *Index, x *inner, h, step int) int {
	t.Helper()
	require.LessOrEqual(t, x.n, innerMax, "step %d", step)
	total := 0
	for i := range x.n {
		var n int
		var first string
		if h == 1 {
			l := x.leaves[i]
			require.Positive(t, l.n, "step %d: an empty leaf", step)
			require.LessOrEqual(t, int(l.n), leafMax, "step %d", step)
			n, first = int(l.n), ix.id(l.numbers[0])
		} else {
			c := x.inners[i]
			require.Positive(t, c.n, "step %d: an empty node", step)
			n, first = checkNode(t, ix, c, h-1, step), c.firsts[0]
		}
		require.Equal(t, n, x.counts[i], "step %d: a child's count", step)
		require.Equal(t, first, x.firsts[i], "step %d: a child's first id", step)
		total += n
	}
	return total
}

// TestGroupIndexBuildThenChange builds indexes from sorted ids in one pass,
// of sizes around a leaf's and of three levels of inner nodes, and checks
// them, and then after inserts and removes.
func TestGroupIndexBuildThenChange(t *testing.T) {
	for _, n := range []int{0, 1, 2, leafMax - 1, leafMax, leafMax + 1, 5000, 300000} {
		tables := NewTables(1, maphash.MakeSeed(), 0)
		ix := NewIndex(tables.At)
		var sorted []*Group
		var model []string
		for i := range n {
			id := fmt.Sprintf("g%07d", 2*i)
			sorted = append(sorted, tables[0].Add(id))
			model = append(model, id)
		}
		ix.Build(sorted)
		checkIndex(t, &ix, model, n)
		if n == 300000 {
			assert.Equal(t, 3, ix.height, "%d groups", n)
		}
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		for range 2000 {
			if i := rng.IntN(2*n + 2); i%2 == 1 || len(model) == 0 {
				id := fmt.Sprintf("g%07d", i)
				if j, found := slices.BinarySearch(model, id); !found {
					ix.Insert(tables[0].Add(id))
					model = slices.Insert(model, j, id)
				}
			} else {
				j := rng.IntN(len(model))
				g := tables[0].Get(model[j])
				ix.Remove(g)
				tables[0].Remove(g)
				model = slices.Delete(model, j, j+1)
			}
		}
		checkIndex(t, &ix, model, n)
	}
}

// TestGroupIndexFromAnOffset checks From, from offsets in every leaf of a
// tree of three levels and past its end, and Len, against a sorted list.
func TestGroupIndexFromAnOffset(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tables := NewTables(1, maphash.MakeSeed(), 0)
	ix := NewIndex(tables.At)
	var model []string
	for len(model) < 200000 {
		id := fmt.Sprintf("%x", rng.IntN(1<<24))
		if tables[0].Get(id) == nil {
			ix.Insert(tables[0].Add(id))
			model = append(model, id)
		}
	}
	slices.Sort(model)
	require.Equal(t, 3, ix.height, "a tree of three levels")
	assert.Equal(t, len(model), ix.Len())
	for offset := 0; offset <= len(model)+1; offset += 1 + rng.IntN(4000) {
		var got []string
		ix.From(offset, func(g *Group) bool {
			got = append(got, g.ID)
			return len(got) < 100
		})
		want := model[min(offset, len(model)):min(offset+100, len(model))]
		if len(want) == 0 {
			want = nil
		}
		require.Equal(t, want, got, "from %d", offset)
	}
	for _, offset := range []int{len(model) - 1, len(model), len(model) + 1} {
		var got []string
		ix.From(offset, func(g *Group) bool { got = append(got, g.ID); return true })
		assert.Equal(t, append([]string(nil), model[min(offset, len(model)):]...), got, "from %d", offset)
	}
	var all []string
	ix.From(0, func(g *Group) bool { all = append(all, g.ID); return true })
	assert.Equal(t, model, all)
}
