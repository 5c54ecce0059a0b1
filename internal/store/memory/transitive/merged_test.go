package transitive_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/memory/transitive"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// cachePair is a store whose transitive reads keep their merges
// (mergedCache) beside one that merges at every read (a budget of 0): each
// write goes to both, and every page of the first must be the second's.
type cachePair struct {
	cached, merging *memory.Store
}

func newCachePair(budget int64) cachePair {
	p := cachePair{cached: memory.New(), merging: memory.New()}
	transitive.SetMergedBudget(p.cached.Reader, budget)
	transitive.SetMergedBudget(p.merging.Reader, 0)
	return p
}

func (p cachePair) write(t *testing.T, ws ...membership.Write) {
	t.Helper()
	for _, w := range ws {
		_, err := p.cached.Write(context.Background(), w)
		require.NoError(t, err)
		_, err = p.merging.Write(context.Background(), w)
		require.NoError(t, err)
	}
}

// assertPages checks every page of group's transitive members, from each
// After up to past the last uid and of each limit, against the merging
// store's, and returns the whole list.
func (p cachePair) assertPages(t *testing.T, group string, lastUID membership.UID) []membership.Member {
	t.Helper()
	all, total, rev := storetest.TransitiveMembers(t, p.merging, group, membership.ListOptions{})
	require.Len(t, all, total)
	for after := membership.UID(0); after <= lastUID+1; after++ {
		for _, limit := range []int{0, 1, 2, 100} {
			opts := membership.ListOptions{After: after, Limit: limit}
			want, wantTotal, wantRev := storetest.TransitiveMembers(t, p.merging, group, opts)
			got, gotTotal, gotRev := storetest.TransitiveMembers(t, p.cached, group, opts)
			assert.Equal(t, want, got, "after %d limit %d", after, limit)
			assert.Equal(t, wantTotal, gotTotal, "after %d limit %d", after, limit)
			assert.Equal(t, wantRev, gotRev, "after %d limit %d", after, limit)
			assert.Equal(t, rev, gotRev)
		}
	}
	return all
}

func add(group string, users ...membership.User) membership.Write {
	return membership.Write{Op: membership.OpAdd, GroupID: group, Users: users}
}

func remove(group string, uids ...membership.UID) membership.Write {
	return membership.Write{Op: membership.OpRemove, GroupID: group, UIDs: uids}
}

// hitsAndMisses returns how many reads of m used a kept merge and how
// many found none that fit.
func hitsAndMisses(m *memory.Store) (int64, int64) {
	return transitive.MergedHitsAndMisses(m.Reader)
}

// cacheFixture writes a > b (ending at t0), a > c, c > d: b holds 3 and 5
// (5 until t1), c holds 1 and 5, d holds 2 (until t1) and 4; e, outside,
// holds 6.
func cacheFixture(t *testing.T, p cachePair, t0, t1 time.Time) {
	t.Helper()
	nest := storetest.Nest("a", "c")
	nest.Subgroups = append(nest.Subgroups, storetest.NestedUntil("b", t0))
	p.write(t,
		nest,
		storetest.Nest("c", "d"),
		add("b", membership.User{UID: 3}, storetest.ExpiresAt(5, t1)),
		add("c", membership.User{UID: 1, Nickname: "One", HasNickname: true}, membership.User{UID: 5}),
		add("d", storetest.ExpiresAt(2, t1), membership.User{UID: 4}),
		add("e", membership.User{UID: 6}),
	)
}

func cacheTimes() (time.Time, time.Time) {
	t0 := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
	return t0, t0.Add(-time.Minute)
}

func TestMergedCacheHitAnswersAsAMerge(t *testing.T) {
	t0, t1 := cacheTimes()
	p := newCachePair(transitive.DefaultMergedBudget)
	cacheFixture(t, p, t0, t1)

	first, _, rev := storetest.TransitiveMembers(t, p.cached, "a", membership.ListOptions{})
	hits, misses := hitsAndMisses(p.cached)
	assert.Equal(t, []int64{0, 1}, []int64{hits, misses})
	// 2 ends with its membership (t1), 3 with the nesting of b (t0), 5 is
	// in b until t1 and in c for good.
	assert.Equal(t, []membership.Member{
		{UID: 1, Nickname: "One"},
		{UID: 2, Expires: t1},
		{UID: 3, Expires: t0},
		{UID: 4},
		{UID: 5},
	}, first)

	got := p.assertPages(t, "a", 6)
	assert.Equal(t, first, got)
	hits, misses = hitsAndMisses(p.cached)
	assert.Equal(t, int64(1), misses, "a read after the first merges again")
	assert.Positive(t, hits)
	_, _, again := storetest.TransitiveMembers(t, p.cached, "a", membership.ListOptions{})
	assert.Equal(t, rev, again)
}

func TestMergedCacheEndsAreTheLatestOverPaths(t *testing.T) {
	t0, t1 := cacheTimes()
	p := newCachePair(transitive.DefaultMergedBudget)
	cacheFixture(t, p, t0, t1)
	p.assertPages(t, "a", 6)
	// 3 gets a second path through c that ends later than b's.
	p.write(t, add("c", storetest.ExpiresAt(3, t0.Add(time.Hour))))
	got := p.assertPages(t, "a", 6)
	assert.Equal(t, membership.Member{UID: 3, Expires: t0.Add(time.Hour)}, got[2])
	// Only forever ends: the merge keeps no ends.
	p.write(t, storetest.Nest("f", "e"))
	p.assertPages(t, "f", 6)
	uids, ends, ok := transitive.MergedEntry(p.cached.Reader, "f")
	require.True(t, ok)
	assert.Nil(t, ends)
	assert.Equal(t, []membership.UID{6}, uids)
}

func TestMergedCacheMissesAfterAChangeBelow(t *testing.T) {
	t0, t1 := cacheTimes()
	for _, tt := range []struct {
		name   string
		writes []membership.Write
	}{
		{"an add two levels down", []membership.Write{add("d", membership.User{UID: 7})}},
		{"a remove two levels down", []membership.Write{remove("d", 4)}},
		{"an expiry moved", []membership.Write{add("d", storetest.ExpiresAt(4, t0.Add(time.Minute)))}},
		{"an expiry cleared", []membership.Write{add("d", membership.User{UID: 2, Expiry: membership.Expiry{Set: true}})}},
		{"a group emptied", []membership.Write{remove("d", 2, 4)}},
		{"a group emptied and filled again", []membership.Write{remove("d", 2, 4), add("d", membership.User{UID: 2})}},
		{"the group asked", []membership.Write{add("a", membership.User{UID: 8})}},
		{"a nesting added", []membership.Write{storetest.Nest("d", "e")}},
		{"a nesting removed", []membership.Write{{Op: membership.OpRemoveGroups, GroupID: "a", Subgroups: []membership.Subgroup{{GroupID: "c"}}}}},
		{"a nesting's end moved", []membership.Write{{Op: membership.OpAddGroups, GroupID: "a", MaxDepth: membership.DefaultMaxDepth, Subgroups: []membership.Subgroup{storetest.NestedUntil("b", t0.Add(time.Minute))}}}},
		{"a group deleted", []membership.Write{{Op: membership.OpDeleteGroup, GroupID: "c"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newCachePair(transitive.DefaultMergedBudget)
			cacheFixture(t, p, t0, t1)
			before := p.assertPages(t, "a", 8)
			p.write(t, tt.writes...)
			_, misses := hitsAndMisses(p.cached)
			after := p.assertPages(t, "a", 8)
			_, missesAfter := hitsAndMisses(p.cached)
			assert.Equal(t, misses+1, missesAfter)
			assert.NotEqual(t, before, after)
		})
	}
}

func TestMergedCacheMissesWhenAnAbsentGroupBelowGainsMembers(t *testing.T) {
	p := newCachePair(transitive.DefaultMergedBudget)
	p.write(t, storetest.Nest("a", "empty", "full"), add("full", membership.User{UID: 1}))
	before := p.assertPages(t, "a", 3)
	p.write(t, add("empty", membership.User{UID: 2}))
	after := p.assertPages(t, "a", 3)
	assert.Equal(t, []membership.Member{{UID: 1}}, before)
	assert.Equal(t, []membership.Member{{UID: 1}, {UID: 2}}, after)
}

func TestMergedCacheGivesNicknamesAsTheyAre(t *testing.T) {
	t0, t1 := cacheTimes()
	p := newCachePair(transitive.DefaultMergedBudget)
	cacheFixture(t, p, t0, t1)
	p.assertPages(t, "a", 6)
	_, _, rev := storetest.TransitiveMembers(t, p.cached, "a", membership.ListOptions{})
	// A nickname given in a group outside a's closure.
	p.write(t, add("e", membership.User{UID: 4, Nickname: "Four", HasNickname: true}))
	hits, misses := hitsAndMisses(p.cached)
	got, _, revAfter := storetest.TransitiveMembers(t, p.cached, "a", membership.ListOptions{After: 3, Limit: 1})
	hitsAfter, missesAfter := hitsAndMisses(p.cached)
	assert.Equal(t, []membership.Member{{UID: 4, Nickname: "Four"}}, got)
	assert.Equal(t, []int64{hits + 1, misses}, []int64{hitsAfter, missesAfter}, "the merge is kept")
	assert.Greater(t, revAfter, rev)
	p.assertPages(t, "a", 6)
}

func TestMergedCacheEvictsWithinItsBudget(t *testing.T) {
	// Groups g0 … g7 each have 100 members below them, with no ends: an
	// entry may take half the budget with ends counted, so fewer than
	// eight fit without them.
	const closures = 8
	budget := 2 * transitive.MergedBytes("g0", 2, 100, true)
	fit := int(budget / transitive.MergedBytes("g0", 2, 100, false))
	require.Less(t, fit, closures)
	p := newCachePair(budget)
	for i := range closures {
		users := make([]membership.User, 100)
		for k := range users {
			users[k] = membership.User{UID: membership.UID(i*100 + k + 1)}
		}
		id := "g" + strconv.Itoa(i)
		p.write(t, storetest.Nest(id, id+"/sub"), add(id+"/sub", users...))
	}
	for i := range closures {
		storetest.TransitiveMembers(t, p.cached, "g"+strconv.Itoa(i), membership.ListOptions{})
	}
	kept, bytes := transitive.MergedEntries(p.cached.Reader)
	assert.Equal(t, fit, kept)
	assert.LessOrEqual(t, bytes, budget)

	_, misses := hitsAndMisses(p.cached)
	for i := range closures {
		p.assertPages(t, "g"+strconv.Itoa(i), 3)
	}
	_, missesAfter := hitsAndMisses(p.cached)
	assert.Greater(t, missesAfter, misses, "an evicted closure merges again")
}

func TestMergedCacheKeepsNoEntryPastHalfItsBudget(t *testing.T) {
	t0, t1 := cacheTimes()
	p := newCachePair(transitive.MergedBytes("a", 4, 5, true)*2 - 1)
	cacheFixture(t, p, t0, t1)
	p.assertPages(t, "a", 6)
	kept, _ := transitive.MergedEntries(p.cached.Reader)
	hits, _ := hitsAndMisses(p.cached)
	assert.Zero(t, kept)
	assert.Zero(t, hits)
}
