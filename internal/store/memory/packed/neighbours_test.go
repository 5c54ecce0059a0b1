package packed

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// TestAddsAndRemovesTellTheirNeighbours adds and removes pairs beside a sorted slice,
// at small and real limits (so chunks split, merge, repack and empty
// often), with users near 0 and math.MaxInt64 and groups of every size,
// checking the neighbours each add and remove reports, contains, the pairs
// in order, and the chunks' invariants.
func TestAddsAndRemovesTellTheirNeighbours(t *testing.T) {
	for _, limit := range []int{16, 40, 64, 256, 384} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("limit%d/seed%d", limit, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(limit)))
				var s set
				var want []Pair
				groupBits := []int{0, 1, 2, 8, 20, 21, 31, 32}
				randomPair := func() Pair {
					var u membership.UID
					switch rng.IntN(4) {
					case 0:
						u = membership.UID(rng.Int64N(200))
					case 1:
						u = membership.UID(math.MaxInt64 - rng.Int64N(200))
					case 2:
						u = membership.UID(rng.Int64N(math.MaxInt64))
					default:
						u = membership.UID(1<<33 + rng.Int64N(1<<uint(rng.IntN(40)+1)))
					}
					b := groupBits[rng.IntN(len(groupBits))]
					g := uint32(rng.Uint64N(1 << uint(b)))
					if rng.IntN(3) == 0 {
						g = uint32(rng.IntN(3))
					}
					return Pair{User: u, Group: g}
				}
				nbOf := func(p Pair) (nb neighbours) {
					i, _ := slices.BinarySearchFunc(want, p, ComparePairs)
					if i > 0 {
						nb.prev, nb.hasPrev = want[i-1], true
					}
					j := i
					if j < len(want) && want[j] == p {
						j++
					}
					if j < len(want) {
						nb.next, nb.hasNext = want[j], true
					}
					return nb
				}
				for step := range 6000 {
					p := randomPair()
					if len(want) > 0 && rng.IntN(2) == 0 {
						switch rng.IntN(4) {
						case 0:
							p = want[0]
						case 1:
							p = want[len(want)-1]
						case 2:
							// a chunk's first pair
							c := s.chunks[rng.IntN(len(s.chunks))]
							p = c.first
						default:
							p = want[rng.IntN(len(want))]
						}
					}
					i, found := slices.BinarySearchFunc(want, p, ComparePairs)
					if found {
						exp := nbOf(p)
						removed, nb := s.remove(p, limit)
						require.True(t, removed, "step %d remove %v", step, p)
						require.Equal(t, exp, nb, "step %d remove %v neighbours", step, p)
						want = slices.Delete(want, i, i+1)
					} else if rng.IntN(4) == 0 {
						removed, _ := s.remove(p, limit)
						require.False(t, removed, "step %d remove absent %v", step, p)
					} else {
						exp := nbOf(p)
						added, nb := s.add(p, limit)
						require.True(t, added, "step %d add %v", step, p)
						require.Equal(t, exp, nb, "step %d add %v neighbours", step, p)
						want = slices.Insert(want, i, p)
					}
					_, in := slices.BinarySearchFunc(want, p, ComparePairs)
					require.Equal(t, in, s.contains(p), "step %d contains %v", step, p)
					if step%200 == 0 {
						checkPacked(t, &s, limit)
						got := pairsOf(&s)
						if len(want) == 0 {
							require.Empty(t, got)
						} else {
							require.Equal(t, want, got, "step %d", step)
						}
						for _, q := range want[:min(len(want), 20)] {
							require.True(t, s.contains(q))
						}
					}
				}
			})
		}
	}
}
