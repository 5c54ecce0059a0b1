package group

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"testing"

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
