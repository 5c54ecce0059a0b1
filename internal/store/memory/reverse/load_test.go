package reverse

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory/packed"
	"example.com/groupmembership/membership"
)

// A shard's blocks start small and double up to BlockPairs: a load of a
// few memberships takes little room (64 shards of whole blocks would take
// 32 to 96 MiB for any load), and a large one's blocks are whole.
func TestPairBlocksGrowFromSmall(t *testing.T) {
	var small blocks
	small.append(packed.Pair{User: 1, Group: 1})
	small.append(packed.Pair{User: 1 << 40, Group: 1})
	assert.LessOrEqual(t, cap(small.narrow[0])+cap(small.wide[0]), 2*firstBlock)

	var large blocks
	const n = 5*BlockPairs + 3
	for i := range n {
		large.append(packed.Pair{User: membership.UID(i), Group: uint32(i)})
	}
	room := 0
	for i, b := range large.narrow {
		assert.LessOrEqual(t, cap(b), BlockPairs, "block %d", i)
		room += cap(b)
	}
	assert.Less(t, room, n+BlockPairs, "no more room than a block's beyond the pairs")
	assert.Equal(t, BlockPairs, cap(large.narrow[len(large.narrow)-2]), "the blocks reach BlockPairs")
	got := large.appendTo(nil)
	require.Len(t, got, n)
	for i, p := range got {
		if p != (packed.Pair{User: membership.UID(i), Group: uint32(i)}) {
			t.Fatalf("pair %d is %v", i, p)
		}
	}
}

// sortByUser sorts pairs in group order as packed.ComparePairs orders
// them, whether their users take one digit or all of them.
func TestSortByUser(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var scratch []packed.Pair // reused, as each worker of Fill does
	for _, maxUser := range []int64{1, 1 << 10, 1 << 20, 1 << 32, math.MaxInt64} {
		ps := make([]packed.Pair, 5000)
		for i := range ps {
			ps[i] = packed.Pair{User: membership.UID(rng.Int64N(maxUser)), Group: uint32(rng.IntN(300))}
		}
		ps = slices.CompactFunc(slices.SortedFunc(slices.Values(ps), packed.ComparePairs), func(a, b packed.Pair) bool { return a == b })
		want := slices.Clone(ps)
		slices.SortStableFunc(ps, func(a, b packed.Pair) int { return cmp.Compare(a.Group, b.Group) }) // group order
		scratch = sortByUser(ps, scratch)
		assert.Equal(t, want, ps, "users below %d", maxUser)
	}
}

// sortRuns puts each user's pairs in group order, whatever order they came
// in within the user: in order (the pass leaves them), a few swapped (as a
// load numbers groups), reversed, and users of one pair and of hundreds.
func TestSortRunsSortsEachUsersGroups(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, shape := range []struct {
		users, most int
		shuffle     func([]packed.Pair)
	}{
		{500, 3, func([]packed.Pair) {}},
		{500, 40, func(run []packed.Pair) {
			if len(run) > 1 && rng.IntN(4) == 0 {
				i := rng.IntN(len(run) - 1)
				run[i], run[i+1] = run[i+1], run[i]
			}
		}},
		{50, 400, func(run []packed.Pair) { slices.Reverse(run) }},
		{50, 400, func(run []packed.Pair) { rng.Shuffle(len(run), func(i, j int) { run[i], run[j] = run[j], run[i] }) }},
	} {
		var ps []packed.Pair
		for u := range shape.users {
			groups := rng.Perm(10 * shape.most)[:1+rng.IntN(shape.most)]
			slices.Sort(groups)
			start := len(ps)
			for _, g := range groups {
				ps = append(ps, packed.Pair{User: membership.UID(u), Group: uint32(g)})
			}
			shape.shuffle(ps[start:])
		}
		want := slices.Clone(ps)
		slices.SortFunc(want, packed.ComparePairs)
		sortRuns(ps)
		assert.Equal(t, want, ps)
	}
}
