package packed

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// Add and Remove tell whether the pair was a uid's first or last, across
// chunk boundaries, as a map of each uid's pairs does; the chunks hold
// exactly the pairs of the map, in order, each within its bytes. Small
// spans put many pairs on each uid; the large one needs the longest
// varints.
func TestPairSetTellsFirstAndLastOfAUID(t *testing.T) {
	for _, span := range []struct {
		uids   int64
		groups uint32
	}{{300, 20}, {1 << 62, 1<<32 - 1}} {
		t.Run(fmt.Sprint(span.uids), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 8))
			var s Pairs
			have := map[Pair]bool{}
			count := map[membership.UID]int{}
			var probes []membership.UID
			for step := range 20000 {
				p := Pair{User: membership.UID(1 + rng.Int64N(span.uids)), Group: rng.Uint32N(span.groups)}
				if len(probes) > 0 && rng.IntN(2) == 0 {
					p.User = probes[rng.IntN(len(probes))] // another group of a uid seen
				}
				probes = append(probes, p.User)
				if (step < 12000) == (rng.IntN(3) != 0) {
					first := !have[p] && count[p.User] == 0
					if !have[p] {
						have[p] = true
						count[p.User]++
					}
					require.Equal(t, first, s.Add(p), "step %d: add %v", step, p)
				} else {
					wasLast := have[p] && count[p.User] == 1
					if have[p] {
						delete(have, p)
						count[p.User]--
					}
					require.Equal(t, wasLast, s.Remove(p), "step %d: remove %v", step, p)
				}
				probe := probes[rng.IntN(len(probes))] + membership.UID(rng.IntN(2))
				require.Equal(t, count[probe] > 0, s.HasUser(probe), "step %d: has %d", step, probe)
				if step%1000 == 0 {
					checkPairs(t, &s, have)
				}
			}
			checkPairs(t, &s, have)
			require.Greater(t, len(s.chunks), 10, "the pairs spread over many chunks")
		})
	}
}

// checkPairs checks that s holds exactly the pairs of want, in order, each
// chunk within its bytes.
func checkPairs(t *testing.T, s *Pairs, want map[Pair]bool) {
	t.Helper()
	checkHolds(t, &s.set, maxPairChunkBytes, want)
}
