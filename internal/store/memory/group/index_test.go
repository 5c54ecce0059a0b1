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
	seed := maphash.MakeSeed()
	tables := NewTables(1, seed, 0)
	ix := NewIndex(seed, tables.At)
	var model []string
	for step := range 5000 {
		id := fmt.Sprintf("%x", rng.IntN(600))
		if g := tables[0].Get(id); g != nil {
			ix.Remove(g)
			tables[0].Remove(g)
			i, _ := slices.BinarySearch(model, id)
			model = slices.Delete(model, i, i+1)
		} else {
			ix.Insert(tables[0].Add(id))
			i, _ := slices.BinarySearch(model, id)
			model = slices.Insert(model, i, id)
		}
		require.Equal(t, len(model), int(ix.countOf(ix.root)), "step %d", step)
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
		// Two stores' tables, whose groups get the same numbers.
		builtTables := NewTables(1, seed, 0)
		insertedTables := NewTables(1, seed, 0)
		built, inserted := NewIndex(seed, builtTables.At), NewIndex(seed, insertedTables.At)
		var sorted []*Group
		for i := range n {
			id := fmt.Sprintf("g%05d", i)
			sorted = append(sorted, builtTables[0].Add(id))
			inserted.Insert(insertedTables[0].Add(id))
		}
		built.Build(sorted)
		var same func(a, b *Group) bool
		same = func(a, b *Group) bool {
			if a == nil || b == nil {
				return a == nil && b == nil
			}
			return a.ID == b.ID && a.node.count == b.node.count && built.priority(a) == inserted.priority(b) &&
				same(built.group(a.node.left), inserted.group(b.node.left)) && same(built.group(a.node.right), inserted.group(b.node.right))
		}
		require.True(t, same(built.group(built.root), inserted.group(inserted.root)), "%d groups", n)
		extra := builtTables[0].Add("g00000a")
		built.Insert(extra)
		assert.Equal(t, n+1, int(built.countOf(built.root)))
		built.Remove(extra)
		assert.Equal(t, n, int(built.countOf(built.root)))
		var ids []string
		built.ascend("", true, func(g *Group) bool { ids = append(ids, g.ID); return true })
		assert.True(t, slices.IsSorted(ids))
		assert.Len(t, ids, n)
	}
}
