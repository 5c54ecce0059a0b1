package nestreads_test

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
	"example.com/groupmembership/membership/nestreads"
	"example.com/groupmembership/membership/scope"
)

// scopedService returns the Service of the reads of groups in groups, and
// the membership.Service, over a memory store that holds
// storetest.WriteScopedGroups's groups.
func scopedService(t *testing.T) (*nestreads.Service, *membership.Service) {
	t.Helper()
	svc := membership.NewService(memory.New(), membership.ServiceOptions{})
	storetest.WriteScopedGroups(t, svc)
	return nestreads.NewService(svc), svc
}

func TestServiceRefusesATransitiveReadThatReachesPastItsScope(t *testing.T) {
	nest, _ := scopedService(t)
	ctx := storetest.ScopeOf("dashboard", scope.Read, "team-a/*", "team-b")
	var got []membership.UID
	list := func(_ int, members iter.Seq[membership.Member]) {
		for m := range members {
			got = append(got, m.UID)
		}
	}
	const outside = `principal "dashboard" lacks read on group "secret", which group "team-a/y" holds through nesting: ` +
		`a transitive read needs read on every group below`

	_, err := nest.ListTransitiveMembers(ctx, "team-a/all", membership.ListOptions{}, list)
	require.NoError(t, err, "team-a/all reaches team-a/x alone")
	assert.Equal(t, []membership.UID{1, 2}, got)
	_, err = nest.ListTransitiveMembers(ctx, "team-a/y", membership.ListOptions{}, list)
	storetest.Forbidden(t, err, outside)
	_, _, _, err = nest.TransitiveMember(ctx, "team-a/y", 1)
	storetest.Forbidden(t, err, outside)
	_, err = nest.TransitiveRevision(ctx, "team-a/y")
	storetest.Forbidden(t, err, outside)
	_, _, err = nest.CheckTransitive(ctx, []membership.Check{{GroupID: "team-a/all", UID: 1}, {GroupID: "team-a/all", UID: 2}, {GroupID: "team-a/y", UID: 1}})
	storetest.Forbidden(t, err, `checks element 2 (group "team-a/y"): `+outside)
	found, _, err := nest.CheckTransitive(ctx, []membership.Check{{GroupID: "team-a/all", UID: 1}, {GroupID: "team-b", UID: 9}})
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false}, found)

	_, _, err = nest.CheckTransitive(ctx, []membership.Check{{GroupID: "secret", UID: 1}})
	storetest.Forbidden(t, err, `checks element 0 (group "secret"): principal "dashboard" lacks read on group "secret"`)
	_, err = nest.ListTransitiveMembers(storetest.ScopeOf("all", scope.Read, "*"), "team-a/y", membership.ListOptions{}, list)
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
	reads := nestreads.NewService(membership.NewService(moving, membership.ServiceOptions{}))
	ctx := storetest.ScopeOf("dashboard", scope.Read, "team-a/*")
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
	reads = nestreads.NewService(membership.NewService(moving, membership.ServiceOptions{}))
	_, err = reads.ListTransitiveMembers(ctx, "team-a/all", membership.ListOptions{}, list)
	require.Error(t, err)
	assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err))
	assert.Contains(t, membership.ErrorMessage(err), "the groups in groups changed while this transitive read ran")
	assert.Equal(t, []membership.UID{7}, listed, "the read saw the members of secret: the error is what keeps them from the reply")

	unnest("team-a/x", "secret")
	moving.during = func() {}
	reads = nestreads.NewService(membership.NewService(moving, membership.ServiceOptions{}))
	_, err = reads.ListTransitiveMembers(ctx, "team-a/all", membership.ListOptions{}, list)
	require.NoError(t, err, "with the nesting still, the same read succeeds")
}

func TestServiceListsAUsersGroupsThroughNestingForReadOnEveryGroup(t *testing.T) {
	nest, _ := scopedService(t)
	ctx := storetest.ScopeOf("dashboard", scope.Read, "team-a/*", "team-b")
	userGroups := func(ctx context.Context, opts membership.GroupListOptions) ([]string, int, error) {
		var got []string
		n := -1
		_, err := nest.TransitiveUserGroups(ctx, 1, opts, func(total int, ids iter.Seq[string]) {
			n = total
			got = slices.Collect(ids)
		})
		return got, n, err
	}

	// A user's groups through nesting need read on every group: a refusal
	// that depended on the user's groups would tell of those outside.
	const needsAll = `principal "%s" lacks read on every group (*): a user's groups through nesting may be any group's`
	_, _, err := userGroups(ctx, membership.GroupListOptions{})
	storetest.Forbidden(t, err, fmt.Sprintf(needsAll, "dashboard"))
	narrow := storetest.ScopeOf("narrow", scope.Read, "team-a/x", "team-a/all", "team-b", "team-a/y", "secret")
	_, _, err = userGroups(narrow, membership.GroupListOptions{After: "team-a/all", Limit: 2})
	storetest.Forbidden(t, err, fmt.Sprintf(needsAll, "narrow"))
	_, err = nest.TransitiveUserGroups(narrow, 99, membership.GroupListOptions{}, func(int, iter.Seq[string]) {})
	storetest.Forbidden(t, err, fmt.Sprintf(needsAll, "narrow"))
	everyone := storetest.ScopeOf("everyone", scope.Read, "*")
	got, n, err := userGroups(everyone, membership.GroupListOptions{After: "team-a/all", Limit: 2})
	require.NoError(t, err)
	assert.Equal(t, []string{"team-a/x", "team-a/y"}, got)
	assert.Equal(t, 5, n)
}

func TestServiceListsOfNestedGroupsNeedReadOnEach(t *testing.T) {
	nest, svc := scopedService(t)
	ctx := storetest.ScopeOf("dashboard", scope.Read, "team-a/*", "team-b")
	var ids []string
	total := -1
	list := func(n int, groups iter.Seq[membership.Nested]) {
		total = n
		ids = nil
		for g := range groups {
			ids = append(ids, g.GroupID)
		}
	}
	_, err := nest.Subgroups(ctx, "team-a/all", membership.NestingListOptions{}, list)
	require.NoError(t, err)
	assert.Equal(t, []string{"team-a/x"}, ids)
	_, err = nest.Subgroups(ctx, "team-a/y", membership.NestingListOptions{}, list)
	storetest.Forbidden(t, err, `principal "dashboard" lacks read on group "secret", which is below group "team-a/y": listing the groups below a group needs read on each`)
	_, err = nest.Parents(ctx, "secret", membership.NestingListOptions{}, list)
	storetest.Forbidden(t, err, `principal "dashboard" lacks read on group "secret"`)
	_, err = nest.Parents(ctx, "team-a/x", membership.NestingListOptions{Transitive: true}, list)
	require.NoError(t, err)
	assert.Equal(t, []string{"team-a/all"}, ids)

	wide := storetest.ScopeOf("wide", scope.Read, "team-a/*", "secret")
	_, err = nest.Subgroups(wide, "team-a/all", membership.NestingListOptions{}, func(int, iter.Seq[membership.Nested]) {})
	require.NoError(t, err)
	_, err = svc.Write(context.Background(), membership.Write{Op: membership.OpAddGroups, GroupID: "team-a/all",
		Subgroups: []membership.Subgroup{{GroupID: "team-a/y"}, {GroupID: "secret"}}})
	require.NoError(t, err)
	_, err = nest.Subgroups(wide, "team-a/all", membership.NestingListOptions{After: "secret", Limit: 1}, list)
	require.NoError(t, err)
	assert.Equal(t, []string{"team-a/x"}, ids, "a page after an id")
	assert.Equal(t, 3, total)
	_, err = nest.Subgroups(wide, "team-a/all", membership.NestingListOptions{Transitive: true, Limit: 2}, list)
	require.NoError(t, err)
	assert.Equal(t, []string{"secret", "team-a/x"}, ids)
	assert.Equal(t, 3, total)
}
