package memory

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
	ix := groupIndex{seed: maphash.MakeSeed()}
	var model []string
	groups := map[string]*group{}
	for step := range 5000 {
		id := fmt.Sprintf("%x", rng.IntN(600))
		if _, ok := groups[id]; ok {
			ix.remove(id)
			delete(groups, id)
			i, _ := slices.BinarySearch(model, id)
			model = slices.Delete(model, i, i+1)
		} else {
			g := &group{id: id}
			ix.insert(g)
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
			ix.ascend(probe, inclusive, func(g *group) bool {
				got = append(got, g.id)
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

func TestPrefixEnd(t *testing.T) {
	tests := []struct {
		prefix, want string
		ok           bool
	}{
		{"a", "b", true},
		{"ab", "ac", true},
		{"a\xff", "b", true},
		{"\xff\xff", "", false},
		{"", "", false},
		{"é", "\xc3\xaa", true},
	}
	for _, tt := range tests {
		got, ok := prefixEnd(tt.prefix)
		assert.Equal(t, tt.ok, ok, tt.prefix)
		assert.Equal(t, tt.want, got, tt.prefix)
	}
}

// TestGroupIndexBuildIsTheTreapOfInserts builds an index from sorted ids in
// one pass and checks it is the very treap that inserting them one at a
// time makes (a treap is fixed by its keys and priorities), counts
// included, and that it takes inserts and removes afterwards.
func TestGroupIndexBuildIsTheTreapOfInserts(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 1000} {
		seed := maphash.MakeSeed()
		built, inserted := groupIndex{seed: seed}, groupIndex{seed: seed}
		var sorted []*group
		for i := range n {
			id := fmt.Sprintf("g%05d", i)
			sorted = append(sorted, &group{id: id})
			inserted.insert(&group{id: id})
		}
		built.build(sorted)
		var same func(a, b *group) bool
		same = func(a, b *group) bool {
			if a == nil || b == nil {
				return a == nil && b == nil
			}
			return a.id == b.id && a.node.count == b.node.count && a.node.priority == b.node.priority &&
				same(a.node.left, b.node.left) && same(a.node.right, b.node.right)
		}
		require.True(t, same(built.root, inserted.root), "%d groups", n)
		built.insert(&group{id: "g00000a"})
		assert.Equal(t, n+1, countOf(built.root))
		built.remove("g00000a")
		assert.Equal(t, n, countOf(built.root))
		var ids []string
		built.ascend("", true, func(g *group) bool { ids = append(ids, g.id); return true })
		assert.True(t, slices.IsSorted(ids))
	}
}
