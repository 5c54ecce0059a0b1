package membership_test

import (
	"context"
	"iter"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/scope"
)

// scopedService returns a Service over a memory store that holds
// storetest.WriteScopedGroups's groups.
func scopedService(t *testing.T) (*membership.Service, *memory.Store) {
	t.Helper()
	st := memory.New()
	svc := membership.NewService(st, membership.ServiceOptions{})
	storetest.WriteScopedGroups(t, svc)
	return svc, st
}

func TestServiceHoldsWritesToTheirScope(t *testing.T) {
	svc, _ := scopedService(t)
	ctx := storetest.ScopeOf("sync-job", scope.Write, "team-a/*", "team-b")
	reader := storetest.ScopeOf("dashboard", scope.Read, "*")
	latest := func() membership.Revision {
		_, rev, err := svc.Changes(context.Background(), membership.ChangeOptions{})
		require.NoError(t, err)
		return rev
	}
	add := membership.Write{Op: membership.OpAdd, GroupID: "team-a/x", Users: []membership.User{{UID: 3}}}
	_, err := svc.Write(ctx, add)
	require.NoError(t, err, "a write within the scope")

	before := latest()
	for _, tt := range []struct {
		name    string
		ctx     context.Context
		w       membership.Write
		message string
	}{
		{"a group outside", ctx, membership.Write{Op: membership.OpAdd, GroupID: "team-c", Users: []membership.User{{UID: 3}}},
			`principal "sync-job" lacks write on group "team-c"`},
		{"a delete outside", ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: "secret"}, `principal "sync-job" lacks write on group "secret"`},
		{"a reader's write", reader, add, `principal "dashboard" lacks write on group "team-a/x"`},
		{"a user out of every group", ctx, membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{1}},
			`principal "sync-job" lacks write on every group (*): removing a user from every group writes to every group`},
		{"nesting a group it cannot read", ctx, membership.Write{Op: membership.OpAddGroups, GroupID: "team-b",
			Subgroups: []membership.Subgroup{{GroupID: "team-a/x"}, {GroupID: "secret"}}},
			`groups element 1: principal "sync-job" lacks read on group "secret": nesting a group needs read on it`},
	} {
		_, err = svc.Write(tt.ctx, tt.w)
		storetest.Forbidden(t, err, tt.message)
		assert.Equal(t, before, latest(), "%s: nothing changed", tt.name)
	}
	_, err = svc.Batch(ctx, membership.Batch{Writes: []membership.Write{add,
		{Op: membership.OpRemove, GroupID: "team-b", UIDs: []membership.UID{1}}, {Op: membership.OpRemove, GroupID: "secret", UIDs: []membership.UID{1}}}})
	storetest.Forbidden(t, err, `changes element 2 (group "secret"): principal "sync-job" lacks write on group "secret"`)
	assert.Equal(t, before, latest(), "a batch with one change outside: nothing changed")

	_, err = svc.Write(ctx, membership.Write{Op: membership.OpAddGroups, GroupID: "team-b", Subgroups: []membership.Subgroup{{GroupID: "team-a/x"}}})
	require.NoError(t, err, "write reads its own groups: it nests them")
	_, err = svc.Write(storetest.ScopeOf("janitor", scope.Write, "*"), membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{2}})
	require.NoError(t, err, "write on * removes a user from every group")
}

func TestServiceHoldsReadsToTheirScope(t *testing.T) {
	svc, _ := scopedService(t)
	ctx := storetest.ScopeOf("dashboard", scope.Read, "team-a/*", "team-b")
	noList := func(int, iter.Seq[membership.Member]) {}

	_, err := svc.ListMembers(ctx, "team-a/x", membership.ListOptions{}, noList)
	require.NoError(t, err)
	_, err = svc.ListMembers(ctx, "secret", membership.ListOptions{}, noList)
	storetest.Forbidden(t, err, `principal "dashboard" lacks read on group "secret"`)
	_, err = svc.Member(ctx, "secret", 1)
	storetest.Forbidden(t, err, `principal "dashboard" lacks read on group "secret"`)
	_, err = svc.Revision(ctx, "secret")
	storetest.Forbidden(t, err, `principal "dashboard" lacks read on group "secret"`)
	_, _, err = svc.Changes(ctx, membership.ChangeOptions{})
	storetest.Forbidden(t, err, `principal "dashboard" lacks read on every group (*): the change feed holds the changes of every group`)
	_, _, err = svc.Changes(storetest.ScopeOf("follower", scope.Read, "*"), membership.ChangeOptions{})
	require.NoError(t, err, "read on * follows the feed")

	found, _, err := svc.CheckMembers(ctx, []membership.Check{{GroupID: "team-b", UID: 1}})
	require.NoError(t, err)
	assert.Equal(t, []bool{true}, found)
	_, _, err = svc.CheckMembers(ctx, []membership.Check{{GroupID: "team-b", UID: 1}, {GroupID: "secret", UID: 1}})
	storetest.Forbidden(t, err, `checks element 1 (group "secret"): principal "dashboard" lacks read on group "secret"`)
}

func TestServiceListsOnlyTheGroupsOfItsScope(t *testing.T) {
	svc, _ := scopedService(t)
	ctx := storetest.ScopeOf("dashboard", scope.Read, "team-a/*", "team-b")
	var ids []string
	total := -1
	_, err := svc.Groups(ctx, membership.GroupsOptions{Limit: 2}, func(n int, groups iter.Seq[membership.GroupSize]) {
		total = n
		ids = nil
		for g := range groups {
			ids = append(ids, g.ID)
		}
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"team-a/all", "team-a/x"}, ids)
	assert.Equal(t, 4, total, "team-a/all, team-a/x, team-a/y and team-b: not secret")

	userGroups := func(ctx context.Context, opts membership.GroupListOptions) ([]string, int, error) {
		var got []string
		n := -1
		_, err := svc.UserGroups(ctx, 1, opts, func(total int, ids iter.Seq[string]) {
			n = total
			got = slices.Collect(ids)
		})
		return got, n, err
	}
	got, n, err := userGroups(ctx, membership.GroupListOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"team-a/x", "team-a/y", "team-b"}, got)
	assert.Equal(t, 3, n)
}

func TestForbiddenNamesThePrincipalTheRightAndTheGroup(t *testing.T) {
	reader := scope.New("dashboard", scope.Read, *storetest.WithinSet("team-a/*"))
	writer := scope.New("sync-job", scope.Write, *storetest.WithinSet("team-a/*"))
	assert.Equal(t, `principal "dashboard" lacks write on group "team-a/x"`, membership.Forbidden(reader, scope.Write, "team-a/x").Message)
	assert.Equal(t, `principal "dashboard" lacks read on every group (*)`, membership.Forbidden(reader, scope.Read, "").Message)
	assert.Equal(t, `principal "sync-job" lacks admin`, membership.Forbidden(writer, scope.Admin, "x").Message)
	assert.Equal(t, membership.CodeForbidden, membership.Forbidden(reader, scope.Read, "x").Code)
}

// writeMovingStore is a memory store that runs during before each write it
// takes, as a write that lands between a check and the write checked.
type writeMovingStore struct {
	*memory.Store
	during func()
}

func (s *writeMovingStore) Write(ctx context.Context, w membership.Write) (membership.Result, error) {
	s.during()
	return s.Store.Write(ctx, w)
}

func (s *writeMovingStore) Batch(ctx context.Context, b membership.Batch) (membership.BatchResult, error) {
	s.during()
	return s.Store.Batch(ctx, b)
}

// subgroupIDs returns the ids of groupID's subgroups in st.
func subgroupIDs(t *testing.T, st membership.Nesting, groupID string) []string {
	subs, _, _ := storetest.Subgroups(t, st, groupID, membership.NestingListOptions{})
	var ids []string
	for _, g := range subs {
		ids = append(ids, g.GroupID)
	}
	return ids
}

func TestServiceReplacesOnlySubgroupsItMayRead(t *testing.T) {
	svc, st := scopedService(t)
	ctx := storetest.ScopeOf("sync-job", scope.Write, "team-a/*", "team-b")
	subgroups := func(groupID string) []string { return subgroupIDs(t, st, groupID) }
	replace := func(groupID string, ids ...string) membership.Write {
		w := membership.Write{Op: membership.OpReplaceGroups, GroupID: groupID, Subgroups: []membership.Subgroup{}}
		for _, id := range ids {
			w.Subgroups = append(w.Subgroups, membership.Subgroup{GroupID: id})
		}
		return w
	}
	const removesSecret = `principal "sync-job" lacks read on group "secret", a subgroup of group "team-a/y" ` +
		`that this replace would remove: removing a subgroup needs read on it`

	_, err := svc.Write(ctx, replace("team-a/y", "team-a/x"))
	storetest.Forbidden(t, err, removesSecret)
	_, err = svc.Batch(ctx, membership.Batch{Writes: []membership.Write{replace("team-b", "team-a/x"), replace("team-a/y")}})
	storetest.Forbidden(t, err, `changes element 1 (group "team-a/y"): `+removesSecret)
	assert.Equal(t, []string{"secret"}, subgroups("team-a/y"), "nothing changed")
	assert.Empty(t, subgroups("team-b"), "nothing of the batch changed")

	res, err := svc.Write(ctx, replace("team-a/all", "team-b"))
	require.NoError(t, err, "every subgroup it removes is in its scope")
	assert.Equal(t, 1, res.Removed)
	assert.Equal(t, []string{"team-b"}, subgroups("team-a/all"))
	_, err = svc.Write(storetest.ScopeOf("ops", scope.Admin, "*"), replace("team-a/y"))
	require.NoError(t, err, "read on every group removes any subgroup")
	assert.Empty(t, subgroups("team-a/y"))

	// The client's own precondition is checked at the revision checked.
	rev, err := st.Revision(context.Background(), "team-a/all")
	require.NoError(t, err)
	stale := replace("team-a/all")
	stale.If.Revisions = []membership.Revision{rev - 1}
	_, err = svc.Write(ctx, stale)
	assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err), "%v", err)
	current := replace("team-a/all", "team-b", "team-a/x")
	current.If.Revisions = []membership.Revision{rev - 1, rev}
	_, err = svc.Write(ctx, current)
	require.NoError(t, err)
	assert.Equal(t, []string{"team-a/x", "team-b"}, subgroups("team-a/all"))
}

func TestServiceChecksAReplaceAgainWhenItsGroupMoves(t *testing.T) {
	_, st := scopedService(t)
	moving := &writeMovingStore{Store: st}
	svc := membership.NewService(moving, membership.ServiceOptions{})
	ctx := storetest.ScopeOf("sync-job", scope.Write, "team-a/*")
	nest := func(parent, child string) {
		_, err := st.Write(context.Background(), membership.Write{Op: membership.OpAddGroups, GroupID: parent, Subgroups: []membership.Subgroup{{GroupID: child}}})
		require.NoError(t, err)
	}
	replace := membership.Write{Op: membership.OpReplaceGroups, GroupID: "team-a/all", Subgroups: []membership.Subgroup{{GroupID: "team-a/y"}}}

	// A group outside the scope is nested in between the check and the
	// write: the write, narrowed to the revision checked, is refused by the
	// store, checked again, and refused for the subgroup.
	nested := false
	moving.during = func() {
		if !nested {
			nested = true
			nest("team-a/all", "secret")
		}
	}
	_, err := svc.Write(ctx, replace)
	storetest.Forbidden(t, err, `principal "sync-job" lacks read on group "secret", a subgroup of group "team-a/all" `+
		`that this replace would remove: removing a subgroup needs read on it`)
	var ids []string
	_, err = st.Subgroups(context.Background(), "team-a/all", membership.NestingListOptions{}, func(_ int, groups iter.Seq[membership.Nested]) {
		for g := range groups {
			ids = append(ids, g.GroupID)
		}
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"secret", "team-a/x"}, ids, "nothing changed")

	// A group that moves at every try: the replace is refused, unavailable.
	_, err = st.Write(context.Background(), membership.Write{Op: membership.OpRemoveGroups, GroupID: "team-a/all", Subgroups: []membership.Subgroup{{GroupID: "secret"}}})
	require.NoError(t, err)
	n := 0
	moving.during = func() {
		n++
		_, err := st.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: "team-a/all", Users: []membership.User{{UID: membership.UID(100 + n)}}})
		require.NoError(t, err)
	}
	_, err = svc.Batch(ctx, membership.Batch{Writes: []membership.Write{{Op: membership.OpRemoveGroups, GroupID: "team-a/all",
		Subgroups: []membership.Subgroup{{GroupID: "team-a/x"}}}, replace}})
	require.Error(t, err)
	assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err), "%v", err)
	assert.Equal(t, 3, n, "tried three times")
}

func TestServiceDeletesOnlyGroupsWhoseSubgroupsItMayRead(t *testing.T) {
	svc, st := scopedService(t)
	ctx := storetest.ScopeOf("sync-job", scope.Write, "team-a/*", "team-b")
	subgroups := func(groupID string) []string { return subgroupIDs(t, st, groupID) }
	const removesSecret = `principal "sync-job" lacks read on group "secret", a subgroup of group "team-a/y" ` +
		`that deleting it would remove: removing a subgroup needs read on it`
	deleteY := membership.Write{Op: membership.OpDeleteGroup, GroupID: "team-a/y"}

	// Deleting a group ends its subgroups' nesting in it, as a replace of
	// them with none does: alone, or in a batch that fills the group again.
	_, err := svc.Write(ctx, deleteY)
	storetest.Forbidden(t, err, removesSecret)
	_, err = svc.Batch(ctx, membership.Batch{Writes: []membership.Write{deleteY,
		{Op: membership.OpAdd, GroupID: "team-a/y", Users: []membership.User{{UID: 1}, {UID: 2}}}}})
	storetest.Forbidden(t, err, `changes element 0 (group "team-a/y"): `+removesSecret)
	assert.Equal(t, []string{"secret"}, subgroups("team-a/y"), "nothing changed")
	_, err = svc.Member(context.Background(), "team-a/y", 1)
	require.NoError(t, err, "nothing changed")

	res, err := svc.Write(ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: "team-a/all"})
	require.NoError(t, err, "every subgroup it removes is in its scope")
	assert.Equal(t, 0, res.Removed)
	assert.Empty(t, subgroups("team-a/all"))
	_, err = svc.Write(storetest.ScopeOf("ops", scope.Admin, "*"), deleteY)
	require.NoError(t, err, "read on every group deletes any group")
	assert.Empty(t, subgroups("team-a/y"))
}

func TestServiceReplaysAKeyedReplaceOrDeleteTheStateNowWouldRefuse(t *testing.T) {
	svc, st := scopedService(t)
	ctx := storetest.ScopeOf("sync-job", scope.Write, "team-a/*", "team-b")
	admin := storetest.ScopeOf("ops", scope.Admin, "*")
	nestSecret := func(groupID string) {
		_, err := svc.Write(admin, membership.Write{Op: membership.OpAddGroups, GroupID: groupID, Subgroups: []membership.Subgroup{{GroupID: "secret"}}})
		require.NoError(t, err)
	}
	rev, err := st.Revision(context.Background(), "team-a/all")
	require.NoError(t, err)
	replace := membership.Write{Op: membership.OpReplaceGroups, GroupID: "team-a/all", Subgroups: []membership.Subgroup{{GroupID: "team-b"}},
		If: membership.Precondition{Revisions: []membership.Revision{rev}}, Principal: "sync-job", Idem: membership.Idempotency{Key: "r1"}}
	first, err := svc.Write(ctx, replace)
	require.NoError(t, err)
	deleteB := membership.Write{Op: membership.OpDeleteGroup, GroupID: "team-b", Principal: "sync-job", Idem: membership.Idempotency{Key: "d1"}}
	_, err = svc.Write(ctx, deleteB)
	require.NoError(t, err)
	_, err = svc.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "team-a/z", Users: []membership.User{{UID: 1}}})
	require.NoError(t, err)
	rev, err = st.Revision(context.Background(), "team-a/z")
	require.NoError(t, err)
	replaceZ := membership.Write{Op: membership.OpReplaceGroups, GroupID: "team-a/z", Subgroups: []membership.Subgroup{{GroupID: "team-a/y"}},
		If: membership.Precondition{Revisions: []membership.Revision{rev}}, Principal: "sync-job", Idem: membership.Idempotency{Key: "z1"}}
	_, err = svc.Write(ctx, replaceZ)
	require.NoError(t, err)
	batch := membership.Batch{Writes: []membership.Write{{Op: membership.OpDeleteGroup, GroupID: "team-a/x"}},
		Principal: "sync-job", Idem: membership.Idempotency{Key: "b1"}}
	_, err = svc.Batch(ctx, batch)
	require.NoError(t, err)

	// Each group now holds a subgroup the principal may not read, and the
	// replace's If-Match no longer holds: a retry of a request applied
	// before still gets its first reply, as Idempotency-Key promises.
	for _, g := range []string{"team-a/all", "team-b", "team-a/x"} {
		nestSecret(g)
	}
	again, err := svc.Write(ctx, replace)
	require.NoError(t, err, "a retry of the replace")
	assert.True(t, again.Replayed)
	assert.Equal(t, first.Removed, again.Removed)
	_, err = svc.Write(admin, membership.Write{Op: membership.OpAdd, GroupID: "team-a/z", Users: []membership.User{{UID: 2}}})
	require.NoError(t, err)
	res, err := svc.Write(ctx, replaceZ)
	require.NoError(t, err, "a retry of a replace whose If-Match no longer holds")
	assert.True(t, res.Replayed)
	res, err = svc.Write(ctx, deleteB)
	require.NoError(t, err, "a retry of the delete")
	assert.True(t, res.Replayed)
	bres, err := svc.Batch(ctx, batch)
	require.NoError(t, err, "a retry of the batch")
	assert.True(t, bres.Replayed)

	// A new key is a new request, checked against the state now.
	replace.Idem.Key, replaceZ.Idem.Key, deleteB.Idem.Key = "r2", "z2", "d2"
	_, err = svc.Write(ctx, replace)
	storetest.Forbidden(t, err, `principal "sync-job" lacks read on group "secret", a subgroup of group "team-a/all" `+
		`that this replace would remove: removing a subgroup needs read on it`)
	_, err = svc.Write(ctx, replaceZ)
	assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err), "%v", err)
	_, err = svc.Write(ctx, deleteB)
	storetest.Forbidden(t, err, `principal "sync-job" lacks read on group "secret", a subgroup of group "team-b" `+
		`that deleting it would remove: removing a subgroup needs read on it`)
}

func TestServiceNamesNoGroupOutsideItsScopeInACycle(t *testing.T) {
	svc, _ := scopedService(t)
	ctx := storetest.ScopeOf("sync-job", scope.Write, "team-a/*", "team-b")
	admin := storetest.ScopeOf("ops", scope.Admin, "*")
	// team-a/c1 > secret > secret/2 > team-a/c2: the principal may read the
	// ends, not what is between them.
	for _, nest := range [][2]string{{"team-a/c1", "secret"}, {"secret", "secret/2"}, {"secret/2", "team-a/c2"}} {
		_, err := svc.Write(admin, membership.Write{Op: membership.OpAddGroups, GroupID: nest[0], Subgroups: []membership.Subgroup{{GroupID: nest[1]}}})
		require.NoError(t, err)
	}
	closing := membership.Write{Op: membership.OpAddGroups, GroupID: "team-a/c2", Subgroups: []membership.Subgroup{{GroupID: "team-a/c1"}}}
	const hidden = `adding team-a/c1 to team-a/c2 makes a cycle: team-a/c1 > (groups outside principal "sync-job"'s read scope) > team-a/c2 > team-a/c1`
	_, err := svc.Write(ctx, closing)
	require.Error(t, err)
	assert.Equal(t, membership.CodeCycle, membership.ErrorCode(err))
	assert.Equal(t, hidden, membership.ErrorMessage(err))
	_, err = svc.Batch(ctx, membership.Batch{Writes: []membership.Write{{Op: membership.OpAdd, GroupID: "team-b", Users: []membership.User{{UID: 3}}}, closing}})
	require.Error(t, err)
	assert.Equal(t, membership.CodeCycle, membership.ErrorCode(err))
	assert.Equal(t, `changes element 1 (group "team-a/c2"): `+hidden, membership.ErrorMessage(err))

	_, err = svc.Write(admin, closing)
	assert.Equal(t, membership.CycleError("team-a/c2", "team-a/c1", []string{"team-a/c1", "secret", "secret/2", "team-a/c2"}).Message,
		membership.ErrorMessage(err), "read on every group sees the whole path")
}

// The group a too_many_ancestors names may be below the nesting, where the
// principal may not read: it is named as one outside its scope.
func TestServiceNamesNoGroupOutsideItsScopeBelowTooMany(t *testing.T) {
	store := memory.New()
	t.Cleanup(func() { store.Close() })
	svc := membership.NewService(store, membership.ServiceOptions{MaxAncestors: 1})
	ctx := storetest.ScopeOf("sync-job", scope.Write, "team-a/*")
	admin := storetest.ScopeOf("ops", scope.Admin, "*")
	_, err := svc.Write(admin, membership.Write{Op: membership.OpAddGroups, GroupID: "team-a/c1", Subgroups: []membership.Subgroup{{GroupID: "secret"}}})
	require.NoError(t, err)
	nest := membership.Write{Op: membership.OpAddGroups, GroupID: "team-a/top", Subgroups: []membership.Subgroup{{GroupID: "team-a/c1"}}}
	_, err = svc.Write(ctx, nest)
	assert.Equal(t, membership.CodeTooManyAncestors, membership.ErrorCode(err))
	assert.Equal(t, `adding team-a/c1 to team-a/top puts (groups outside principal "sync-job"'s read scope) below 2 groups, more than 1 (-max-ancestors)`,
		membership.ErrorMessage(err))
	_, err = svc.Batch(ctx, membership.Batch{Writes: []membership.Write{nest}})
	assert.Equal(t, `changes element 0 (group "team-a/top"): adding team-a/c1 to team-a/top puts (groups outside principal "sync-job"'s read scope) below 2 groups, more than 1 (-max-ancestors)`,
		membership.ErrorMessage(err))
	_, err = svc.Write(admin, nest)
	assert.Equal(t, membership.TooManyAncestorsError("team-a/top", "team-a/c1", "secret", 2, 1).Message, membership.ErrorMessage(err),
		"read on every group sees the group")
}
