package membership_test

import (
	"context"
	"fmt"
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

// scopeOf returns the context of a request of principal with right on
// patterns.
func scopeOf(t *testing.T, principal string, right scope.Right, patterns ...string) context.Context {
	t.Helper()
	return scope.With(context.Background(), scope.New(principal, right, *storetest.WithinSet(patterns...)))
}

// scopedService returns a Service over a memory store that holds: users 1
// and 2 in team-a/x, team-a/y, team-b and secret; team-a/y holds secret as
// a subgroup, and team-a/all holds team-a/x.
func scopedService(t *testing.T) (*membership.Service, *memory.Store) {
	t.Helper()
	st := memory.New()
	svc := membership.NewService(st, membership.ServiceOptions{})
	ctx := context.Background()
	for _, g := range []string{"team-a/x", "team-a/y", "team-b", "secret"} {
		_, err := svc.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: g, Users: []membership.User{{UID: 1}, {UID: 2}}})
		require.NoError(t, err)
	}
	for parent, child := range map[string]string{"team-a/y": "secret", "team-a/all": "team-a/x"} {
		_, err := svc.Write(ctx, membership.Write{Op: membership.OpAddGroups, GroupID: parent, Subgroups: []membership.Subgroup{{GroupID: child}}})
		require.NoError(t, err)
	}
	return svc, st
}

// forbidden checks that err is the CodeForbidden error with message.
func forbidden(t *testing.T, err error, message string) {
	t.Helper()
	require.Error(t, err)
	assert.Equal(t, membership.CodeForbidden, membership.ErrorCode(err), "%v", err)
	assert.Equal(t, message, membership.ErrorMessage(err))
}

func TestServiceHoldsWritesToTheirScope(t *testing.T) {
	svc, _ := scopedService(t)
	ctx := scopeOf(t, "sync-job", scope.Write, "team-a/*", "team-b")
	reader := scopeOf(t, "dashboard", scope.Read, "*")
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
		forbidden(t, err, tt.message)
		assert.Equal(t, before, latest(), "%s: nothing changed", tt.name)
	}
	_, err = svc.Batch(ctx, membership.Batch{Writes: []membership.Write{add,
		{Op: membership.OpRemove, GroupID: "team-b", UIDs: []membership.UID{1}}, {Op: membership.OpRemove, GroupID: "secret", UIDs: []membership.UID{1}}}})
	forbidden(t, err, `changes element 2 (group "secret"): principal "sync-job" lacks write on group "secret"`)
	assert.Equal(t, before, latest(), "a batch with one change outside: nothing changed")

	_, err = svc.Write(ctx, membership.Write{Op: membership.OpAddGroups, GroupID: "team-b", Subgroups: []membership.Subgroup{{GroupID: "team-a/x"}}})
	require.NoError(t, err, "write reads its own groups: it nests them")
	_, err = svc.Write(scopeOf(t, "janitor", scope.Write, "*"), membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{2}})
	require.NoError(t, err, "write on * removes a user from every group")
}

func TestServiceHoldsReadsToTheirScope(t *testing.T) {
	svc, _ := scopedService(t)
	ctx := scopeOf(t, "dashboard", scope.Read, "team-a/*", "team-b")
	noList := func(int, iter.Seq[membership.Member]) {}

	_, err := svc.ListMembers(ctx, "team-a/x", membership.ListOptions{}, noList)
	require.NoError(t, err)
	_, err = svc.ListMembers(ctx, "secret", membership.ListOptions{}, noList)
	forbidden(t, err, `principal "dashboard" lacks read on group "secret"`)
	_, err = svc.Member(ctx, "secret", 1)
	forbidden(t, err, `principal "dashboard" lacks read on group "secret"`)
	_, err = svc.Revision(ctx, "secret")
	forbidden(t, err, `principal "dashboard" lacks read on group "secret"`)
	_, _, err = svc.Changes(ctx, membership.ChangeOptions{})
	forbidden(t, err, `principal "dashboard" lacks read on every group (*): the change feed holds the changes of every group`)
	_, _, err = svc.Changes(scopeOf(t, "follower", scope.Read, "*"), membership.ChangeOptions{})
	require.NoError(t, err, "read on * follows the feed")

	found, _, err := svc.CheckMembers(ctx, []membership.Check{{GroupID: "team-b", UID: 1}})
	require.NoError(t, err)
	assert.Equal(t, []bool{true}, found)
	_, _, err = svc.CheckMembers(ctx, []membership.Check{{GroupID: "team-b", UID: 1}, {GroupID: "secret", UID: 1}})
	forbidden(t, err, `checks element 1 (group "secret"): principal "dashboard" lacks read on group "secret"`)
}

func TestServiceRefusesATransitiveReadThatReachesPastItsScope(t *testing.T) {
	svc, _ := scopedService(t)
	ctx := scopeOf(t, "dashboard", scope.Read, "team-a/*", "team-b")
	var got []membership.UID
	list := func(_ int, members iter.Seq[membership.Member]) {
		for m := range members {
			got = append(got, m.UID)
		}
	}
	const outside = `principal "dashboard" lacks read on group "secret", which group "team-a/y" holds through nesting: ` +
		`a transitive read needs read on every group below`

	_, err := svc.ListMembers(ctx, "team-a/all", membership.ListOptions{Transitive: true}, list)
	require.NoError(t, err, "team-a/all reaches team-a/x alone")
	assert.Equal(t, []membership.UID{1, 2}, got)
	_, err = svc.ListMembers(ctx, "team-a/y", membership.ListOptions{Transitive: true}, list)
	forbidden(t, err, outside)
	_, _, _, err = svc.TransitiveMember(ctx, "team-a/y", 1)
	forbidden(t, err, outside)
	_, err = svc.TransitiveRevision(ctx, "team-a/y")
	forbidden(t, err, outside)
	_, _, err = svc.CheckTransitive(ctx, []membership.Check{{GroupID: "team-a/all", UID: 1}, {GroupID: "team-a/all", UID: 2}, {GroupID: "team-a/y", UID: 1}})
	forbidden(t, err, `checks element 2 (group "team-a/y"): `+outside)
	found, _, err := svc.CheckTransitive(ctx, []membership.Check{{GroupID: "team-a/all", UID: 1}, {GroupID: "team-b", UID: 9}})
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false}, found)

	_, _, err = svc.CheckTransitive(ctx, []membership.Check{{GroupID: "secret", UID: 1}})
	forbidden(t, err, `checks element 0 (group "secret"): principal "dashboard" lacks read on group "secret"`)
	_, err = svc.ListMembers(scopeOf(t, "all", scope.Read, "*"), "team-a/y", membership.ListOptions{Transitive: true}, list)
	require.NoError(t, err, "read on * reaches everything")
}

// movingNestingStore is a memory store whose transitive lists run during
// a change of the nesting, as a write that lands while a read runs.
type movingNestingStore struct {
	*memory.Store
	during func()
}

func (s movingNestingStore) ListTransitiveMembers(ctx context.Context, groupID string, opts membership.ListOptions, list membership.ListFunc) (membership.Revision, error) {
	s.during()
	return s.Store.ListTransitiveMembers(ctx, groupID, opts, list)
}

func TestServiceFailsATransitiveReadTheNestingMovedUnder(t *testing.T) {
	st := memory.New()
	moving := movingNestingStore{Store: st}
	svc := membership.NewService(moving, membership.ServiceOptions{})
	ctx := scopeOf(t, "dashboard", scope.Read, "team-a/*")
	nest := func(parent, child string) {
		_, err := st.Write(context.Background(), membership.Write{Op: membership.OpAddGroups, GroupID: parent, Subgroups: []membership.Subgroup{{GroupID: child}}})
		require.NoError(t, err)
	}
	unnest := func(parent, child string) {
		_, err := st.Write(context.Background(), membership.Write{Op: membership.OpRemoveGroups, GroupID: parent, Subgroups: []membership.Subgroup{{GroupID: child}}})
		require.NoError(t, err)
	}
	_, err := st.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: "secret", Users: []membership.User{{UID: 7}}})
	require.NoError(t, err)
	nest("team-a/all", "team-a/x")
	var listed []membership.UID
	list := func(_ int, members iter.Seq[membership.Member]) {
		listed = nil
		for m := range members {
			listed = append(listed, m.UID)
		}
	}

	// A group outside the scope is nested in between the check and the
	// read: the read sees its members, and fails.
	moving.during = func() { nest("team-a/x", "secret") }
	svc = membership.NewService(moving, membership.ServiceOptions{})
	_, err = svc.ListMembers(ctx, "team-a/all", membership.ListOptions{Transitive: true}, list)
	require.Error(t, err)
	assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err))
	assert.Contains(t, membership.ErrorMessage(err), "the groups in groups changed while this transitive read ran")
	assert.Equal(t, []membership.UID{7}, listed, "the read saw the members of secret: the error is what keeps them from the reply")

	unnest("team-a/x", "secret")
	moving.during = func() {}
	svc = membership.NewService(moving, membership.ServiceOptions{})
	_, err = svc.ListMembers(ctx, "team-a/all", membership.ListOptions{Transitive: true}, list)
	require.NoError(t, err, "with the nesting still, the same read succeeds")
}

func TestServiceListsOnlyTheGroupsOfItsScope(t *testing.T) {
	svc, _ := scopedService(t)
	ctx := scopeOf(t, "dashboard", scope.Read, "team-a/*", "team-b")
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

	// A user's groups through nesting need read on every group: a refusal
	// that depended on the user's groups would tell of those outside.
	const needsAll = `principal "%s" lacks read on every group (*): a user's groups through nesting may be any group's`
	_, _, err = userGroups(ctx, membership.GroupListOptions{Transitive: true})
	forbidden(t, err, fmt.Sprintf(needsAll, "dashboard"))
	narrow := scopeOf(t, "narrow", scope.Read, "team-a/x", "team-a/all", "team-b", "team-a/y", "secret")
	_, _, err = userGroups(narrow, membership.GroupListOptions{Transitive: true, After: "team-a/all", Limit: 2})
	forbidden(t, err, fmt.Sprintf(needsAll, "narrow"))
	_, err = svc.UserGroups(narrow, 99, membership.GroupListOptions{Transitive: true}, func(int, iter.Seq[string]) {})
	forbidden(t, err, fmt.Sprintf(needsAll, "narrow"))
	everyone := scopeOf(t, "everyone", scope.Read, "*")
	got, n, err = userGroups(everyone, membership.GroupListOptions{Transitive: true, After: "team-a/all", Limit: 2})
	require.NoError(t, err)
	assert.Equal(t, []string{"team-a/x", "team-a/y"}, got)
	assert.Equal(t, 5, n)
}

func TestServiceListsOfNestedGroupsNeedReadOnEach(t *testing.T) {
	svc, _ := scopedService(t)
	ctx := scopeOf(t, "dashboard", scope.Read, "team-a/*", "team-b")
	var ids []string
	total := -1
	list := func(n int, groups iter.Seq[membership.Nested]) {
		total = n
		ids = nil
		for g := range groups {
			ids = append(ids, g.GroupID)
		}
	}
	_, err := svc.Subgroups(ctx, "team-a/all", membership.NestingListOptions{}, list)
	require.NoError(t, err)
	assert.Equal(t, []string{"team-a/x"}, ids)
	_, err = svc.Subgroups(ctx, "team-a/y", membership.NestingListOptions{}, list)
	forbidden(t, err, `principal "dashboard" lacks read on group "secret", which is below group "team-a/y": listing the groups below a group needs read on each`)
	_, err = svc.Parents(ctx, "secret", membership.NestingListOptions{}, list)
	forbidden(t, err, `principal "dashboard" lacks read on group "secret"`)
	_, err = svc.Parents(ctx, "team-a/x", membership.NestingListOptions{Transitive: true}, list)
	require.NoError(t, err)
	assert.Equal(t, []string{"team-a/all"}, ids)

	wide := scopeOf(t, "wide", scope.Read, "team-a/*", "secret")
	_, err = svc.Subgroups(wide, "team-a/all", membership.NestingListOptions{}, func(int, iter.Seq[membership.Nested]) {})
	require.NoError(t, err)
	_, err = svc.Write(context.Background(), membership.Write{Op: membership.OpAddGroups, GroupID: "team-a/all",
		Subgroups: []membership.Subgroup{{GroupID: "team-a/y"}, {GroupID: "secret"}}})
	require.NoError(t, err)
	_, err = svc.Subgroups(wide, "team-a/all", membership.NestingListOptions{After: "secret", Limit: 1}, list)
	require.NoError(t, err)
	assert.Equal(t, []string{"team-a/x"}, ids, "a page after an id")
	assert.Equal(t, 3, total)
	_, err = svc.Subgroups(wide, "team-a/all", membership.NestingListOptions{Transitive: true, Limit: 2}, list)
	require.NoError(t, err)
	assert.Equal(t, []string{"secret", "team-a/x"}, ids)
	assert.Equal(t, 3, total)
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

func TestServiceReplacesOnlySubgroupsItMayRead(t *testing.T) {
	svc, st := scopedService(t)
	ctx := scopeOf(t, "sync-job", scope.Write, "team-a/*", "team-b")
	subgroups := func(groupID string) []string {
		var ids []string
		_, err := st.Subgroups(context.Background(), groupID, membership.NestingListOptions{}, func(_ int, groups iter.Seq[membership.Nested]) {
			for g := range groups {
				ids = append(ids, g.GroupID)
			}
		})
		require.NoError(t, err)
		return ids
	}
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
	forbidden(t, err, removesSecret)
	_, err = svc.Batch(ctx, membership.Batch{Writes: []membership.Write{replace("team-b", "team-a/x"), replace("team-a/y")}})
	forbidden(t, err, `changes element 1 (group "team-a/y"): `+removesSecret)
	assert.Equal(t, []string{"secret"}, subgroups("team-a/y"), "nothing changed")
	assert.Empty(t, subgroups("team-b"), "nothing of the batch changed")

	res, err := svc.Write(ctx, replace("team-a/all", "team-b"))
	require.NoError(t, err, "every subgroup it removes is in its scope")
	assert.Equal(t, 1, res.Removed)
	assert.Equal(t, []string{"team-b"}, subgroups("team-a/all"))
	_, err = svc.Write(scopeOf(t, "ops", scope.Admin, "*"), replace("team-a/y"))
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
	ctx := scopeOf(t, "sync-job", scope.Write, "team-a/*")
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
	forbidden(t, err, `principal "sync-job" lacks read on group "secret", a subgroup of group "team-a/all" `+
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
	ctx := scopeOf(t, "sync-job", scope.Write, "team-a/*", "team-b")
	subgroups := func(groupID string) []string {
		var ids []string
		_, err := st.Subgroups(context.Background(), groupID, membership.NestingListOptions{}, func(_ int, groups iter.Seq[membership.Nested]) {
			for g := range groups {
				ids = append(ids, g.GroupID)
			}
		})
		require.NoError(t, err)
		return ids
	}
	const removesSecret = `principal "sync-job" lacks read on group "secret", a subgroup of group "team-a/y" ` +
		`that deleting it would remove: removing a subgroup needs read on it`
	deleteY := membership.Write{Op: membership.OpDeleteGroup, GroupID: "team-a/y"}

	// Deleting a group ends its subgroups' nesting in it, as a replace of
	// them with none does: alone, or in a batch that fills the group again.
	_, err := svc.Write(ctx, deleteY)
	forbidden(t, err, removesSecret)
	_, err = svc.Batch(ctx, membership.Batch{Writes: []membership.Write{deleteY,
		{Op: membership.OpAdd, GroupID: "team-a/y", Users: []membership.User{{UID: 1}, {UID: 2}}}}})
	forbidden(t, err, `changes element 0 (group "team-a/y"): `+removesSecret)
	assert.Equal(t, []string{"secret"}, subgroups("team-a/y"), "nothing changed")
	_, err = svc.Member(context.Background(), "team-a/y", 1)
	require.NoError(t, err, "nothing changed")

	res, err := svc.Write(ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: "team-a/all"})
	require.NoError(t, err, "every subgroup it removes is in its scope")
	assert.Equal(t, 0, res.Removed)
	assert.Empty(t, subgroups("team-a/all"))
	_, err = svc.Write(scopeOf(t, "ops", scope.Admin, "*"), deleteY)
	require.NoError(t, err, "read on every group deletes any group")
	assert.Empty(t, subgroups("team-a/y"))
}

func TestServiceReplaysAKeyedReplaceOrDeleteTheStateNowWouldRefuse(t *testing.T) {
	svc, st := scopedService(t)
	ctx := scopeOf(t, "sync-job", scope.Write, "team-a/*", "team-b")
	admin := scopeOf(t, "ops", scope.Admin, "*")
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
	forbidden(t, err, `principal "sync-job" lacks read on group "secret", a subgroup of group "team-a/all" `+
		`that this replace would remove: removing a subgroup needs read on it`)
	_, err = svc.Write(ctx, replaceZ)
	assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err), "%v", err)
	_, err = svc.Write(ctx, deleteB)
	forbidden(t, err, `principal "sync-job" lacks read on group "secret", a subgroup of group "team-b" `+
		`that deleting it would remove: removing a subgroup needs read on it`)
}

func TestServiceNamesNoGroupOutsideItsScopeInACycle(t *testing.T) {
	svc, _ := scopedService(t)
	ctx := scopeOf(t, "sync-job", scope.Write, "team-a/*", "team-b")
	admin := scopeOf(t, "ops", scope.Admin, "*")
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
