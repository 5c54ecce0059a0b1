package client_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/client"
	"example.com/groupmembership/membershiptest"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestAddListRemoveAndMember(t *testing.T) {
	srv := membershiptest.NewServer(t, membershiptest.WithClock(t0))
	c, ctx := srv.Client, t.Context()

	res, err := c.Add(ctx, "team/a", []client.User{
		client.NewUser(1),
		client.NewUser(2).WithNickname("Bob"),
		client.NewUser(3).WithNickname(""),
		client.NewUser(4).WithExpiry(client.ExpiresAt(t0.Add(time.Hour))),
		client.NewUser(5).WithNickname("Eve").WithExpiry(client.ExpiresAfter(2 * time.Hour)),
	}, client.WithActor(42))
	require.NoError(t, err)
	assert.Equal(t, 5, res.Count)
	assert.Equal(t, client.Revision(1), res.Revision)
	assert.False(t, res.Replayed)
	assert.Len(t, res.IdempotencyKey, 32)

	page, err := c.ListPage(ctx, "team/a", client.ListOptions{Limit: 2})
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 2}, uidsOf(page.Items))
	assert.Equal(t, 5, page.Total)
	assert.Equal(t, "2", page.Next)
	assert.Equal(t, int64(2), page.NextUID)
	assert.Regexp(t, `^"[0-9a-f]{16}-1"$`, page.ETag)

	all, err := collect(c.Members(ctx, "team/a", client.ListOptions{Limit: 2}))
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 2, 3, 4, 5}, uidsOf(all))
	assert.Equal(t, "Bob", all[1].Nickname)
	require.NotNil(t, all[3].Expires)
	assert.Equal(t, t0.Add(time.Hour), *all[3].Expires)
	assert.Equal(t, t0.Add(2*time.Hour), *all[4].Expires)
	assert.Nil(t, all[0].Expires)

	rest, err := collect(c.Members(ctx, "team/a", client.ListOptions{After: 3}))
	require.NoError(t, err)
	assert.Equal(t, []int64{4, 5}, uidsOf(rest))

	m, ok, err := c.Member(ctx, "team/a", 5)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "Eve", m.Nickname)
	_, ok, err = c.Member(ctx, "team/a", 99)
	require.NoError(t, err)
	assert.False(t, ok)

	removed, err := c.Remove(ctx, "team/a", []int64{2, 99})
	require.NoError(t, err)
	assert.Equal(t, 1, removed.Count)
	assert.Equal(t, client.Revision(2), removed.Revision)

	empty, err := c.ListPage(ctx, "nobody", client.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, empty.Items)
	assert.Equal(t, 0, empty.Total)
}

func TestGroupIDsThatAPathWouldChange(t *testing.T) {
	srv := membershiptest.NewServer(t)
	c, ctx := srv.Client, t.Context()
	for _, group := range []string{".", "..", "a/b", "a b", "100%", "é?#&"} {
		_, err := c.Add(ctx, group, client.Users(1))
		require.NoError(t, err, group)
		page, err := c.ListPage(ctx, group, client.ListOptions{})
		require.NoError(t, err, group)
		assert.Equal(t, []int64{1}, uidsOf(page.Items), group)
		_, ok, err := c.Member(ctx, group, 1)
		require.NoError(t, err, group)
		assert.True(t, ok, group)
	}
	groups, err := collect(c.UserGroups(t.Context(), 1, client.PageOptions{}))
	require.NoError(t, err)
	assert.Equal(t, []string{".", "..", "100%", "a b", "a/b", "é?#&"}, groups)
}

func TestReplaceWithConditions(t *testing.T) {
	srv := membershiptest.NewServer(t)
	c, ctx := srv.Client, t.Context()

	created, err := c.Replace(ctx, "oncall", client.Users(1, 2), client.IfGroupEmpty())
	require.NoError(t, err)
	assert.Equal(t, 2, created.Count)
	_, err = c.Replace(ctx, "oncall", client.Users(3), client.IfGroupEmpty())
	assert.True(t, client.IsPreconditionFailed(err), "got %v", err)

	page, err := c.ListPage(ctx, "oncall", client.ListOptions{})
	require.NoError(t, err)
	res, err := c.Replace(ctx, "oncall", client.Users(2, 3), client.IfMatch(page.ETag))
	require.NoError(t, err)
	assert.Equal(t, 1, res.Count)
	assert.Equal(t, 1, res.Removed)

	_, err = c.Replace(ctx, "oncall", client.Users(9), client.IfMatch(page.ETag))
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, 412, e.StatusCode)
	assert.Equal(t, client.CodePreconditionFailed, e.Code)
	now, err := c.ListPage(ctx, "oncall", client.ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, now.ETag, e.ETag, "a 412 carries the group's current ETag")
	assert.Equal(t, []int64{2, 3}, uidsOf(now.Items))

	_, err = c.Add(ctx, "oncall", client.Users(4), client.IfMatch("*"))
	require.NoError(t, err)
	_, err = c.Add(ctx, "empty", client.Users(4), client.IfMatch("*"))
	assert.True(t, client.IsPreconditionFailed(err), "got %v", err)

	emptied, err := c.Replace(ctx, "oncall", nil)
	require.NoError(t, err)
	assert.Equal(t, 3, emptied.Removed)
}

func TestDeleteGroupAndRemoveUserEverywhere(t *testing.T) {
	srv := membershiptest.NewServer(t)
	c, ctx := srv.Client, t.Context()
	_, err := c.Add(ctx, "a", client.Users(1, 2, 3))
	require.NoError(t, err)
	_, err = c.Add(ctx, "b", client.Users(1))
	require.NoError(t, err)

	page, err := c.ListPage(ctx, "a", client.ListOptions{})
	require.NoError(t, err)
	_, err = c.DeleteGroup(ctx, "a", client.IfMatch(`"0000000000000000-1"`))
	assert.True(t, client.IsPreconditionFailed(err), "got %v", err)
	deleted, err := c.DeleteGroup(ctx, "a", client.IfMatch(page.ETag), client.WithActor(7))
	require.NoError(t, err)
	assert.Equal(t, 3, deleted.Count)

	left, err := c.RemoveUserEverywhere(ctx, 1, client.WithActor(8))
	require.NoError(t, err)
	assert.Equal(t, 1, left.Count)
	_, err = c.RemoveUserEverywhere(ctx, 1, client.IfMatch("*"))
	assert.Equal(t, client.CodeInvalidHeader, client.ErrorCode(err))

	feed, err := c.Changes(ctx, client.ChangesOptions{After: 2})
	require.NoError(t, err)
	require.Len(t, feed.Changes, 2)
	assert.Equal(t, client.OpDeleteGroup, feed.Changes[0].Op)
	assert.Equal(t, int64(7), feed.Changes[0].Actor)
	assert.Equal(t, client.OpRemoveUser, feed.Changes[1].Op)
	assert.Equal(t, []int64{1}, feed.Changes[1].UIDs)
	assert.Equal(t, int64(8), feed.Changes[1].Actor)
	assert.Equal(t, client.Revision(4), feed.Latest)
	assert.Regexp(t, `^[0-9a-f]{16}$`, feed.Epoch)
}

func TestBatch(t *testing.T) {
	srv := membershiptest.NewServer(t)
	c, ctx := srv.Client, t.Context()
	_, err := c.Add(ctx, "ops", client.Users(9))
	require.NoError(t, err)

	res, err := c.Batch(ctx, []client.BatchChange{
		{Op: client.OpRemove, Group: "ops", Users: client.Users(9), IfMatch: "*"},
		{Op: client.OpAdd, Group: "team", Users: []client.User{client.NewUser(9).WithNickname("Ida")}},
		{Op: client.OpReplace, Group: "x", Users: client.Users(1, 2)},
		{Op: client.OpDeleteGroup, Group: "x"},
	}, client.WithActor(42))
	require.NoError(t, err)
	assert.Equal(t, []client.Counts{{Removed: 1}, {Added: 1}, {Added: 2}, {Removed: 2}}, res.Results)
	assert.Equal(t, client.Revision(2), res.Revision)

	_, err = c.Batch(ctx, []client.BatchChange{
		{Op: client.OpAdd, Group: "ops", Users: client.Users(1)},
		{Op: client.OpDeleteGroup, Group: "team", IfMatch: `"0000000000000000-1"`},
	})
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, client.CodePreconditionFailed, e.Code)
	assert.Equal(t, 1, e.Index)
	assert.Equal(t, "changes", e.Element)

	feed, err := c.Changes(ctx, client.ChangesOptions{After: 1})
	require.NoError(t, err)
	require.Len(t, feed.Changes, 1)
	assert.Equal(t, client.OpBatch, feed.Changes[0].Op)
	assert.Equal(t, int64(42), feed.Changes[0].Actor)
	require.Len(t, feed.Changes[0].Changes, 4)
	assert.Equal(t, []client.Nickname{{UID: 9, Nickname: "Ida"}}, feed.Changes[0].Changes[1].Nicknames)
}

func TestCheck(t *testing.T) {
	srv := membershiptest.NewServer(t)
	c, ctx := srv.Client, t.Context()
	_, err := c.Add(ctx, "admins", client.Users(3))
	require.NoError(t, err)
	res, err := c.Check(ctx, []client.Check{{Group: "admins", UID: 3}, {Group: "admins", UID: 2}, {Group: "nobody", UID: 3}})
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false, false}, res.Results)
	assert.Equal(t, client.Revision(1), res.Revision)

	_, err = c.Check(ctx, []client.Check{{Group: "admins", UID: 3}, {Group: "admins", UID: 0}})
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, client.CodeInvalidChecks, e.Code)
	assert.Equal(t, 1, e.Index)
	assert.Equal(t, "checks", e.Element)
}

func TestUserGroupsAndGroups(t *testing.T) {
	srv := membershiptest.NewServer(t)
	c, ctx := srv.Client, t.Context()
	for _, g := range []string{"team/b", "admins", "team/a", "ops"} {
		_, err := c.Add(ctx, g, client.Users(1))
		require.NoError(t, err)
	}
	_, err := c.Add(ctx, "ops", client.Users(2))
	require.NoError(t, err)

	page, err := c.UserGroupsPage(ctx, 1, client.PageOptions{Limit: 3})
	require.NoError(t, err)
	assert.Equal(t, []string{"admins", "ops", "team/a"}, page.Items)
	assert.Equal(t, 4, page.Total)
	assert.Equal(t, "team/a", page.Next)
	all, err := collect(c.UserGroups(ctx, 1, client.PageOptions{Limit: 1}))
	require.NoError(t, err)
	assert.Equal(t, []string{"admins", "ops", "team/a", "team/b"}, all)

	groups, err := c.GroupsPage(ctx, client.PageOptions{Limit: 2})
	require.NoError(t, err)
	assert.Equal(t, []client.GroupSize{{Group: "admins", Members: 1}, {Group: "ops", Members: 2}}, groups.Items)
	assert.Equal(t, client.Revision(5), groups.Revision)
	assert.Equal(t, 4, groups.Total)
	team, err := collect(c.Groups(ctx, client.PageOptions{Prefix: "team/", Limit: 1}))
	require.NoError(t, err)
	assert.Equal(t, []client.GroupSize{{Group: "team/a", Members: 1}, {Group: "team/b", Members: 1}}, team)
}

func TestChanges(t *testing.T) {
	srv := membershiptest.NewServer(t, membershiptest.WithClock(t0))
	c, ctx := srv.Client, t.Context()
	_, err := c.Add(ctx, "g", []client.User{client.NewUser(1).WithNickname("Al").WithExpiry(client.ExpiresAfter(time.Hour)), client.NewUser(2).WithExpiry(client.Permanent())}, client.WithActor(5))
	require.NoError(t, err)
	_, err = c.Add(ctx, "g", client.Users(3))
	require.NoError(t, err)
	_, err = c.Add(ctx, "g", []client.User{client.NewUser(1).WithExpiry(client.Permanent())})
	require.NoError(t, err)

	feed, err := c.Changes(ctx, client.ChangesOptions{Limit: 1})
	require.NoError(t, err)
	require.Len(t, feed.Changes, 1)
	ch := feed.Changes[0]
	assert.Equal(t, client.Revision(1), ch.Revision)
	assert.Equal(t, client.OpAdd, ch.Op)
	assert.Equal(t, t0, ch.Time)
	assert.Equal(t, int64(5), ch.Actor)
	assert.Equal(t, []int64{1, 2}, ch.UIDs)
	assert.Equal(t, []client.Nickname{{UID: 1, Nickname: "Al"}}, ch.Nicknames)
	hour := t0.Add(time.Hour)
	assert.Equal(t, []client.MemberExpiry{{UID: 1, Expires: &hour}}, ch.Expiries, "2 had no expiry to take away")
	assert.Equal(t, client.Revision(3), feed.Latest)
	last, err := c.Changes(ctx, client.ChangesOptions{After: 2})
	require.NoError(t, err)
	require.Len(t, last.Changes, 1)
	assert.Equal(t, []client.MemberExpiry{{UID: 1, Expires: nil}}, last.Changes[0].Expiries, "made permanent")

	// A long poll with nothing after: [] when the wait ends.
	empty, err := c.Changes(ctx, client.ChangesOptions{After: 3, Wait: time.Millisecond})
	require.NoError(t, err)
	assert.Empty(t, empty.Changes)

	_, err = c.Changes(ctx, client.ChangesOptions{After: 100})
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.True(t, client.IsChangesGone(err))
	assert.True(t, client.NeedsResync(err))
	assert.Equal(t, client.Revision(1), e.OldestRevision)

	pos, err := c.Latest(ctx)
	require.NoError(t, err)
	assert.Equal(t, client.Position{Revision: 3, Epoch: feed.Epoch}, pos)
}

func TestExpiriesOnTheFakeClock(t *testing.T) {
	srv := membershiptest.NewServer(t, membershiptest.WithClock(t0))
	c, ctx := srv.Client, t.Context()
	_, err := c.Add(ctx, "trial", []client.User{
		client.NewUser(1).WithExpiry(client.ExpiresAfter(time.Hour)),
		client.NewUser(2).WithExpiry(client.ExpiresAt(t0.Add(2 * time.Hour))),
		client.NewUser(3),
	})
	require.NoError(t, err)

	assert.Equal(t, 0, srv.Advance(59*time.Minute))
	assert.Equal(t, 1, srv.Advance(time.Minute))
	members, err := collect(c.Members(ctx, "trial", client.ListOptions{}))
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 3}, uidsOf(members), "the TTL of an hour ended at Advance(time.Hour)")

	// Made permanent, 2 outlives its expiry.
	_, err = c.Add(ctx, "trial", []client.User{client.NewUser(2).WithExpiry(client.Permanent())})
	require.NoError(t, err)
	assert.Equal(t, 0, srv.Advance(time.Hour))

	_, err = c.Add(ctx, "trial", []client.User{client.NewUser(4).WithExpiry(client.ExpiresAt(t0))})
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, client.CodeInvalidUsers, e.Code, "an expiry not after the service's clock")
	assert.Equal(t, 0, e.Index)

	feed, err := c.Changes(ctx, client.ChangesOptions{After: 1, Limit: 1})
	require.NoError(t, err)
	require.Len(t, feed.Changes, 1)
	assert.Equal(t, client.OpExpire, feed.Changes[0].Op)
	assert.Equal(t, t0.Add(time.Hour), feed.Changes[0].Time, "the service's own change, at the fake clock's time")
	assert.Equal(t, t0.Add(2*time.Hour), srv.Now())
}

func TestTokenAndLimits(t *testing.T) {
	srv := membershiptest.NewServer(t, membershiptest.WithToken("s3cret"),
		membershiptest.WithLimits(membershiptest.Limits{MaxUsers: 2, MaxBodyBytes: 200, MaxChecks: 1}))
	ctx := t.Context()
	_, err := srv.Client.Add(ctx, "g", client.Users(1, 2))
	require.NoError(t, err, "the server's client sends the token")
	feed, err := srv.Client.Changes(ctx, client.ChangesOptions{})
	require.NoError(t, err)
	require.Len(t, feed.Changes, 1)
	assert.Equal(t, "token", feed.Changes[0].Principal, "the change names the token's principal, not the token")

	anonymous, err := client.New(srv.URL)
	require.NoError(t, err)
	_, err = anonymous.Add(ctx, "g", client.Users(3))
	assert.True(t, client.IsUnauthorized(err), "got %v", err)
	page, err := anonymous.ListPage(ctx, "g", client.ListOptions{})
	require.NoError(t, err, "reads need no token without -auth-reads")
	assert.Len(t, page.Items, 2)
	_, _, err = anonymous.Backup(ctx, &bytes.Buffer{})
	assert.True(t, client.IsUnauthorized(err), "got %v", err)

	_, err = srv.Client.Add(ctx, "g", client.Users(1, 2, 3))
	assert.Equal(t, client.CodeTooManyUsers, client.ErrorCode(err))
	assert.True(t, client.IsTooLarge(err))
	_, err = srv.Client.Add(ctx, "g", []client.User{client.NewUser(1).WithNickname(string(bytes.Repeat([]byte("n"), 250)))})
	assert.Equal(t, client.CodeBodyTooLarge, client.ErrorCode(err))
	_, err = srv.Client.Check(ctx, []client.Check{{Group: "g", UID: 1}, {Group: "g", UID: 2}})
	assert.Equal(t, client.CodeTooManyChecks, client.ErrorCode(err))
}

func TestAuthReads(t *testing.T) {
	srv := membershiptest.NewServer(t, membershiptest.WithToken("s3cret"), membershiptest.WithFlags("-auth-reads"))
	anonymous, err := client.New(srv.URL)
	require.NoError(t, err)
	_, err = anonymous.ListPage(t.Context(), "g", client.ListOptions{})
	assert.True(t, client.IsUnauthorized(err), "got %v", err)
	_, err = srv.Client.ListPage(t.Context(), "g", client.ListOptions{})
	assert.NoError(t, err)
}

func TestBackup(t *testing.T) {
	srv := membershiptest.NewServer(t, membershiptest.WithToken("s3cret"))
	c, ctx := srv.Client, t.Context()
	_, err := c.Add(ctx, "g", client.Users(1, 2))
	require.NoError(t, err)
	var buf bytes.Buffer
	rev, n, err := c.Backup(ctx, &buf)
	require.NoError(t, err)
	assert.Equal(t, client.Revision(1), rev)
	assert.Equal(t, int64(buf.Len()), n)
	assert.Positive(t, n)
}

func TestNewServerRefusesWhatItHasNot(t *testing.T) {
	_, err := membershiptest.Start(membershiptest.WithFlags("-data-dir", t.TempDir()))
	assert.ErrorContains(t, err, "-data-dir")
	_, err = membershiptest.Start(membershiptest.WithFlags("-max-users", "0"))
	assert.ErrorContains(t, err, "-max-users")
	_, err = membershiptest.Start(membershiptest.WithToken("two words"))
	assert.Error(t, err)
}
