package group

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTablesAgreeWithAMap adds and removes random ids in the tables of
// three shards, growing past several pages and index sizes and shrinking
// again, and checks each table against a map: what Get finds, what All
// yields, the numbers (distinct, and At's groups), and that the slots of
// dropped groups are given out again.
func TestTablesAgreeWithAMap(t *testing.T) {
	const shards = 3
	rng := rand.New(rand.NewPCG(3, 4))
	seed := maphash.MakeSeed()
	ts := NewTables(shards, seed, 0)
	tableOf := func(id string) *Table { return &ts[maphash.String(seed, id)%shards] }
	model := map[string]*Group{}
	most := 0
	check := func(step int) {
		numbers := map[uint32]string{}
		for i := range ts {
			n := 0
			for g := range ts[i].All {
				n++
				require.Same(t, model[g.ID], g, "step %d: All yields %q", step, g.ID)
				require.Equal(t, uint32(i), g.Number%shards, "step %d: %q numbered in its shard", step, g.ID)
				numbers[g.Number] = g.ID
			}
			require.Equal(t, n, ts[i].Len(), "step %d", step)
		}
		require.Len(t, numbers, len(model), "step %d: every group, a number of its own", step)
		for id, g := range model {
			require.Same(t, g, tableOf(id).Get(id), "step %d: Get(%q)", step, id)
			require.Same(t, g, ts.At(g.Number), "step %d: At(%d)", step, g.Number)
			require.Less(t, g.Number, uint32(shards*most+shards), "step %d: slots are given out again", step)
		}
	}
	for step := range 30000 {
		// Grow to about 1,500 groups, then shrink to few, then grow again.
		span := 2000
		if step >= 12000 && step < 24000 {
			span = 150
		}
		id := fmt.Sprintf("g%d", rng.IntN(span))
		if g := model[id]; g != nil && (span < 2000 || rng.IntN(4) == 0) {
			tableOf(id).Remove(g)
			assert.Empty(t, g.ID, "a dropped group's slot is zeroed")
			require.Nil(t, tableOf(id).Get(id), "step %d: Get(%q) after its removal", step, id)
			delete(model, id)
		} else if g == nil {
			require.Nil(t, tableOf(id).Get(id), "step %d: Get(%q) before it is added", step, id)
			g := tableOf(id).Add(id)
			require.Equal(t, id, g.ID)
			model[id] = g
		}
		most = max(most, len(model))
		if step%500 == 0 {
			check(step)
		}
	}
	check(30000)
	assert.Nil(t, ts.At(shards*1_000_000), "a number past every page")
}

// TestTablesKeepAttributesBesideTheSlots checks that a group's attributes
// are kept beside its slot, which stays 64 bytes: they count in Size and
// keep the group from being Vacant, outlive a change of its subgroups,
// and go with the group, so that the next group given its slot has none.
func TestTablesKeepAttributesBesideTheSlots(t *testing.T) {
	assert.Equal(t, uintptr(64), unsafe.Sizeof(Group{}))
	ts := NewTables(2, maphash.MakeSeed(), 0)
	g := ts[1].Add("a")
	require.True(t, g.Vacant())
	a := &Attrs{Created: 1, Modified: 2}
	a.DisplayName = "A"
	ts.SetAttrs(g, a)
	assert.Same(t, a, ts.Attrs(g))
	assert.False(t, g.Vacant(), "a group with attributes is kept")
	assert.Equal(t, 1, g.Size())
	g.SetSubgroups(3)
	assert.Equal(t, 3, g.Subgroups())
	assert.Equal(t, 4, g.Size())
	g.SetSubgroups(0)
	assert.Same(t, a, ts.Attrs(g), "the attributes outlive the subgroups")
	ts.SetAttrs(g, nil)
	assert.Nil(t, ts.Attrs(g))
	assert.True(t, g.Vacant())
	ts.SetAttrs(g, a)
	number := g.Number
	ts[1].Remove(g)
	assert.Empty(t, ts[1].attrs, "the attributes go with the group")
	next := ts[1].Add("b")
	require.Equal(t, number, next.Number, "the slot is given out again")
	assert.Nil(t, ts.Attrs(next))
	assert.True(t, next.Vacant())
}
