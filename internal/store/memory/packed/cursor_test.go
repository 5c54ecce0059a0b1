package packed

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"example.com/groupmembership/membership"
)

// A Cursor from any point reads what EachAbove yields from it, over sets
// sparse and dense, filled in bulk or one at a time.
func TestCursorReadsAsEachAboveDoes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, spread := range []int64{3, 1000, 1 << 40} {
		var bulk, one Members
		uids := make([]membership.UID, 0, 3000)
		for range 3000 {
			uids = append(uids, membership.UID(rng.Int64N(spread*3000)+1))
		}
		slices.Sort(uids)
		uids = slices.Compact(uids)
		bulk.Fill(uids)
		for _, uid := range uids {
			one.Add(uid)
		}
		afters := []membership.UID{0, uids[0] - 1, uids[0], uids[len(uids)-1], uids[len(uids)-1] + 1, math.MaxInt64}
		for range 200 {
			afters = append(afters, uids[rng.IntN(len(uids))]+membership.UID(rng.IntN(3))-1)
		}
		for _, m := range []*Members{&bulk, &one} {
			for _, after := range afters {
				var want, got []membership.UID
				m.EachAbove(after, func(uid membership.UID) bool { want = append(want, uid); return len(want) < 500 })
				for c := m.From(after); c.Ok() && len(got) < 500; c.Next() {
					got = append(got, c.UID())
				}
				assert.Equal(t, want, got, "spread %d, after %d", spread, after)
			}
		}
	}
	var empty Members
	c := empty.From(0)
	assert.False(t, c.Ok())
}
