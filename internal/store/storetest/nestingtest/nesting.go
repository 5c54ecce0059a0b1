// Package nestingtest is the part of the store contract about groups in
// groups: nesting writes, cycles and depth refused, and every transitive
// read checked against a brute-force closure of the same state.
package nestingtest

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// Contract checks groups in groups (membership.Nesting) on a store that
// keeps them: nesting writes and their results, revisions and feed
// changes; cycles and depth refused when written, whole; batches; group
// deletion; preconditions; Groups; Idempotency-Keys; nestings that end by
// themselves; every read's revision (its ETag), which moves with what it
// reads alone; and every transitive read, each against a brute-force
// closure of the same state (Follower), also beside concurrent writers.
// newStore(t) returns an empty store for t to use and close.
func Contract(t *testing.T, newStore func(t *testing.T) store.Expiring) {
	storetest.Run(t, newStore, []storetest.Case[store.Expiring]{
		{Name: "add, remove and replace subgroups, with counts, revisions and changes", Test: testAddRemoveReplace},
		{Name: "an add sets, changes and keeps a nesting's expiry", Test: testNestingExpiry},
		{Name: "a cycle is refused when written, naming a shortest path, and nothing is applied", Test: testCycleRefused},
		{Name: "a chain deeper than MaxDepth is refused, whole; 0 is no bound", Test: testTooDeepRefused},
		{Name: "a group below more than MaxAncestors groups is refused, whole; 0 is no bound", Test: testTooManyAncestorsRefused},
		{Name: "a batch nests all or nothing, a cycle of two of its changes included", Test: testBatchAllOrNothing},
		{Name: "deleting a group takes it from its parents and its subgroups from it", Test: testDeleteGroup},
		{Name: "preconditions count subgroups; a revision moves with direct subgroups only", Test: testPreconditions},
		{Name: "Groups lists groups with subgroups, and how many", Test: testGroupsCountSubgroups},
		{Name: "a keyed nesting write is applied once for its key", Test: testKeyedNestingWrite},
		{Name: "a nesting ends by itself, through the store's expiries", Test: testNestingEndsByItself},
		{Name: "direct and transitive subgroups and parents, paged", Test: testTransitiveGroupsPaged},
		{Name: "transitive members: each once, paged, with an exact total and the end of their last path", Test: testTransitiveMembers},
		{Name: "a transitive revision moves with the closure, not with the rest", Test: testTransitiveRevision},
		{Name: "each read answers at the revision of what it reads, which nothing else moves", Test: testRevisions},
		{Name: "not a member answers at the revision of what it reads, as a member does", Test: testNonMemberRevision},
		{Name: "a directory write moves the reads of its user, and no other", Test: testDirectoryRevisions},
		{Name: "a group made again by its attributes answers at its making", Test: testAGroupMadeByItsAttributes},
		{Name: "of two writes racing a into b and b into a, exactly one wins", Test: testRacingNestings},
		{Name: "a follower of the feed rebuilds the nesting and every transitive answer", Test: testFollowerRebuildsNesting},
		{Name: "random nestings beside concurrent writers agree with a brute-force closure at their revision", Test: testRandomNestingsBesideWriters},
	})
}

func testAddRemoveReplace(t *testing.T, ctx context.Context, s store.Expiring) {
	add(t, s, "b", 1)
	bRev, _ := s.Revision(ctx, "b")
	before := storetest.Latest(t, s)
	res := storetest.MustWrite(t, s, storetest.Nest("a", "c", "b", "c"))
	assert.Equal(t, membership.Result{Count: 2, Revision: before + 1}, res)
	got, total, rev := storetest.Subgroups(t, s, "a", membership.NestingListOptions{})
	assert.Equal(t, storetest.Nested("b", "c"), got)
	assert.Equal(t, 2, total)
	assert.GreaterOrEqual(t, rev, res.Revision)
	aRev := storetest.Revision(t, s, "a")
	assert.Equal(t, res.Revision, aRev, "a's revision moves with its subgroups")
	rev = storetest.Revision(t, s, "b")
	assert.Equal(t, bRev, rev, "b's does not move with its parents")
	parents, total, _ := storetest.Parents(t, s, "b", membership.NestingListOptions{})
	assert.Equal(t, storetest.Nested("a"), parents)
	assert.Equal(t, 1, total)

	again := storetest.MustWrite(t, s, storetest.Nest("a", "b"))
	assert.Equal(t, membership.Result{Count: 0, Revision: res.Revision}, again, "nothing new: no revision")

	removed := storetest.MustWrite(t, s, storetest.NestingWrite(membership.OpRemoveGroups, "a", "c", "x", "c"))
	assert.Equal(t, membership.Result{Count: 1, Revision: res.Revision + 1}, removed)
	none := storetest.MustWrite(t, s, storetest.NestingWrite(membership.OpRemoveGroups, "a", "x"))
	assert.Equal(t, membership.Result{Count: 0, Revision: removed.Revision}, none)

	replaced := storetest.MustWrite(t, s, storetest.NestingWrite(membership.OpReplaceGroups, "a", "d", "c"))
	assert.Equal(t, membership.Result{Count: 2, Removed: 1, Revision: removed.Revision + 1}, replaced)
	same := storetest.MustWrite(t, s, storetest.NestingWrite(membership.OpReplaceGroups, "a", "c", "d"))
	assert.Equal(t, membership.Result{Count: 0, Revision: replaced.Revision}, same)
	got, _, _ = storetest.Subgroups(t, s, "a", membership.NestingListOptions{})
	assert.Equal(t, storetest.Nested("c", "d"), got)
	parents, total, _ = storetest.Parents(t, s, "b", membership.NestingListOptions{})
	assert.Empty(t, parents)
	assert.Zero(t, total)

	changes := storetest.AllChanges(t, s, before)
	require.Len(t, changes, 3)
	for i, want := range []membership.Change{
		{Revision: before + 1, Op: membership.OpAddGroups, GroupID: "a", Groups: storetest.Nested("b", "c")},
		{Revision: before + 2, Op: membership.OpRemoveGroups, GroupID: "a", Groups: storetest.Nested("c")},
		{Revision: before + 3, Op: membership.OpReplaceGroups, GroupID: "a", Groups: storetest.Nested("c", "d")},
	} {
		c := changes[i]
		assert.False(t, c.Time.IsZero())
		c.Time = time.Time{}
		assert.Equal(t, storetest.EmptiesAsNil([]membership.Change{want}), storetest.EmptiesAsNil([]membership.Change{c}))
	}

	emptied := storetest.MustWrite(t, s, storetest.NestingWrite(membership.OpReplaceGroups, "a"))
	assert.Equal(t, membership.Result{Removed: 2, Revision: replaced.Revision + 1}, emptied)
	groups, _ := storetest.Groups(t, s, membership.GroupsOptions{})
	assert.Equal(t, []membership.GroupSize{{ID: "b", Members: 1}}, groups, "a group with neither members nor subgroups does not exist")
}

func testNestingExpiry(t *testing.T, _ context.Context, s store.Expiring) {
	t0 := storetest.InAnHour()
	w := storetest.Nest("a")
	w.Subgroups = []membership.Subgroup{storetest.NestedUntil("b", t0), {GroupID: "c"}}
	before := storetest.Latest(t, s)
	storetest.MustWrite(t, s, w)
	got, _, _ := storetest.Subgroups(t, s, "a", membership.NestingListOptions{})
	assert.Equal(t, []membership.Nested{{GroupID: "b", Expires: t0}, {GroupID: "c"}}, got)
	w.Subgroups = []membership.Subgroup{{GroupID: "b"}, storetest.NestedUntil("c", t0.Add(time.Minute))}
	res := storetest.MustWrite(t, s, w)
	assert.Equal(t, 0, res.Count)
	assert.Equal(t, before+2, res.Revision, "an expiry changed is a change")
	w.Subgroups = []membership.Subgroup{storetest.NestedUntil("b", time.Time{})}
	storetest.MustWrite(t, s, w)
	got, _, _ = storetest.Subgroups(t, s, "a", membership.NestingListOptions{})
	assert.Equal(t, []membership.Nested{{GroupID: "b"}, {GroupID: "c", Expires: t0.Add(time.Minute)}}, got)
	parents, _, _ := storetest.Parents(t, s, "c", membership.NestingListOptions{})
	assert.Equal(t, []membership.Nested{{GroupID: "a", Expires: t0.Add(time.Minute)}}, parents)
	changes := storetest.AllChanges(t, s, before)
	require.Len(t, changes, 3)
	assert.Equal(t, []membership.Nested{{GroupID: "b", Expires: t0}, {GroupID: "c"}}, changes[0].Groups)
	assert.Equal(t, []membership.Nested{{GroupID: "c", Expires: t0.Add(time.Minute)}}, changes[1].Groups, "only what changed")
	assert.Equal(t, []membership.Nested{{GroupID: "b"}}, changes[2].Groups)

	w.Subgroups = []membership.Subgroup{{GroupID: "b", Expiry: membership.Expiry{Set: true, TTL: time.Hour}}}
	start := time.Now()
	storetest.MustWrite(t, s, w)
	got, _, _ = storetest.Subgroups(t, s, "a", membership.NestingListOptions{Limit: 1})
	require.Len(t, got, 1)
	assert.False(t, got[0].Expires.Before(start.Add(time.Hour).Truncate(time.Millisecond)), "a ttl counts from the commit")
	assert.False(t, got[0].Expires.After(time.Now().Add(time.Hour)))
}

func testCycleRefused(t *testing.T, _ context.Context, s store.Expiring) {
	storetest.MustWrite(t, s, storetest.Nest("all-staff", "engineering"))
	storetest.MustWrite(t, s, storetest.Nest("engineering", "backend"))
	storetest.MustWrite(t, s, storetest.Nest("backend", "db"))
	refused(t, s, storetest.Nest("a", "a"), membership.CycleError("a", "a", []string{"a"}))
	refused(t, s, storetest.Nest("backend", "engineering"), membership.CycleError("backend", "engineering", []string{"engineering", "backend"}))
	refused(t, s, storetest.Nest("backend", "all-staff"), membership.CycleError("backend", "all-staff", []string{"all-staff", "engineering", "backend"}))
	refused(t, s, storetest.Nest("db", "all-staff"), membership.CycleError("db", "all-staff", []string{"all-staff", "engineering", "backend", "db"}))
	storetest.MustWrite(t, s, storetest.Nest("all-staff", "db"))
	refused(t, s, storetest.Nest("db", "all-staff"), membership.CycleError("db", "all-staff", []string{"all-staff", "db"}))

	w := storetest.NestingWrite(membership.OpReplaceGroups, "db", "x", "engineering", "all-staff")
	refused(t, s, w, membership.CycleError("db", "engineering", []string{"engineering", "backend", "db"}))
	w = storetest.Nest("db", "y", "z", "backend")
	refused(t, s, w, membership.CycleError("db", "backend", []string{"backend", "db"}))
	got, _, _ := storetest.Subgroups(t, s, "db", membership.NestingListOptions{})
	assert.Empty(t, got, "nothing of a refused write is applied")

	res := storetest.MustWrite(t, s, storetest.NestingWrite(membership.OpRemoveGroups, "a", "a"))
	assert.Zero(t, res.Count, "removing a group from itself is no cycle")
}

func testTooDeepRefused(t *testing.T, _ context.Context, s store.Expiring) {
	deep := func(w membership.Write, most int) membership.Write { w.MaxDepth = most; return w }
	storetest.MustWrite(t, s, deep(storetest.Nest("a", "b"), 2))
	storetest.MustWrite(t, s, deep(storetest.Nest("b", "c"), 2))
	refused(t, s, deep(storetest.Nest("c", "d"), 2), membership.TooDeepError("c", "d", 3, 2))
	refused(t, s, deep(storetest.Nest("z", "a"), 2), membership.TooDeepError("z", "a", 3, 2))
	storetest.MustWrite(t, s, deep(storetest.Nest("x", "y"), 2))
	refused(t, s, deep(storetest.Nest("b", "w", "x"), 2), membership.TooDeepError("b", "x", 3, 2))
	got, _, _ := storetest.Subgroups(t, s, "b", membership.NestingListOptions{})
	assert.Equal(t, storetest.Nested("c"), got, "w was not added")
	storetest.MustWrite(t, s, deep(storetest.Nest("a", "x"), 2))
	storetest.MustWrite(t, s, deep(storetest.Nest("c", "d"), 0))
	storetest.MustWrite(t, s, deep(storetest.Nest("d", "e"), 0))
	refused(t, s, deep(storetest.Nest("e", "f"), 4), membership.TooDeepError("e", "f", 5, 4))
	refused(t, s, deep(storetest.Nest("e", "a"), 0), membership.CycleError("e", "a", []string{"a", "b", "c", "d", "e"}))
}

func testBatchAllOrNothing(t *testing.T, ctx context.Context, s store.Expiring) {
	add(t, s, "b", 1)
	before := storetest.Latest(t, s)
	b := membership.Batch{MaxDepth: membership.DefaultMaxDepth, Writes: []membership.Write{
		{Op: membership.OpAdd, GroupID: "a", Users: []membership.User{{UID: 2}}},
		storetest.Nest("a", "b"),
		storetest.Nest("b", "c"),
		storetest.Nest("c", "a"),
	}}
	_, err := s.Batch(ctx, b)
	require.Error(t, err)
	assert.Equal(t, `changes element 3 (group "c"): `+membership.CycleError("c", "a", []string{"a", "b", "c"}).Message, membership.ErrorMessage(err),
		"the write refused is named as a batch names any")
	assert.Equal(t, membership.CodeCycle, membership.ErrorCode(err))
	assert.Equal(t, before, storetest.Latest(t, s))
	got, _ := storetest.ListAll(t, s, "a")
	assert.Empty(t, got)
	subs, _, _ := storetest.Subgroups(t, s, "a", membership.NestingListOptions{})
	assert.Empty(t, subs)

	b.MaxDepth = 1
	b.Writes = b.Writes[:3]
	_, err = s.Batch(ctx, b)
	assert.Equal(t, `changes element 2 (group "b"): `+membership.TooDeepError("b", "c", 2, 1).Message, membership.ErrorMessage(err))
	assert.Equal(t, membership.CodeTooDeep, membership.ErrorCode(err))
	assert.Equal(t, before, storetest.Latest(t, s))

	b.MaxDepth = 2
	b.Writes = append(b.Writes, storetest.NestingWrite(membership.OpRemoveGroups, "b", "c"), storetest.NestingWrite(membership.OpReplaceGroups, "d", "a"))
	res := storetest.MustBatch(t, s, b)
	assert.Equal(t, before+1, res.Revision)
	assert.Equal(t, []membership.Result{
		{Count: 1, Revision: before + 1}, {Count: 1, Revision: before + 1}, {Count: 1, Revision: before + 1},
		{Count: 1, Revision: before + 1}, {Count: 1, Revision: before + 1},
	}, res.Results)
	changes := storetest.AllChanges(t, s, before)
	require.Len(t, changes, 1)
	require.Len(t, changes[0].Changes, 5)
	assert.Equal(t, storetest.Nested("b"), changes[0].Changes[1].Groups)
	assert.Equal(t, storetest.Nested("c"), changes[0].Changes[3].Groups)
	assert.Equal(t, membership.OpReplaceGroups, changes[0].Changes[4].Op)
	below, total, _ := storetest.Subgroups(t, s, "d", membership.NestingListOptions{Transitive: true})
	assert.Equal(t, storetest.Nested("a", "b"), below)
	assert.Equal(t, 2, total)
	for _, g := range []string{"a", "d"} {
		rev := storetest.Revision(t, s, g)
		assert.Equal(t, res.Revision, rev, g)
	}
}

func testDeleteGroup(t *testing.T, ctx context.Context, s store.Expiring) {
	storetest.MustWrite(t, s, storetest.Nest("top", "mid", "other"))
	storetest.MustWrite(t, s, storetest.Nest("mid", "leaf"))
	add(t, s, "mid", 1)
	add(t, s, "leaf", 2)
	before := storetest.Latest(t, s)
	res := storetest.MustWrite(t, s, membership.Write{Op: membership.OpDeleteGroup, GroupID: "mid"})
	assert.Equal(t, membership.Result{Count: 1, Revision: before + 1}, res)
	subs, _, _ := storetest.Subgroups(t, s, "top", membership.NestingListOptions{})
	assert.Equal(t, storetest.Nested("other"), subs)
	parents, _, _ := storetest.Parents(t, s, "leaf", membership.NestingListOptions{})
	assert.Empty(t, parents)
	rev := storetest.Revision(t, s, "top")
	assert.Equal(t, res.Revision, rev, "top's subgroups changed")
	groups, _ := storetest.Groups(t, s, membership.GroupsOptions{})
	assert.Equal(t, []membership.GroupSize{{ID: "leaf", Members: 1}, {ID: "top", Subgroups: 1}}, groups)

	res = storetest.MustWrite(t, s, membership.Write{Op: membership.OpDeleteGroup, GroupID: "other"})
	assert.Equal(t, membership.Result{Count: 0, Revision: before + 2}, res, "a group that is only nested is deleted from its parents")
	groups, _ = storetest.Groups(t, s, membership.GroupsOptions{})
	assert.Equal(t, []membership.GroupSize{{ID: "leaf", Members: 1}}, groups)
	res = storetest.MustWrite(t, s, storetest.Nest("top", "leaf"))
	res = storetest.MustWrite(t, s, membership.Write{Op: membership.OpDeleteGroup, GroupID: "top"})
	assert.Equal(t, before+4, res.Revision, "a group with only subgroups is deleted")
	parents, _, _ = storetest.Parents(t, s, "leaf", membership.NestingListOptions{})
	assert.Empty(t, parents)
}

func testPreconditions(t *testing.T, ctx context.Context, s store.Expiring) {
	exists := membership.Precondition{Exists: true}
	empty := membership.Precondition{Empty: true}
	w := storetest.Nest("a", "b")
	w.If = empty
	storetest.MustWrite(t, s, w)
	_, err := s.Write(ctx, w)
	assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err), "a has a subgroup: not empty")
	a := membership.Write{Op: membership.OpAdd, GroupID: "a", Users: []membership.User{{UID: 1}}, If: exists}
	storetest.MustWrite(t, s, a)
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpRemove, GroupID: "a", UIDs: []membership.UID{1}})
	storetest.MustWrite(t, s, a) // a still exists: it has a subgroup
	rev := storetest.Revision(t, s, "a")
	w = storetest.Nest("a", "c")
	w.If = membership.Precondition{Revisions: []membership.Revision{rev - 1}}
	_, err = s.Write(ctx, w)
	assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err))
	w.If = membership.Precondition{Revisions: []membership.Revision{rev}}
	res := storetest.MustWrite(t, s, w)
	bRev := storetest.Revision(t, s, "b")
	storetest.MustWrite(t, s, storetest.Nest("top", "a"))
	storetest.MustWrite(t, s, storetest.Nest("b", "d"))
	rev = storetest.Revision(t, s, "a")
	assert.Equal(t, res.Revision, rev, "a's parent and its subgroup's subgroups are not a's")
	rev = storetest.Revision(t, s, "b")
	assert.Greater(t, rev, bRev)
	w = storetest.NestingWrite(membership.OpRemoveGroups, "x", "y")
	w.If = exists
	_, err = s.Write(ctx, w)
	assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err), "x has neither members nor subgroups")
}

func testGroupsCountSubgroups(t *testing.T, _ context.Context, s store.Expiring) {
	storetest.MustWrite(t, s, storetest.Nest("a", "b", "c"))
	add(t, s, "b", 1, 2)
	storetest.MustWrite(t, s, storetest.Nest("b", "c"))
	groups, total := storetest.Groups(t, s, membership.GroupsOptions{})
	assert.Equal(t, []membership.GroupSize{{ID: "a", Subgroups: 2}, {ID: "b", Members: 2, Subgroups: 1}}, groups)
	assert.Equal(t, 2, total)
	groups, total = storetest.Groups(t, s, membership.GroupsOptions{After: "a", Limit: 1})
	assert.Equal(t, []membership.GroupSize{{ID: "b", Members: 2, Subgroups: 1}}, groups)
	assert.Equal(t, 2, total)
}

func testKeyedNestingWrite(t *testing.T, ctx context.Context, s store.Expiring) {
	for i, w := range []membership.Write{storetest.Nest("a", "b"), storetest.NestingWrite(membership.OpReplaceGroups, "a", "c"), storetest.NestingWrite(membership.OpRemoveGroups, "a", "c")} {
		key := fmt.Sprint("k", i)
		first := storetest.MustWrite(t, s, storetest.Keyed(w, key))
		storetest.MustWrite(t, s, storetest.Nest("a", "d")) // in between
		before := storetest.Latest(t, s)
		again := storetest.MustWrite(t, s, storetest.Keyed(w, key))
		assert.True(t, again.Replayed, w.Op)
		again.Replayed = false
		assert.Equal(t, first, again, w.Op)
		assert.Equal(t, before, storetest.Latest(t, s), "a replay takes no revision")
		_, err := s.Write(ctx, storetest.Keyed(storetest.Nest("a", "other"), key))
		assert.Equal(t, membership.CodeIdempotencyKeyReused, membership.ErrorCode(err))
	}
	got, _, _ := storetest.Subgroups(t, s, "a", membership.NestingListOptions{})
	assert.Equal(t, storetest.Nested("d"), got)
}

func testNestingEndsByItself(t *testing.T, ctx context.Context, s store.Expiring) {
	t0 := storetest.InAnHour()
	w := storetest.Nest("a")
	w.Subgroups = []membership.Subgroup{storetest.NestedUntil("b", t0), storetest.NestedUntil("c", t0.Add(time.Minute)), {GroupID: "d"}}
	storetest.MustWrite(t, s, w)
	add(t, s, "b", 1)
	next, ok := s.NextExpiry()
	require.True(t, ok)
	assert.Equal(t, t0, next)
	assert.Empty(t, s.DueExpiries(t0.Add(-time.Millisecond), 100), "nothing is due before its time")
	aRev, _ := s.Revision(ctx, "a")
	tRev, err := s.TransitiveRevision(ctx, "a")
	require.NoError(t, err)
	before := storetest.Latest(t, s)
	assert.Equal(t, 1, storetest.Expire(t, s, t0))
	subs, _, _ := storetest.Subgroups(t, s, "a", membership.NestingListOptions{})
	assert.Equal(t, []membership.Nested{{GroupID: "c", Expires: t0.Add(time.Minute)}, {GroupID: "d"}}, subs)
	changes := storetest.AllChanges(t, s, before)
	require.Len(t, changes, 1)
	c := changes[0]
	assert.Equal(t, membership.OpExpireGroups, c.Op)
	assert.Equal(t, "a", c.GroupID)
	assert.Equal(t, storetest.Nested("b"), c.Groups)
	assert.Zero(t, c.Actor)
	assert.Empty(t, c.Principal)
	rev, _ := s.Revision(ctx, "a")
	assert.Greater(t, rev, aRev)
	moved, err := s.TransitiveRevision(ctx, "a")
	require.NoError(t, err)
	assert.Greater(t, moved, tRev)
	members, _, _ := storetest.TransitiveMembers(t, s, "a", membership.ListOptions{})
	assert.Empty(t, members)
	assert.Zero(t, storetest.Expire(t, s, t0), "an expiry applied is not due again")

	// Found due, then extended: not applied.
	due := s.DueExpiries(t0.Add(time.Minute), 100)
	require.Len(t, due, 1)
	assert.Equal(t, membership.OpExpireGroups, due[0].Write.Op)
	w.Subgroups = []membership.Subgroup{storetest.NestedUntil("c", t0.Add(time.Hour))}
	storetest.MustWrite(t, s, w)
	res := storetest.MustWrite(t, s, due[0].Write)
	assert.Zero(t, res.Count)
	// Given back, due again.
	due = s.DueExpiries(t0.Add(time.Hour), 100)
	require.Len(t, due, 1)
	assert.Empty(t, s.DueExpiries(t0.Add(time.Hour), 100), "taken")
	s.RequeueExpiries(due)
	assert.Equal(t, 1, storetest.Expire(t, s, t0.Add(time.Hour)))
	subs, _, _ = storetest.Subgroups(t, s, "a", membership.NestingListOptions{})
	assert.Equal(t, storetest.Nested("d"), subs)
	// A nesting removed otherwise has no expiry left.
	w.Subgroups = []membership.Subgroup{storetest.NestedUntil("e", t0)}
	storetest.MustWrite(t, s, w)
	storetest.MustWrite(t, s, storetest.NestingWrite(membership.OpRemoveGroups, "a", "e"))
	storetest.MustWrite(t, s, storetest.Nest("a", "e"))
	assert.Zero(t, storetest.Expire(t, s, t0.Add(2*time.Hour)))
	subs, _, _ = storetest.Subgroups(t, s, "a", membership.NestingListOptions{})
	assert.Equal(t, storetest.Nested("d", "e"), subs)
}

func testTransitiveGroupsPaged(t *testing.T, _ context.Context, s store.Expiring) {
	t0 := storetest.InAnHour()
	// a > b > d > e, a > c > d (a diamond), x > e.
	storetest.MustWrite(t, s, storetest.Nest("a", "c", "b"))
	w := storetest.Nest("b")
	w.Subgroups = []membership.Subgroup{storetest.NestedUntil("d", t0)}
	storetest.MustWrite(t, s, w)
	storetest.MustWrite(t, s, storetest.Nest("c", "d"))
	storetest.MustWrite(t, s, storetest.Nest("d", "e"))
	storetest.MustWrite(t, s, storetest.Nest("x", "e"))
	for _, tt := range []struct {
		name      string
		read      func(*testing.T, membership.Nesting, string, membership.NestingListOptions) ([]membership.Nested, int, membership.Revision)
		group     string
		opts      membership.NestingListOptions
		want      []membership.Nested
		wantTotal int
	}{
		{"subgroups", storetest.Subgroups, "b", membership.NestingListOptions{}, []membership.Nested{{GroupID: "d", Expires: t0}}, 1},
		{"all below", storetest.Subgroups, "a", membership.NestingListOptions{Transitive: true}, storetest.Nested("b", "c", "d", "e"), 4},
		{"a page below", storetest.Subgroups, "a", membership.NestingListOptions{Transitive: true, After: "b", Limit: 2}, storetest.Nested("c", "d"), 4},
		{"a page of direct", storetest.Subgroups, "a", membership.NestingListOptions{After: "b"}, storetest.Nested("c"), 2},
		{"parents", storetest.Parents, "d", membership.NestingListOptions{}, []membership.Nested{{GroupID: "b", Expires: t0}, {GroupID: "c"}}, 2},
		{"all above", storetest.Parents, "e", membership.NestingListOptions{Transitive: true}, storetest.Nested("a", "b", "c", "d", "x"), 5},
		{"a page above", storetest.Parents, "e", membership.NestingListOptions{Transitive: true, After: "a", Limit: 3}, storetest.Nested("b", "c", "d"), 5},
		{"unknown", storetest.Parents, "nobody", membership.NestingListOptions{Transitive: true}, storetest.Nested(), 0},
	} {
		got, total, rev := tt.read(t, s, tt.group, tt.opts)
		assert.Equal(t, tt.want, got, tt.name)
		assert.Equal(t, tt.wantTotal, total, tt.name)
		if tt.wantTotal == 0 {
			assert.Zero(t, rev, "%s: an empty list is as it was at revision 0", tt.name)
		} else {
			assert.NotZero(t, rev, tt.name)
		}
	}
}

func testTransitiveMembers(t *testing.T, ctx context.Context, s store.Expiring) {
	t0 := storetest.InAnHour()
	// top > a (until t0+2m) > c; top > b > c; c holds 1 until t0+1m, 2, 3 until t0+5m;
	// a holds 4; b holds 5 until t0; top holds 6.
	w := storetest.Nest("top", "b")
	w.Subgroups = append(w.Subgroups, storetest.NestedUntil("a", t0.Add(2*time.Minute)))
	storetest.MustWrite(t, s, w)
	w = storetest.Nest("b", "c")
	w.Subgroups = []membership.Subgroup{storetest.NestedUntil("c", t0.Add(4*time.Minute))}
	storetest.MustWrite(t, s, w)
	storetest.MustWrite(t, s, storetest.Nest("a", "c"))
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpAdd, GroupID: "c", Users: []membership.User{
		storetest.ExpiresAt(1, t0.Add(time.Minute)), {UID: 2, Nickname: "Two", HasNickname: true}, storetest.ExpiresAt(3, t0.Add(5*time.Minute)),
	}})
	add(t, s, "a", 4)
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpAdd, GroupID: "b", Users: []membership.User{storetest.ExpiresAt(5, t0)}})
	add(t, s, "top", 6, 2)
	want := []membership.Member{
		{UID: 1, Expires: t0.Add(time.Minute)},
		{UID: 2, Nickname: "Two"},                  // top holds it directly
		{UID: 3, Expires: t0.Add(4 * time.Minute)}, // through b: min(4m, 5m); through a: 2m
		{UID: 4, Expires: t0.Add(2 * time.Minute)},
		{UID: 5, Expires: t0},
		{UID: 6},
	}
	got, total, rev := storetest.TransitiveMembers(t, s, "top", membership.ListOptions{})
	assert.Equal(t, want, got)
	assert.Equal(t, 6, total)
	trev, err := s.TransitiveRevision(ctx, "top")
	require.NoError(t, err)
	assert.LessOrEqual(t, trev, rev, "the list is of a state no older than the closure's revision")
	got, total, _ = storetest.TransitiveMembers(t, s, "top", membership.ListOptions{After: 2, Limit: 2})
	assert.Equal(t, want[2:4], got)
	assert.Equal(t, 6, total)
	got, total, _ = storetest.TransitiveMembers(t, s, "c", membership.ListOptions{})
	assert.Equal(t, []membership.Member{{UID: 1, Expires: t0.Add(time.Minute)}, {UID: 2, Nickname: "Two"}, {UID: 3, Expires: t0.Add(5 * time.Minute)}}, got)
	assert.Equal(t, 3, total)
	got, total, _ = storetest.TransitiveMembers(t, s, "nobody", membership.ListOptions{})
	assert.Empty(t, got)
	assert.Zero(t, total)

	m, via, ok, _, err := s.TransitiveMember(ctx, "top", 3)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, want[2], m)
	assert.Equal(t, []string{"top", "a", "c"}, via, "two shortest paths: the first in byte order")
	m, via, ok, _, err = s.TransitiveMember(ctx, "top", 2)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, want[1], m)
	assert.Equal(t, []string{"top"}, via, "a direct member")
	_, via, ok, _, err = s.TransitiveMember(ctx, "c", 4)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Nil(t, via)

	groups, total, _ := storetest.TransitiveGroups(t, s, 3, membership.GroupListOptions{})
	assert.Equal(t, []string{"a", "b", "c", "top"}, groups)
	assert.Equal(t, 4, total)
	groups, total, _ = storetest.TransitiveGroups(t, s, 3, membership.GroupListOptions{After: "a", Limit: 2})
	assert.Equal(t, []string{"b", "c"}, groups)
	assert.Equal(t, 4, total)
	groups, total, _ = storetest.TransitiveGroups(t, s, 99, membership.GroupListOptions{})
	assert.Empty(t, groups)
	assert.Zero(t, total)
	groups, total, _ = storetest.TransitiveGroups(t, s, 3, membership.GroupListOptions{Within: storetest.WithinSet("b", "top")})
	assert.Equal(t, []string{"b", "top"}, groups, "Within selects among the groups through nesting too")
	assert.Equal(t, 2, total)

	found, _, err := s.CheckTransitive(ctx, []membership.Check{
		{GroupID: "top", UID: 3}, {GroupID: "a", UID: 5}, {GroupID: "b", UID: 5}, {GroupID: "top", UID: 6}, {GroupID: "c", UID: 6}, {GroupID: "nobody", UID: 1},
	})
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false, true, true, false, false}, found)
}

func testTransitiveRevision(t *testing.T, ctx context.Context, s store.Expiring) {
	storetest.MustWrite(t, s, storetest.Nest("top", "mid"))
	storetest.MustWrite(t, s, storetest.Nest("mid", "leaf"))
	storetest.MustWrite(t, s, storetest.Nest("outside", "top"))
	add(t, s, "leaf", 1)
	add(t, s, "elsewhere", 2)
	trev := func() membership.Revision {
		t.Helper()
		rev, err := s.TransitiveRevision(ctx, "top")
		require.NoError(t, err)
		return rev
	}
	for _, step := range []struct {
		name  string
		w     membership.Write
		moves bool
	}{
		{"a member of a group below", membership.Write{Op: membership.OpAdd, GroupID: "leaf", Users: []membership.User{{UID: 3}}}, true},
		{"a nesting below", storetest.Nest("leaf", "deeper"), true},
		{"a member of the new group below", membership.Write{Op: membership.OpAdd, GroupID: "deeper", Users: []membership.User{{UID: 4}}}, true},
		{"a nickname", membership.Write{Op: membership.OpAdd, GroupID: "elsewhere", Users: []membership.User{{UID: 2, Nickname: "n", HasNickname: true}}}, true},
		{"a member outside", membership.Write{Op: membership.OpAdd, GroupID: "elsewhere", Users: []membership.User{{UID: 5}}}, false},
		{"a parent's nesting", storetest.Nest("outside", "elsewhere"), false},
		{"a member of a parent", membership.Write{Op: membership.OpAdd, GroupID: "outside", Users: []membership.User{{UID: 6}}}, false},
		{"a member removed below", membership.Write{Op: membership.OpRemove, GroupID: "deeper", UIDs: []membership.UID{4}}, true},
		{"a nesting removed below", storetest.NestingWrite(membership.OpRemoveGroups, "leaf", "deeper"), true},
	} {
		before := trev()
		storetest.MustWrite(t, s, step.w)
		if step.moves {
			assert.Greater(t, trev(), before, step.name)
		} else {
			assert.Equal(t, before, trev(), step.name)
		}
	}
}

func testRacingNestings(t *testing.T, ctx context.Context, s store.Expiring) {
	const pairs = 20
	type outcome struct {
		pair int
		err  error
	}
	outcomes := make(chan outcome, 2*pairs)
	var wg sync.WaitGroup
	for i := range pairs {
		a, b := fmt.Sprint("a", i), fmt.Sprint("b", i)
		for _, w := range []membership.Write{storetest.Nest(a, b), storetest.Nest(b, a)} {
			wg.Go(func() {
				_, err := s.Write(ctx, w)
				outcomes <- outcome{i, err}
			})
		}
	}
	wg.Wait()
	close(outcomes)
	won := make([]int, pairs)
	for o := range outcomes {
		if o.err == nil {
			won[o.pair]++
		} else {
			assert.Equal(t, membership.CodeCycle, membership.ErrorCode(o.err), o.err)
		}
	}
	for i, n := range won {
		assert.Equal(t, 1, n, "pair %d", i)
	}
}

func testFollowerRebuildsNesting(t *testing.T, ctx context.Context, s store.Expiring) {
	t0 := storetest.InAnHour()
	rng := rand.New(rand.NewPCG(46, 1))
	groups := []string{"a", "b", "c", "d", "e", "f"}
	clock := t0
	for i := range 300 {
		w := randomWrite(rng, groups, clock)
		_, err := s.Write(ctx, w)
		if err != nil {
			code := membership.ErrorCode(err)
			require.True(t, code == membership.CodeCycle || code == membership.CodeTooDeep, "write %d: %v", i, err)
		}
		if i%10 == 9 {
			clock = clock.Add(3 * time.Second)
			storetest.Expire(t, s, clock)
		}
		if i%50 == 49 {
			var writes []membership.Write
			for len(writes) < 3 {
				if w := randomWrite(rng, groups, clock); w.Op != membership.OpRemoveUser { // a batch takes none
					writes = append(writes, w)
				}
			}
			_, err := s.Batch(ctx, membership.Batch{MaxDepth: 3, Writes: writes})
			if err != nil {
				code := membership.ErrorCode(err)
				require.True(t, code == membership.CodeCycle || code == membership.CodeTooDeep, "batch %d: %v", i, err)
			}
		}
	}
	f := storetest.NewFollower()
	f.ApplyAll(storetest.AllChanges(t, s, 0))
	obs := readAll(s, groups, []membership.UID{1, 2, 3, 4, 5, 6, 7, 8})
	for _, o := range obs {
		require.NoError(t, o.err)
		o.compare(t, f)
	}
}

func testRandomNestingsBesideWriters(t *testing.T, ctx context.Context, s store.Expiring) {
	t0 := storetest.InAnHour()
	groups := []string{"a", "b", "c", "d", "e", "f", "g"}
	uids := []membership.UID{1, 2, 3, 4, 5, 6}
	const writers, perWriter = 3, 80
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter+writers)
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 46))
			clock := t0
			for i := range perWriter {
				_, err := s.Write(ctx, randomWrite(rng, groups, clock))
				if code := membership.ErrorCode(err); err != nil && code != membership.CodeCycle && code != membership.CodeTooDeep {
					errs <- err
				}
				if w == 0 && i%8 == 7 {
					clock = clock.Add(4 * time.Second)
					for _, d := range s.DueExpiries(clock, 1000) {
						if _, err := s.Write(ctx, d.Write); err != nil {
							errs <- err
						}
					}
				}
			}
		})
	}
	var obs []observation
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for reading := true; reading; {
		select {
		case <-done:
			reading = false
		default:
		}
		obs = append(obs, readAll(s, groups, uids)...)
	}
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NotEmpty(t, obs)
	changes := storetest.AllChanges(t, s, 0)
	nestings := 0
	for _, c := range changes {
		if membership.IsNestingOp(c.Op) {
			nestings++
		}
	}
	t.Logf("%d reads beside %d changes, %d of them of the nesting", len(obs), len(changes), nestings)
	// With the writers done, a group's transitive revision is what
	// its list answers at.
	for _, g := range groups {
		want, err := s.TransitiveRevision(ctx, g)
		require.NoError(t, err)
		_, _, rev := storetest.TransitiveMembers(t, s, g, membership.ListOptions{})
		assert.Equal(t, want, rev, g)
	}
	sort.SliceStable(obs, func(i, j int) bool { return obs[i].rev < obs[j].rev })
	f := storetest.NewFollower()
	next := 0
	for _, o := range obs {
		require.NoError(t, o.err)
		for next < len(changes) && changes[next].Revision <= o.rev {
			f.Apply(changes[next])
			next++
		}
		o.compare(t, f)
	}
}

// add adds the users uids to group.
func add(t *testing.T, s membership.Store, group string, uids ...membership.UID) membership.Result {
	t.Helper()
	return storetest.MustWrite(t, s, membership.Write{Op: membership.OpAdd, GroupID: group, Users: storetest.UsersOf(uids...)})
}

// refused requires w to be refused with want, taking no revision.
func refused(t *testing.T, s membership.Store, w membership.Write, want *membership.Error) {
	t.Helper()
	before := storetest.Latest(t, s)
	_, err := s.Write(context.Background(), w)
	require.Error(t, err)
	assert.Equal(t, want.Code, membership.ErrorCode(err))
	assert.Equal(t, want.Message, membership.ErrorMessage(err))
	assert.Equal(t, before, storetest.Latest(t, s), "a refused write takes no revision")
}

// randomWrite returns a random write to a few groups and users: adds
// (some expiring), removes, nestings (some expiring) and their removal,
// replaces, now and then a group deleted. Nesting writes are bounded 3
// deep, so that some are refused.
func randomWrite(rng *rand.Rand, groups []string, clock time.Time) membership.Write {
	g := groups[rng.IntN(len(groups))]
	other := groups[rng.IntN(len(groups))]
	uid := membership.UID(rng.IntN(8) + 1)
	var expiry membership.Expiry
	if rng.IntN(3) == 0 {
		expiry = membership.Expiry{Set: true, At: clock.Add(time.Duration(rng.IntN(30)+1) * time.Second)}
	}
	switch rng.IntN(12) {
	case 0, 1:
		return membership.Write{Op: membership.OpAdd, GroupID: g, Users: []membership.User{{UID: uid, Expiry: expiry}}}
	case 2:
		return membership.Write{Op: membership.OpAdd, GroupID: g, Users: []membership.User{{UID: uid, Nickname: fmt.Sprint("n", rng.IntN(3)), HasNickname: true}}}
	case 3:
		if rng.IntN(4) == 0 {
			return membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{uid}}
		}
		return membership.Write{Op: membership.OpRemove, GroupID: g, UIDs: []membership.UID{uid}}
	case 4:
		return membership.Write{Op: membership.OpReplace, GroupID: g, Users: []membership.User{{UID: uid}, {UID: uid%8 + 1}}}
	case 5:
		if rng.IntN(3) == 0 {
			return membership.Write{Op: membership.OpDeleteGroup, GroupID: g}
		}
		return membership.Write{Op: membership.OpRemoveGroups, GroupID: g, Subgroups: []membership.Subgroup{{GroupID: other}}}
	case 6:
		third := groups[rng.IntN(len(groups))]
		if third == g || other == g {
			return membership.Write{Op: membership.OpRemoveGroups, GroupID: g, Subgroups: []membership.Subgroup{{GroupID: third}}}
		}
		return membership.Write{Op: membership.OpReplaceGroups, GroupID: g, MaxDepth: 3, Subgroups: []membership.Subgroup{{GroupID: other, Expiry: expiry}, {GroupID: third}}}
	default:
		if other == g {
			other = groups[(slices.Index(groups, g)+1)%len(groups)]
		}
		return membership.Write{Op: membership.OpAddGroups, GroupID: g, MaxDepth: 3, Subgroups: []membership.Subgroup{{GroupID: other, Expiry: expiry}}}
	}
}

// observation is one transitive read and what it answered, at its
// revision.
type observation struct {
	what    string
	group   string
	uid     membership.UID
	rev     membership.Revision
	members []membership.Member
	total   int
	nested  []membership.Nested
	groups  []string
	member  membership.Member
	via     []string
	found   []bool
	checks  []membership.Check
	ok      bool
	err     error
}

// readAll reads every transitive answer about groups and uids, each read
// an observation of its own. It may run off the test goroutine: it
// reports errors in the observations.
func readAll(n membership.Nesting, groups []string, uids []membership.UID) []observation {
	ctx := context.Background()
	var obs []observation
	var checks []membership.Check
	for _, g := range groups {
		members, total, rev, err := storetest.ReadTransitiveMembers(n, g, membership.ListOptions{})
		obs = append(obs, observation{what: "members", group: g, rev: rev, members: members, total: total, err: err})
		page, total, rev, err := storetest.ReadTransitiveMembers(n, g, membership.ListOptions{After: 2, Limit: 2})
		obs = append(obs, observation{what: "page", group: g, rev: rev, members: page, total: total, err: err})
		for _, transitive := range []bool{false, true} {
			var o observation
			o.what, o.group = fmt.Sprint("subgroups ", transitive), g
			o.rev, o.err = n.Subgroups(ctx, g, membership.NestingListOptions{Transitive: transitive}, func(total int, groups iter.Seq[membership.Nested]) {
				o.total, o.nested = total, slices.AppendSeq([]membership.Nested{}, groups)
			})
			obs = append(obs, o)
			o = observation{what: fmt.Sprint("parents ", transitive), group: g}
			o.rev, o.err = n.Parents(ctx, g, membership.NestingListOptions{Transitive: transitive}, func(total int, groups iter.Seq[membership.Nested]) {
				o.total, o.nested = total, slices.AppendSeq([]membership.Nested{}, groups)
			})
			obs = append(obs, o)
		}
		for _, uid := range uids {
			m, via, ok, rev, err := n.TransitiveMember(ctx, g, uid)
			obs = append(obs, observation{what: "member", group: g, uid: uid, rev: rev, member: m, via: via, ok: ok, err: err})
			checks = append(checks, membership.Check{GroupID: g, UID: uid})
		}
	}
	for _, uid := range uids {
		groups, total, rev, err := storetest.ReadTransitiveGroups(n, uid, membership.GroupListOptions{})
		obs = append(obs, observation{what: "groups", uid: uid, rev: rev, groups: groups, total: total, err: err})
	}
	found, rev, err := n.CheckTransitive(ctx, checks)
	obs = append(obs, observation{what: "check", rev: rev, found: found, checks: checks, err: err})
	return obs
}

// compare checks o against what f, at o's revision, answers.
func (o observation) compare(t *testing.T, f *storetest.Follower) {
	t.Helper()
	msg := fmt.Sprintf("%s of %s %d at revision %d", o.what, o.group, o.uid, o.rev)
	switch o.what {
	case "members":
		want := f.TransitiveMembersOf(o.group)
		assert.Equal(t, want, o.members, msg)
		assert.Equal(t, len(want), o.total, msg)
	case "page":
		want := f.TransitiveMembersOf(o.group)
		total := len(want)
		i, _ := slices.BinarySearchFunc(want, membership.UID(2), func(m membership.Member, uid membership.UID) int { return int(m.UID - uid) })
		if i < len(want) && want[i].UID == 2 {
			i++
		}
		want = want[i:]
		want = want[:min(2, len(want))]
		assert.Equal(t, want, o.members, msg)
		assert.Equal(t, total, o.total, msg)
	case "subgroups false", "subgroups true", "parents false", "parents true":
		var want []membership.Nested
		if o.what[0] == 's' {
			want = f.SubgroupsOf(o.group, o.what == "subgroups true")
		} else {
			want = f.ParentsOf(o.group, o.what == "parents true")
		}
		assert.Equal(t, want, o.nested, msg)
		assert.Equal(t, len(want), o.total, msg)
	case "member":
		m, via, ok := f.TransitiveMemberOf(o.group, o.uid)
		assert.Equal(t, ok, o.ok, msg)
		assert.Equal(t, m, o.member, msg)
		assert.Equal(t, via, o.via, msg)
	case "groups":
		want := f.TransitiveGroupsOf(o.uid)
		assert.Equal(t, want, o.groups, msg)
		assert.Equal(t, len(want), o.total, msg)
	case "check":
		for i, c := range o.checks {
			_, _, ok := f.TransitiveMemberOf(c.GroupID, c.UID)
			assert.Equal(t, ok, o.found[i], "%s: %s %d", msg, c.GroupID, c.UID)
		}
	default:
		t.Fatalf("unknown observation %s", o.what)
	}
}
