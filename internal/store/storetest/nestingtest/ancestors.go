package nestingtest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// testTooManyAncestorsRefused puts groups below hub, which is in parents
// p1, p2 and p3 in turn: a nesting that would put a group below more than
// MaxAncestors groups (at any depth below the nesting) is refused, naming
// the group, whether that group has one parent or two, in a write of one
// nesting or of several, a replace and a batch, and nothing of it is
// applied.
func testTooManyAncestorsRefused(t *testing.T, ctx context.Context, s store.Expiring) {
	most := func(w membership.Write, n int) membership.Write { w.MaxAncestors = n; return w }
	storetest.MustWrite(t, s, most(storetest.Nest("hub", "mid"), 3))
	storetest.MustWrite(t, s, most(storetest.Nest("mid", "leaf"), 3))
	storetest.MustWrite(t, s, most(storetest.Nest("p1", "hub"), 3)) // leaf is below mid, hub, p1
	refused(t, s, most(storetest.Nest("p2", "hub"), 3), membership.TooManyAncestorsError("p2", "hub", "leaf", 4, 3))
	refused(t, s, most(storetest.Nest("p2", "other", "hub"), 3), membership.TooManyAncestorsError("p2", "hub", "leaf", 4, 3))
	refused(t, s, most(storetest.NestingWrite(membership.OpReplaceGroups, "p2", "other", "hub"), 3),
		membership.TooManyAncestorsError("p2", "hub", "leaf", 4, 3))
	got, _, _ := storetest.Parents(t, s, "hub", membership.NestingListOptions{})
	assert.Equal(t, storetest.Nested("p1"), got, "nothing of a refused write is applied")
	got, _, _ = storetest.Subgroups(t, s, "p2", membership.NestingListOptions{})
	assert.Empty(t, got, "nothing of a refused write is applied")

	storetest.MustWrite(t, s, most(storetest.Nest("p2", "hub"), 4))
	storetest.MustWrite(t, s, most(storetest.Nest("top", "p1"), 0)) // no bound: leaf is below 5
	// leaf in a second parent: it keeps its 5, and q's own make 6.
	storetest.MustWrite(t, s, most(storetest.Nest("q", "leaf"), 6))
	refused(t, s, most(storetest.Nest("r", "q"), 6), membership.TooManyAncestorsError("r", "q", "leaf", 7, 6))

	before := storetest.Latest(t, s)
	b := membership.Batch{MaxDepth: membership.DefaultMaxDepth, MaxAncestors: 6, Writes: []membership.Write{
		storetest.Nest("x", "y"),
		storetest.Nest("r", "q"),
	}}
	_, err := s.Batch(ctx, b)
	require.Error(t, err)
	assert.Equal(t, `changes element 1 (group "r"): `+membership.TooManyAncestorsError("r", "q", "leaf", 7, 6).Message, membership.ErrorMessage(err))
	assert.Equal(t, membership.CodeTooManyAncestors, membership.ErrorCode(err))
	assert.Equal(t, before, storetest.Latest(t, s), "a refused batch takes no revision")
	got, _, _ = storetest.Subgroups(t, s, "x", membership.NestingListOptions{})
	assert.Empty(t, got, "nothing of a refused batch is applied")

	// A change before it in the batch makes room.
	b.Writes = append([]membership.Write{storetest.NestingWrite(membership.OpRemoveGroups, "top", "p1")}, b.Writes...)
	res := storetest.MustBatch(t, s, b)
	assert.Equal(t, before+1, res.Revision)
	got, _, _ = storetest.Parents(t, s, "leaf", membership.NestingListOptions{Transitive: true})
	assert.Equal(t, storetest.Nested("hub", "mid", "p1", "p2", "q", "r"), got)
}
