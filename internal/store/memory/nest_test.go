package memory

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// nestedStore returns a store with a > b (ending at t0), a > c, d > a, c
// holding 1 and 2, b holding 3 and d holding 4: a has no members.
func nestedStore(t *testing.T, t0 time.Time) *Store {
	t.Helper()
	ctx := context.Background()
	m := New()
	w := storetest.Nest("a", "c")
	w.Subgroups = append(w.Subgroups, storetest.NestedUntil("b", t0))
	for _, w := range []membership.Write{
		w,
		storetest.Nest("d", "a"),
		{Op: membership.OpAdd, GroupID: "c", Users: []membership.User{{UID: 1, Nickname: "One", HasNickname: true}, {UID: 2}}},
		{Op: membership.OpAdd, GroupID: "b", Users: []membership.User{{UID: 3}}},
		{Op: membership.OpAdd, GroupID: "d", Users: []membership.User{{UID: 4}}},
	} {
		_, err := m.Write(ctx, w)
		require.NoError(t, err)
	}
	return m
}

// nestingView is every answer about the nesting of groups, to compare two
// stores.
type nestingView struct {
	Groups    []membership.GroupSize
	Revisions map[string]membership.Revision
	Subgroups map[string][]membership.Nested
	Parents   map[string][]membership.Nested
	Members   map[string][]membership.Member
	UserOf    map[membership.UID][]string
	Checks    []bool
}

func viewOf(t *testing.T, m *Store, groups []string, uids []membership.UID) nestingView {
	t.Helper()
	ctx := context.Background()
	v := nestingView{Revisions: map[string]membership.Revision{}, Subgroups: map[string][]membership.Nested{},
		Parents: map[string][]membership.Nested{}, Members: map[string][]membership.Member{}, UserOf: map[membership.UID][]string{}}
	v.Groups, _ = storetest.Groups(t, m, membership.GroupsOptions{})
	var checks []membership.Check
	for _, g := range groups {
		rev, err := m.TransitiveRevision(ctx, g)
		require.NoError(t, err)
		v.Revisions[g] = rev
		v.Subgroups[g], _, _ = storetest.Subgroups(t, m, g, membership.NestingListOptions{})
		v.Parents[g], _, _ = storetest.Parents(t, m, g, membership.NestingListOptions{Transitive: true})
		v.Members[g], _, _ = storetest.TransitiveMembers(t, m, g, membership.ListOptions{})
		for _, uid := range uids {
			checks = append(checks, membership.Check{GroupID: g, UID: uid})
		}
	}
	for _, uid := range uids {
		v.UserOf[uid], _, _ = storetest.TransitiveGroups(t, m, uid, membership.GroupListOptions{})
	}
	var err error
	v.Checks, _, err = m.CheckTransitive(ctx, checks)
	require.NoError(t, err)
	return v
}

func TestNestingsSurviveExportAndImport(t *testing.T) {
	t0 := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
	m := nestedStore(t, t0)
	groups := []string{"a", "b", "c", "d"}
	uids := []membership.UID{1, 2, 3, 4}
	st := m.Export()
	assert.Equal(t, []snap.Nesting{{Parent: "a", Child: "b", Expires: t0}, {Parent: "a", Child: "c"}, {Parent: "d", Child: "a"}}, st.Nestings)

	back := New()
	back.Import(st)
	want := viewOf(t, m, groups, uids)
	assert.Equal(t, want, viewOf(t, back, groups, uids))
	assert.Equal(t, []membership.GroupSize{{ID: "a", Subgroups: 2}, {ID: "b", Members: 1}, {ID: "c", Members: 2}, {ID: "d", Members: 1, Subgroups: 1}}, want.Groups)
	next, ok := back.NextExpiry()
	require.True(t, ok)
	assert.Equal(t, t0, next, "a nesting's end is due after a restart")
	assert.Equal(t, 1, storetest.Expire(t, back, t0))
	got, _, _ := storetest.Subgroups(t, back, "a", membership.NestingListOptions{})
	assert.Equal(t, []membership.Nested{{GroupID: "c"}}, got)
	assert.Equal(t, m.LatestRevision()+1, back.LatestRevision(), "revisions continue")

	// A snapshot from before nestings, with a group given empty, loads as
	// it did: an empty group is not kept.
	old := New()
	old.Import(&snap.State{LastRevision: 3, Nicknames: map[membership.UID]string{}, Groups: []snap.Group{{ID: "e", Revision: 2}, {ID: "f", Revision: 3, UIDs: []membership.UID{1}}}})
	all, _ := storetest.Groups(t, old, membership.GroupsOptions{})
	assert.Equal(t, []membership.GroupSize{{ID: "f", Members: 1}}, all)
}

func TestCheckOfANestingWriteRefusesAsWriteDoes(t *testing.T) {
	t0 := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
	m := nestedStore(t, t0)
	before := viewOf(t, m, []string{"a", "b", "c", "d"}, []membership.UID{1, 3})
	_, _, err := m.Check(storetest.Nest("c", "d"))
	assert.Equal(t, membership.CycleError("c", "d", []string{"d", "a", "c"}), err)
	deep := storetest.Nest("b", "x")
	deep.MaxDepth = 2
	_, _, err = m.Check(deep)
	assert.Equal(t, membership.TooDeepError("b", "x", 3, 2), err)
	rev, changes, err := m.Check(storetest.Nest("a", "c"))
	require.NoError(t, err)
	assert.False(t, changes, "c is in a already")
	aRev, _ := m.Revision(context.Background(), "a")
	assert.Equal(t, aRev, rev)
	_, changes, err = m.Check(storetest.Nest("a", "x", "c"))
	require.NoError(t, err)
	assert.True(t, changes)
	_, changes, err = m.Check(membership.Write{Op: membership.OpDeleteGroup, GroupID: "b"})
	require.NoError(t, err)
	assert.True(t, changes)
	_, changes, err = m.Check(membership.Write{Op: membership.OpDeleteGroup, GroupID: "x"})
	require.NoError(t, err)
	assert.False(t, changes, "x is neither a group nor nested")
	_, err = m.Write(context.Background(), storetest.Nest("x", "y"))
	require.NoError(t, err)
	_, changes, err = m.Check(membership.Write{Op: membership.OpDeleteGroup, GroupID: "y"})
	require.NoError(t, err)
	assert.True(t, changes, "y is nested: deleting it takes it from x")
	_, err = m.Write(context.Background(), membership.Write{Op: membership.OpDeleteGroup, GroupID: "x"})
	require.NoError(t, err)
	assert.Equal(t, before, viewOf(t, m, []string{"a", "b", "c", "d"}, []membership.UID{1, 3}), "Check changed nothing")
	due, ok := m.NextExpiry()
	require.True(t, ok)
	assert.Equal(t, t0, due)
}

func TestWriteExpiriesTakesNestingEndsBesideMemberships(t *testing.T) {
	t0 := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
	m := nestedStore(t, t0)
	_, err := m.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: "c", Users: []membership.User{storetest.ExpiresAt(5, t0)}})
	require.NoError(t, err)
	due := m.DueExpiries(t0, 100)
	require.Len(t, due, 2)
	assert.Equal(t, membership.OpExpireGroups, due[0].Write.Op)
	assert.Equal(t, []membership.Subgroup{{GroupID: "b"}}, due[0].Write.Subgroups)
	assert.Equal(t, t0, due[0].Earliest)
	ws := []membership.Write{due[1].Write, due[0].Write}
	results, err := m.WriteExpiries(context.Background(), ws)
	require.NoError(t, err)
	require.Len(t, results, 2)
	assert.Equal(t, 1, results[0].Count)
	assert.Equal(t, 1, results[1].Count)
	assert.Equal(t, results[0].Revision+1, results[1].Revision, "in the order given")
	_, err = m.WriteExpiries(context.Background(), []membership.Write{storetest.Nest("a", "z")})
	assert.Error(t, err, "only expiries")
}

// A user's add and remove take no part of the nesting: with the nesting's
// lock held, they still run (were they to wait for it, this test would
// never end).
func TestMembershipWritesDoNotTakeTheNesting(t *testing.T) {
	m := nestedStore(t, time.Now().Add(time.Hour))
	ctx := context.Background()
	m.nestMu.Lock()
	_, err := m.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "c", Users: []membership.User{{UID: 7}, {UID: 8}}})
	require.NoError(t, err)
	_, err = m.Write(ctx, membership.Write{Op: membership.OpRemove, GroupID: "c", UIDs: []membership.UID{7}})
	require.NoError(t, err)
	_, err = m.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: "b", Users: []membership.User{{UID: 9}}})
	require.NoError(t, err)
	m.nestMu.Unlock()
	members, total, _ := storetest.TransitiveMembers(t, m, "d", membership.ListOptions{})
	assert.Equal(t, 5, total)
	assert.Equal(t, []membership.UID{1, 2, 4, 8, 9}, storetest.MemberUIDs(members))
}

// A nesting that ends before every other expiry wakes the expirer, as a
// membership's does.
func TestANestingEndingFirstWakesTheExpirer(t *testing.T) {
	t0 := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
	m := New()
	ctx := context.Background()
	_, err := m.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{storetest.ExpiresAt(1, t0)}})
	require.NoError(t, err)
	wakeup := m.ExpiryWakeup()
	drain := func() bool {
		select {
		case <-wakeup:
			return true
		default:
			return false
		}
	}
	drain()
	w := storetest.Nest("p")
	w.Subgroups = []membership.Subgroup{storetest.NestedUntil("c", t0.Add(time.Minute))}
	_, err = m.Write(ctx, w)
	require.NoError(t, err)
	assert.False(t, drain(), "a membership ends first")
	next, _ := m.NextExpiry()
	assert.Equal(t, t0, next)
	w.Subgroups = []membership.Subgroup{storetest.NestedUntil("c", t0.Add(-time.Minute))}
	_, err = m.Write(ctx, w)
	require.NoError(t, err)
	assert.True(t, drain(), "the nesting ends first now")
	next, _ = m.NextExpiry()
	assert.Equal(t, t0.Add(-time.Minute), next)
}

// A group that is both in many groups and holds many is deleted in time
// that grows with its nestings, not with their product times its parents:
// its subgroups are let go before its parents, so that no parent's removal
// rebuilds the ancestors of every group below it.
func TestDeletingAHubOfNestingsIsNotCubic(t *testing.T) {
	ctx := context.Background()
	m := New()
	const n = 600
	children := make([]string, n)
	for i := range children {
		children[i] = fmt.Sprintf("child%04d", i)
	}
	_, err := m.Write(ctx, storetest.Nest("hub", children...))
	require.NoError(t, err)
	for i := range n {
		w := storetest.Nest(fmt.Sprintf("parent%04d", i), "hub")
		w.MaxAncestors = 0 // no bound: the children are below n+1 groups
		_, err := m.Write(ctx, w)
		require.NoError(t, err)
	}
	start := m.nest.Steps()
	_, err = m.Write(ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: "hub"})
	require.NoError(t, err)
	steps := m.nest.Steps() - start
	assert.Less(t, steps, int64(4*n*n), "steps over ancestor sets to delete a group with %d parents and %d subgroups", n, n)
	subs, _, _ := storetest.Subgroups(t, m, "hub", membership.NestingListOptions{})
	assert.Empty(t, subs)
	parents, _, _ := storetest.Parents(t, m, "child0000", membership.NestingListOptions{Transitive: true})
	assert.Empty(t, parents)
}

// A member's record through nesting holds the shards of the group asked
// and of the user's groups alone, not those of the rest of the closure:
// a writer holding one of those does not stall it.
func TestATransitiveMemberReadHoldsOnlyTheUsersGroups(t *testing.T) {
	ctx := context.Background()
	m := New()
	_, err := m.Write(ctx, storetest.Nest("top", "mid"))
	require.NoError(t, err)
	_, err = m.Write(ctx, storetest.Nest("mid", "leaf"))
	require.NoError(t, err)
	_, err = m.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "leaf", Users: []membership.User{{UID: 1}}})
	require.NoError(t, err)
	// A group below top in a shard of its own, which a writer holds.
	busy := map[int]bool{m.shardIndex("top"): true, m.shardIndex("mid"): true, m.shardIndex("leaf"): true}
	other := ""
	for i := 0; other == ""; i++ {
		if id := fmt.Sprint("other", i); !busy[m.shardIndex(id)] {
			other = id
		}
	}
	_, err = m.Write(ctx, storetest.Nest("mid", other))
	require.NoError(t, err)
	_, err = m.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: other, Users: []membership.User{{UID: 2}}})
	require.NoError(t, err)
	s := &m.shards[m.shardIndex(other)]
	s.mu.Lock()
	done := make(chan []string, 1)
	go func() {
		_, via, _, _, _ := m.TransitiveMember(ctx, "top", 1)
		done <- via
	}()
	require.True(t, waitUntil(func() bool {
		return len(done) > 0 || goroutineIn("transitive.(*Reader).TransitiveMember", "runtime_SemacquireRWMutexR")
	}), "the read is done or waits")
	finished := len(done) > 0
	s.mu.Unlock()
	assert.True(t, finished, "the read did not wait for a shard of a group the user is not in")
	assert.Equal(t, []string{"top", "mid", "leaf"}, <-done)
}

// TestGroupsMadeBeforeAnyNestingKeepNoRevisionOfTheirMaking checks that
// the store records the revision that made a group (group.Numbers, a
// revision a group) only once it has had a nesting: until then no group
// has been in one, and a store of small groups keeps nothing more for it.
func TestGroupsMadeBeforeAnyNestingKeepNoRevisionOfTheirMaking(t *testing.T) {
	ctx := context.Background()
	m := New()
	unnested := func(id string) membership.Revision {
		g := m.shardOf(id).groups.Get(id)
		require.NotNil(t, g, id)
		m.groupNumbers.RLock()
		defer m.groupNumbers.RUnlock()
		return m.groupNumbers.UnnestedOf(g.Number)
	}
	for i := range 100 {
		_, err := m.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: fmt.Sprint("g", i), Users: []membership.User{{UID: 1}}})
		require.NoError(t, err)
	}
	for i := range 100 {
		assert.Zero(t, unnested(fmt.Sprint("g", i)), "made before any nesting")
	}
	_, err := m.Write(ctx, storetest.Nest("a", "b"))
	require.NoError(t, err)
	res, err := m.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "later", Users: []membership.User{{UID: 1}}})
	require.NoError(t, err)
	assert.Equal(t, res.Revision, unnested("later"), "made after a nesting: the revision of its making")
	assert.Zero(t, unnested("g0"), "made before, untouched since")
}
