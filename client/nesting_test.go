package client_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/client"
	"example.com/groupmembership/membershiptest"
)

func TestSubgroupsWritesAndReads(t *testing.T) {
	srv := membershiptest.NewServer(t, membershiptest.WithClock(t0))
	c, ctx := srv.Client, t.Context()

	_, err := c.Add(ctx, "backend", client.Users(1, 2))
	require.NoError(t, err)
	_, err = c.Add(ctx, "frontend", []client.User{client.NewUser(2), client.NewUser(3).WithNickname("Tao")})
	require.NoError(t, err)
	res, err := c.AddSubgroups(ctx, "engineering", client.Subgroups("backend", "frontend"), client.WithActor(42))
	require.NoError(t, err)
	assert.Equal(t, 2, res.Count)
	assert.Equal(t, client.Revision(3), res.Revision)
	res, err = c.AddSubgroups(ctx, "all-staff", []client.Subgroup{
		client.NewSubgroup("engineering"),
		client.NewSubgroup("interns").WithExpiry(client.ExpiresAfter(time.Hour)),
	})
	require.NoError(t, err)
	assert.Equal(t, 2, res.Count)

	page, err := c.SubgroupsPage(ctx, "all-staff", client.PageOptions{Limit: 1})
	require.NoError(t, err)
	assert.Equal(t, []client.NestedGroup{{Group: "engineering"}}, page.Items)
	assert.Equal(t, 2, page.Total)
	assert.Equal(t, "engineering", page.Next)
	assert.Regexp(t, `^"[0-9a-f]{16}-4"$`, page.ETag)
	direct, err := collect(c.Subgroups(ctx, "all-staff", client.PageOptions{Limit: 1}))
	require.NoError(t, err)
	require.Len(t, direct, 2)
	require.NotNil(t, direct[1].Expires)
	assert.Equal(t, t0.Add(time.Hour), *direct[1].Expires)

	below, err := collect(c.Subgroups(ctx, "all-staff", client.PageOptions{Limit: 2, Transitive: true}))
	require.NoError(t, err)
	assert.Equal(t, []client.NestedGroup{{Group: "backend"}, {Group: "engineering"}, {Group: "frontend"}, {Group: "interns"}}, below)
	above, err := collect(c.Parents(ctx, "backend", client.PageOptions{Transitive: true}))
	require.NoError(t, err)
	assert.Equal(t, []client.NestedGroup{{Group: "all-staff"}, {Group: "engineering"}}, above)
	parents, err := c.ParentsPage(ctx, "backend", client.PageOptions{})
	require.NoError(t, err)
	assert.Equal(t, []client.NestedGroup{{Group: "engineering"}}, parents.Items)

	members, err := collect(c.Members(ctx, "all-staff", client.ListOptions{Limit: 2, Transitive: true}))
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 2, 3}, uidsOf(members))
	assert.Equal(t, "Tao", members[2].Nickname)
	directMembers, err := c.ListPage(ctx, "all-staff", client.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, directMembers.Items)

	m, via, ok, err := c.TransitiveMember(ctx, "all-staff", 3)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "Tao", m.Nickname)
	assert.Equal(t, []string{"all-staff", "engineering", "frontend"}, via)
	_, _, ok, err = c.TransitiveMember(ctx, "backend", 3)
	require.NoError(t, err)
	assert.False(t, ok)

	groups, err := collect(c.UserGroups(ctx, 2, client.PageOptions{Limit: 3, Transitive: true}))
	require.NoError(t, err)
	assert.Equal(t, []string{"all-staff", "backend", "engineering", "frontend"}, groups)

	checks, err := c.CheckTransitive(ctx, []client.Check{{Group: "all-staff", UID: 1}, {Group: "interns", UID: 1}})
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false}, checks.Results)
	checks, err = c.Check(ctx, []client.Check{{Group: "all-staff", UID: 1}})
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, checks.Results)

	sizes, err := collect(c.Groups(ctx, client.PageOptions{Prefix: "all-"}))
	require.NoError(t, err)
	assert.Equal(t, []client.GroupSize{{Group: "all-staff", Subgroups: 2}}, sizes)

	res, err = c.ReplaceSubgroups(ctx, "all-staff", client.Subgroups("engineering", "ops"), client.IfMatch(page.ETag))
	require.NoError(t, err)
	assert.Equal(t, 1, res.Count)
	assert.Equal(t, 1, res.Removed)
	_, err = c.ReplaceSubgroups(ctx, "all-staff", nil, client.IfMatch(page.ETag))
	assert.True(t, client.IsPreconditionFailed(err), "%v", err)
	res, err = c.RemoveSubgroups(ctx, "all-staff", []string{"ops", "nobody"})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Count)

	_, err = c.AddSubgroups(ctx, "backend", client.Subgroups("all-staff"))
	assert.True(t, client.IsCycle(err), "%v", err)
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "adding all-staff to backend makes a cycle: all-staff > engineering > backend > all-staff", e.Message)
	_, err = c.AddSubgroups(ctx, "backend", []client.Subgroup{client.NewSubgroup("a"), client.NewSubgroup("")})
	require.ErrorAs(t, err, &e)
	assert.Equal(t, client.CodeInvalidGroups, e.Code)
	assert.Equal(t, "groups", e.Element)
	assert.Equal(t, 1, e.Index)
	_, err = c.AddSubgroups(ctx, "", client.Subgroups("a"))
	assert.ErrorIs(t, err, client.ErrEmptyGroup)
}

// membershiptest passes -max-ancestors on, and the client names its 409.
func TestSubgroupsTooManyAncestors(t *testing.T) {
	srv := membershiptest.NewServer(t, membershiptest.WithLimits(membershiptest.Limits{MaxAncestors: 1}))
	c, ctx := srv.Client, t.Context()
	_, err := c.AddSubgroups(ctx, "a", client.Subgroups("b"))
	require.NoError(t, err)
	_, err = c.AddSubgroups(ctx, "top", client.Subgroups("a"))
	assert.True(t, client.IsTooManyAncestors(err), "%v", err)
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "adding a to top puts b below 2 groups, more than 1 (-max-ancestors)", e.Message)
}

func TestSubgroupsDepthAndExpiry(t *testing.T) {
	srv := membershiptest.NewServer(t, membershiptest.WithClock(t0), membershiptest.WithLimits(membershiptest.Limits{MaxDepth: 1}))
	c, ctx := srv.Client, t.Context()
	_, err := c.AddSubgroups(ctx, "a", []client.Subgroup{client.NewSubgroup("b").WithExpiry(client.ExpiresAfter(time.Minute))})
	require.NoError(t, err)
	_, err = c.AddSubgroups(ctx, "b", client.Subgroups("c"))
	assert.True(t, client.IsTooDeep(err), "%v", err)

	srv.Advance(time.Minute)
	left, err := collect(c.Subgroups(ctx, "a", client.PageOptions{}))
	require.NoError(t, err)
	assert.Empty(t, left, "the nesting ended on the fake clock")
	feed, err := c.Changes(ctx, client.ChangesOptions{})
	require.NoError(t, err)
	require.Len(t, feed.Changes, 2)
	assert.Equal(t, client.OpAddGroups, feed.Changes[0].Op)
	require.Len(t, feed.Changes[0].Groups, 1)
	require.NotNil(t, feed.Changes[0].Groups[0].Expires)
	assert.Equal(t, t0.Add(time.Minute), *feed.Changes[0].Groups[0].Expires)
	assert.Equal(t, client.Change{Revision: 2, Op: client.OpExpireGroups, Time: t0.Add(time.Minute), Group: "a",
		Groups: []client.NestedGroup{{Group: "b"}}}, feed.Changes[1])
}

func TestBatchOfSubgroups(t *testing.T) {
	srv := membershiptest.NewServer(t)
	c, ctx := srv.Client, t.Context()
	res, err := c.Batch(ctx, []client.BatchChange{
		{Op: client.OpAdd, Group: "backend", Users: client.Users(1)},
		{Op: client.OpAddGroups, Group: "eng", Groups: client.Subgroups("backend", "frontend")},
		{Op: client.OpReplaceGroups, Group: "all"},
		{Op: client.OpRemoveGroups, Group: "eng", Groups: []client.Subgroup{client.NewSubgroup("frontend").WithExpiry(client.Permanent())}},
	})
	require.NoError(t, err)
	assert.Equal(t, []client.Counts{{Added: 1}, {Added: 2}, {}, {Removed: 1}}, res.Results)
	feed, err := c.Changes(ctx, client.ChangesOptions{})
	require.NoError(t, err)
	require.Len(t, feed.Changes, 1)
	assert.Equal(t, client.Change{Op: client.OpAddGroups, Group: "eng", Groups: []client.NestedGroup{{Group: "backend"}, {Group: "frontend"}}}, feed.Changes[0].Changes[1])
}

func TestSubgroupJSON(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   client.Subgroup
		want string
	}{
		{client.NewSubgroup("backend"), `"backend"`},
		{client.NewSubgroup("b").WithExpiry(client.ExpiresAfter(90 * time.Minute)), `{"group":"b","ttl":"1h30m0s"}`},
		{client.NewSubgroup("b").WithExpiry(client.ExpiresAt(at)), `{"group":"b","expires":"2030-01-02T03:04:05Z"}`},
		{client.NewSubgroup("b").WithExpiry(client.Permanent()), `{"group":"b","expires":null}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.in)
		require.NoError(t, err)
		assert.Equal(t, tt.want, string(b))
	}
	b, err := json.Marshal(client.BatchChange{Op: client.OpRemoveGroups, Group: "g", Groups: []client.Subgroup{client.NewSubgroup("b").WithExpiry(client.Permanent())}})
	require.NoError(t, err)
	assert.Equal(t, `{"op":"remove_groups","group":"g","groups":["b"]}`, string(b), "a remove sends ids only")
}
