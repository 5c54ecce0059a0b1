package memory

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/packed"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// The feed keeps changes bounded in bytes as well as in count: churning the
// same 1000 uids in and out of a group keeps only as many changes as fit.
func TestFeedIsBoundedInBytes(t *testing.T) {
	ctx := context.Background()
	const maxBytes = 64 << 10
	m := NewWith(Options{ChangesKeep: 100000, ChangesKeepBytes: maxBytes})
	users := storetest.UserRange(1, 1000)
	for range 50 {
		_, err := storetest.Add(ctx, m, "churn", users)
		require.NoError(t, err)
		_, err = storetest.Remove(ctx, m, "churn", storetest.UIDsOf(users))
		require.NoError(t, err)
	}
	fs := m.feed.Stats()
	assert.Equal(t, membership.Revision(100), fs.Last)
	assert.LessOrEqual(t, fs.Bytes, int64(maxBytes))
	cost := feed.ChangeCost(membership.Change{GroupID: "churn", UIDs: make([]membership.UID, 1000)})
	assert.Equal(t, int(maxBytes/cost), fs.Kept, "as many changes of 1000 uids as fit in 64 KiB")

	oldest := fs.Last - membership.Revision(fs.Kept) + 1
	changes, _, err := m.Changes(ctx, membership.ChangeOptions{After: oldest - 1})
	require.NoError(t, err)
	assert.Len(t, changes, fs.Kept)
	assert.Equal(t, oldest, changes[0].Revision)
	_, _, err = m.Changes(ctx, membership.ChangeOptions{After: oldest - 2})
	var gone *membership.Error
	require.ErrorAs(t, err, &gone)
	assert.Equal(t, membership.CodeChangesGone, gone.Code)
	assert.Equal(t, oldest, gone.OldestRevision)
}

// A change that alters few of the users it was given keeps only the room of
// those: the feed counts capacity, and must not be fooled by a slice that
// was cut short.
func TestFeedChangesHoldOnlyWhatTheyAltered(t *testing.T) {
	ctx := context.Background()
	m := New()
	_, err := storetest.Add(ctx, m, "g", storetest.UserRange(1, 5000))
	require.NoError(t, err)
	before := m.feed.Stats().Bytes
	_, err = storetest.Add(ctx, m, "g", append(storetest.UserRange(1, 5000), membership.User{UID: 9999})) // adds one
	require.NoError(t, err)
	_, err = storetest.Remove(ctx, m, "g", append(storetest.UIDsOf(storetest.UserRange(20000, 5000)), 1)) // removes one
	require.NoError(t, err)
	changes := storetest.AllChanges(t, m, 1)
	require.Len(t, changes, 2)
	for _, c := range changes {
		assert.Len(t, c.UIDs, 1)
		assert.Equal(t, 1, cap(c.UIDs), "one uid altered: the room of one kept")
		assert.Equal(t, feed.ChangeOverhead+int64(len("g"))+8, feed.ChangeCost(c))
	}
	assert.Equal(t, before+feed.ChangeCost(changes[0])+feed.ChangeCost(changes[1]), m.feed.Stats().Bytes)
}

// The newest change is kept even when it alone is over the bound, so that a
// Follower never loses the change it is waiting for.
func TestFeedKeepsTheNewestChangeOverTheBound(t *testing.T) {
	ctx := context.Background()
	m := NewWith(Options{ChangesKeep: keepAll, ChangesKeepBytes: 1000})
	_, err := storetest.Add(ctx, m, "g", storetest.UserRange(1, 10))
	require.NoError(t, err)
	_, err = storetest.Add(ctx, m, "g", storetest.UserRange(100, 1000))
	require.NoError(t, err)
	changes := storetest.AllChanges(t, m, 1)
	require.Len(t, changes, 1)
	assert.Len(t, changes[0].UIDs, 1000)
	assert.Equal(t, 1, m.feed.Stats().Kept)
}

// walkCounts counts groups, memberships and distinct users by walking the
// whole store, as metrics did before they were kept as the store changes.
func walkCounts(m *Store) (groups, members, users int64) {
	for i := range m.shards {
		for g := range m.shards[i].groups.All {
			groups++
			members += int64(g.Members.Len())
		}
	}
	for k := range m.shards { // as many as the reverse index has
		seen := map[membership.UID]bool{}
		m.reverse.EachPair(k, 0, func(p packed.Pair) bool {
			seen[p.User] = true
			return true
		})
		users += int64(len(seen))
	}
	return groups, members, users
}

func checkCounts(t *testing.T, m *Store, step string) {
	t.Helper()
	groups, members, users := walkCounts(m)
	require.Equal(t, groups, m.counts.groups.Load(), "groups after %s", step)
	require.Equal(t, members, m.counts.members.Load(), "members after %s", step)
	require.Equal(t, users, m.reverse.Users(), "users after %s", step)
}

// The counts metrics read are kept as the store changes; they must agree
// with a walk of the store after any sequence of changes, and after a
// snapshot is loaded.
func TestMemoryCountsAgreeWithTheStore(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	m := NewWith(Options{Shards: 4, ChangesKeep: membership.DefaultChangesKeep})
	for step := range 3000 {
		groupID := fmt.Sprint("g", rng.IntN(8))
		n := 1 + rng.IntN(3)
		if rng.IntN(50) == 0 {
			n = group.BulkFill + rng.IntN(100) // the bulk path of an empty group
		}
		uids := make([]membership.UID, n)
		users := make([]membership.User, n)
		for i := range uids {
			uids[i] = membership.UID(1 + rng.IntN(40))
			users[i] = membership.User{UID: uids[i]}
		}
		var err error
		what := "add"
		if rng.IntN(2) == 0 {
			_, err = storetest.Remove(ctx, m, groupID, uids)
			what = "remove"
		} else {
			_, err = storetest.Add(ctx, m, groupID, users)
		}
		require.NoError(t, err)
		checkCounts(t, m, fmt.Sprintf("step %d (%s %v in %s)", step, what, uids, groupID))
	}
	loaded := New()
	loaded.Import(m.Export())
	checkCounts(t, loaded, "a load")
	assert.Equal(t, m.counts.members.Load(), loaded.counts.members.Load())
}

// A group and its changes keep their id in memory of their own: the id a
// request names may share the memory of a whole request line.
func TestMemoryKeepsItsOwnCopyOfGroupIDs(t *testing.T) {
	ctx := context.Background()
	line := "g" + strings.Repeat("x", 1<<20) // the request line the id came from
	id := line[:1]
	m := New()
	_, err := storetest.Add(ctx, m, id, storetest.UserRange(1, 2))
	require.NoError(t, err)
	_, err = storetest.Remove(ctx, m, id, []membership.UID{1})
	require.NoError(t, err)
	lineData := unsafe.StringData(line)
	g := m.shardOf("g").groups.Get("g")
	require.NotNil(t, g)
	assert.NotSame(t, lineData, unsafe.StringData(g.ID))
	for _, c := range storetest.AllChanges(t, m, 0) {
		assert.NotSame(t, lineData, unsafe.StringData(c.GroupID), "change %d", c.Revision)
	}
}

// A page of a user's groups is the smallest ids after After, in order,
// found with memory for the page only; the whole list is every id.
func TestUserGroupsPagesAgreeWithTheWholeList(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	m := New()
	var want []string
	for i := range 500 {
		id := fmt.Sprintf("g%05d-%d", rng.IntN(100000), i)
		want = append(want, id)
		_, err := storetest.Add(ctx, m, id, []membership.User{{UID: 7}})
		require.NoError(t, err)
	}
	slices.Sort(want)
	userGroups := func(opts membership.GroupListOptions) (int, []string) {
		var total int
		var got []string
		require.NoError(t, m.UserGroups(ctx, 7, opts, func(n int, ids iter.Seq[string]) {
			total = n
			got = slices.Collect(ids)
		}))
		return total, got
	}
	total, all := userGroups(membership.GroupListOptions{})
	assert.Equal(t, 500, total)
	assert.Equal(t, want, all)
	for _, limit := range []int{1, 7, 499, 500, 1000} {
		var walked []string
		after := ""
		for {
			total, page := userGroups(membership.GroupListOptions{After: after, Limit: limit})
			require.Equal(t, 500, total)
			require.LessOrEqual(t, len(page), limit)
			if len(page) == 0 {
				break
			}
			walked = append(walked, page...)
			after = page[len(page)-1]
		}
		assert.Equal(t, want, walked, "limit %d", limit)
	}
	_, rest := userGroups(membership.GroupListOptions{After: want[249]})
	assert.Equal(t, want[250:], rest, "after without limit")
}
