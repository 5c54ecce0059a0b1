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

// TestGroupIndexAgreesWithASortedList inserts and removes random ids and
// checks every query of the index against a sorted list of the same ids.
func TestGroupIndexAgreesWithASortedList(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ix := NewIndex(maphash.MakeSeed())
	var model []string
	groups := map[string]*Group{}
	for step := range 5000 {
		id := fmt.Sprintf("%x", rng.IntN(600))
		if _, ok := groups[id]; ok {
			ix.Remove(id)
			delete(groups, id)
			i, _ := slices.BinarySearch(model, id)
			model = slices.Delete(model, i, i+1)
		} else {
			g := &Group{ID: id}
			ix.Insert(g)
			groups[id] = g
			i, _ := slices.BinarySearch(model, id)
			model = slices.Insert(model, i, id)
		}
		require.Equal(t, len(model), countOf(ix.root), "step %d", step)
		if step%50 != 0 {
			continue
		}
		probe := fmt.Sprintf("%x", rng.IntN(700))
		below, _ := slices.BinarySearch(model, probe)
		assert.Equal(t, below, ix.below(probe), "below %q", probe)
		for _, inclusive := range []bool{false, true} {
			var got []string
			ix.ascend(probe, inclusive, func(g *Group) bool {
				got = append(got, g.ID)
				return len(got) < 10
			})
			from := below
			if !inclusive && from < len(model) && model[from] == probe {
				from++
			}
			want := model[from:min(from+10, len(model))]
			if len(want) == 0 {
				want = nil
			}
			assert.Equal(t, want, got, "ascend from %q inclusive=%v", probe, inclusive)
		}
	}
}

// TestGroupIndexBuildIsTheTreapOfInserts builds an index from sorted ids in
// one pass and checks it is the very treap that inserting them one at a
// time makes (a treap is fixed by its keys and priorities), counts
// included, and that it takes inserts and removes afterwards.
func TestGroupIndexBuildIsTheTreapOfInserts(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 1000} {
		seed := maphash.MakeSeed()
		built, inserted := Index{seed: seed}, Index{seed: seed}
		var sorted []*Group
		for i := range n {
			id := fmt.Sprintf("g%05d", i)
			sorted = append(sorted, &Group{ID: id})
			inserted.Insert(&Group{ID: id})
		}
		built.Build(sorted)
		var same func(a, b *Group) bool
		same = func(a, b *Group) bool {
			if a == nil || b == nil {
				return a == nil && b == nil
			}
			return a.ID == b.ID && a.node.count == b.node.count && a.node.priority == b.node.priority &&
				same(a.node.left, b.node.left) && same(a.node.right, b.node.right)
		}
		require.True(t, same(built.root, inserted.root), "%d groups", n)
		built.Insert(&Group{ID: "g00000a"})
		assert.Equal(t, n+1, countOf(built.root))
		built.Remove("g00000a")
		assert.Equal(t, n, countOf(built.root))
		var ids []string
		built.ascend("", true, func(g *Group) bool { ids = append(ids, g.ID); return true })
		assert.True(t, slices.IsSorted(ids))
	}
}
