// Package directorytest is the part of the store contract about the
// directory: the accounts of users and the attributes of groups
// (directory.Reader), written by the ops set_user, delete_user and
// set_group, and what they do to memberships: an inactive account is in no
// group.
package directorytest

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
	"example.com/groupmembership/membership/directory"
)

// Store is a store with a directory: every store of this service.
type Store interface {
	membership.Store
	directory.Reader
}

// SetUser returns the write of uid's account a, with cond.
func SetUser(uid membership.UID, a account.Account, cond membership.Precondition) membership.Write {
	return membership.Write{Op: membership.OpSetUser, UIDs: []membership.UID{uid}, Account: &a, If: cond}
}

// SetGroup returns the write of groupID's attributes.
func SetGroup(groupID, name, external string) membership.Write {
	return membership.Write{Op: membership.OpSetGroup, GroupID: groupID, Group: &account.GroupAttributes{DisplayName: name, ExternalID: external}}
}

// Contract checks the directory's writes and reads.
func Contract(t *testing.T, newStore func(t *testing.T) Store) {
	storetest.Run(t, newStore, []storetest.Case[Store]{
		{Name: "accounts", Test: testAccounts},
		{Name: "an account keeps its nickname in no group", Test: testNicknames},
		{Name: "an inactive user is in no group", Test: testInactive},
		{Name: "group attributes", Test: testGroups},
		{Name: "queries and pages", Test: testQueries},
		{Name: "a follower of the feed keeps every list", Test: testFollower},
		{Name: "racing creates: one wins", Test: testRaces},
	})
}

// user returns uid's account, and false when it has none.
func user(t *testing.T, s Store, uid membership.UID) (directory.UserRecord, bool) {
	t.Helper()
	u, ok, err := s.User(context.Background(), uid)
	require.NoError(t, err)
	return u, ok
}

// groupsOf returns the groups uid is in.
func groupsOf(t *testing.T, s Store, uid membership.UID) []string {
	t.Helper()
	got, _ := storetest.UserGroups(t, s, uid, membership.GroupListOptions{})
	return got
}

func testAccounts(t *testing.T, ctx context.Context, s Store) {
	storetest.MustAdd(t, s, "g", storetest.UsersOf(7))
	free, err := s.FreeUID(ctx)
	require.NoError(t, err)
	assert.Equal(t, membership.UID(8), free, "one more than the largest uid in a group")
	_, err = s.Write(ctx, SetUser(7, account.Account{UserName: "taken"}, membership.Precondition{Empty: true}))
	assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err), "a uid in a group is not free")

	a := account.Account{UserName: "Ann@Example.com", ExternalID: "x1", DisplayName: "Ann", GivenName: "Ann", FamilyName: "Lee", Email: "ann@example.com", Active: true}
	res := storetest.MustWrite(t, s, SetUser(8, a, membership.Precondition{Empty: true}))
	u, ok := user(t, s, 8)
	require.True(t, ok)
	assert.Equal(t, a, u.Account)
	assert.Equal(t, res.Revision, u.Revision)
	assert.False(t, u.Created.IsZero())
	assert.Equal(t, u.Created, u.Modified)
	free, err = s.FreeUID(ctx)
	require.NoError(t, err)
	assert.Equal(t, membership.UID(9), free, "one more than the largest uid with an account")

	same := storetest.MustWrite(t, s, SetUser(8, a, membership.Precondition{}))
	assert.Equal(t, u.Revision, same.Revision, "an account set as it is: no change")
	assert.Equal(t, res.Revision, storetest.Latest(t, s))

	_, err = s.Write(ctx, SetUser(9, account.Account{UserName: "ann@example.COM", Active: true}, membership.Precondition{}))
	assert.Equal(t, membership.CodeUserNameTaken, membership.ErrorCode(err), "compared case-insensitively")
	_, err = s.Write(ctx, SetUser(8, a, membership.Precondition{Revisions: []membership.Revision{u.Revision - 1}}))
	assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err))
	_, err = s.Write(ctx, SetUser(9, a, membership.Precondition{Exists: true}))
	assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err), "no account")

	renamed := a
	renamed.UserName, renamed.GivenName = "ann", ""
	res = storetest.MustWrite(t, s, SetUser(8, renamed, membership.Precondition{Revisions: []membership.Revision{u.Revision}}))
	u, _ = user(t, s, 8)
	assert.Equal(t, renamed, u.Account)
	assert.Equal(t, res.Revision, u.Revision)
	storetest.MustWrite(t, s, SetUser(9, account.Account{UserName: "Ann@Example.com", Active: true}, membership.Precondition{Empty: true}))

	storetest.MustAdd(t, s, "h", storetest.UsersOf(8))
	res = storetest.MustWrite(t, s, membership.Write{Op: membership.OpDeleteUser, UIDs: []membership.UID{8}})
	assert.Equal(t, 1, res.Count, "it left h")
	_, ok = user(t, s, 8)
	assert.False(t, ok)
	assert.Empty(t, groupsOf(t, s, 8))
	changes := storetest.AllChanges(t, s, res.Revision-1)
	require.Len(t, changes, 1)
	assert.Equal(t, membership.Change{Revision: res.Revision, Op: membership.OpDeleteUser, Time: changes[0].Time, UIDs: []membership.UID{8}}, changes[0])
	res = storetest.MustWrite(t, s, membership.Write{Op: membership.OpDeleteUser, UIDs: []membership.UID{8}})
	assert.Zero(t, res.Count, "nothing left to delete")
}

func testNicknames(t *testing.T, ctx context.Context, s Store) {
	storetest.MustWrite(t, s, SetUser(1, account.Account{UserName: "a", DisplayName: "Al", Active: true}, membership.Precondition{}))
	storetest.MustAdd(t, s, "g", []membership.User{{UID: 1}, storetest.Nicknamed(2, "Bo")})
	got, _ := storetest.ListAll(t, s, "g")
	assert.Equal(t, []membership.Member{{UID: 1, Nickname: "Al"}, {UID: 2, Nickname: "Bo"}}, got, "displayName is the nickname")

	before, _ := user(t, s, 1)
	res := storetest.MustAdd(t, s, "g", []membership.User{storetest.Nicknamed(1, "Ally")})
	u, _ := user(t, s, 1)
	assert.Equal(t, "Ally", u.Account.DisplayName, "a nickname set elsewhere is the account's")
	assert.Equal(t, res.Revision, u.Revision, "and moves its revision")
	assert.False(t, u.Modified.Before(before.Modified))

	storetest.MustWrite(t, s, membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{1, 2}})
	u, _ = user(t, s, 1)
	assert.Equal(t, "Ally", u.Account.DisplayName, "kept in no group")
	storetest.MustAdd(t, s, "h", storetest.UsersOf(1, 2))
	got, _ = storetest.ListAll(t, s, "h")
	assert.Equal(t, []membership.Member{{UID: 1, Nickname: "Ally"}, {UID: 2}}, got, "a user without an account is forgotten")
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{1}})
	u, ok := user(t, s, 1)
	assert.True(t, ok, "remove_user keeps the account")
	assert.Equal(t, "Ally", u.Account.DisplayName)
}

func testInactive(t *testing.T, ctx context.Context, s Store) {
	a := account.Account{UserName: "c", DisplayName: "Cy", Active: true}
	storetest.MustWrite(t, s, SetUser(3, a, membership.Precondition{}))
	for _, g := range []string{"x", "y"} {
		storetest.MustAdd(t, s, g, storetest.UsersOf(3, 4))
	}
	revX := storetest.Revision(t, s, "x")
	a.Active = false
	res := storetest.MustWrite(t, s, SetUser(3, a, membership.Precondition{}))
	assert.Equal(t, 2, res.Count, "it left both groups")
	assert.Empty(t, groupsOf(t, s, 3))
	assert.Greater(t, storetest.Revision(t, s, "x"), revX, "the group's revision moves")
	changes := storetest.AllChanges(t, s, res.Revision-1)
	require.Len(t, changes, 1, "one change")
	assert.Equal(t, membership.OpSetUser, changes[0].Op)
	assert.Equal(t, a, *changes[0].Account)

	before := storetest.Latest(t, s)
	for _, w := range []membership.Write{
		{Op: membership.OpAdd, GroupID: "x", Users: storetest.UsersOf(3)},
		{Op: membership.OpReplace, GroupID: "x", Users: storetest.UsersOf(3, 4)},
	} {
		_, err := s.Write(ctx, w)
		assert.Equal(t, membership.CodeInactiveUser, membership.ErrorCode(err), "%s", w.Op)
	}
	_, err := s.Batch(ctx, membership.Batch{Writes: []membership.Write{{Op: membership.OpAdd, GroupID: "z", Users: storetest.UsersOf(5)},
		{Op: membership.OpAdd, GroupID: "x", Users: storetest.UsersOf(3)}}})
	assert.Equal(t, membership.CodeInactiveUser, membership.ErrorCode(err), "in a batch")
	assert.Equal(t, before, storetest.Latest(t, s), "nothing was changed")
	got, _ := storetest.ListAll(t, s, "z")
	assert.Empty(t, got)

	a.Active = true
	storetest.MustWrite(t, s, SetUser(3, a, membership.Precondition{}))
	assert.Empty(t, groupsOf(t, s, 3), "activation brings no membership back")
	storetest.MustAdd(t, s, "x", storetest.UsersOf(3))
	got, _ = storetest.ListAll(t, s, "x")
	assert.Equal(t, []membership.Member{{UID: 3, Nickname: "Cy"}, {UID: 4}}, got)
}

func testGroups(t *testing.T, ctx context.Context, s Store) {
	res := storetest.MustWrite(t, s, SetGroup("admins", "Admins", "e1"))
	g, ok, err := s.Group(ctx, "admins", nil)
	require.NoError(t, err)
	require.True(t, ok, "a group with attributes exists with no member")
	assert.Equal(t, directory.GroupRecord{ID: "admins", Attributes: account.GroupAttributes{DisplayName: "Admins", ExternalID: "e1"},
		HasAttributes: true, Created: g.Created, Modified: g.Modified, Revision: res.Revision}, g)
	assert.False(t, g.Created.IsZero())
	assert.Equal(t, res.Revision, storetest.Revision(t, s, "admins"), "its revision is the group's")
	sizes, _ := storetest.Groups(t, s, membership.GroupsOptions{})
	assert.Equal(t, []membership.GroupSize{{ID: "admins"}}, sizes, "Groups lists it")
	_, err = s.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "admins", Users: storetest.UsersOf(1), If: membership.Precondition{Empty: true}})
	assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err), "it is not empty")
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpAdd, GroupID: "admins", Users: storetest.UsersOf(1), If: membership.Precondition{Exists: true}})
	storetest.MustWrite(t, s, SetGroup("new", "New", "")) // a create with If-None-Match: *
	w := SetGroup("new", "Other", "")
	w.If = membership.Precondition{Empty: true}
	_, err = s.Write(ctx, w)
	assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err), "it exists")

	same := storetest.MustWrite(t, s, SetGroup("admins", "Admins", "e1"))
	assert.Equal(t, storetest.Revision(t, s, "admins"), same.Revision, "attributes set as they are: no change")
	res = storetest.MustWrite(t, s, SetGroup("admins", "Administrators", ""))
	got, _ := storetest.ListAll(t, s, "admins")
	assert.Equal(t, []membership.Member{{UID: 1}}, got, "a rename keeps the members")
	g, _, err = s.Group(ctx, "admins", nil)
	require.NoError(t, err)
	assert.Equal(t, account.GroupAttributes{DisplayName: "Administrators"}, g.Attributes)
	assert.Equal(t, res.Revision, g.Revision)

	// Removing every member leaves a group with attributes; deleting it
	// takes them too.
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpRemove, GroupID: "admins", UIDs: []membership.UID{1}})
	_, ok, err = s.Group(ctx, "admins", nil)
	require.NoError(t, err)
	assert.True(t, ok)
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpDeleteGroup, GroupID: "admins"})
	_, ok, err = s.Group(ctx, "admins", nil)
	require.NoError(t, err)
	assert.False(t, ok, "deleted")

	// A group without attributes has its id for display name.
	storetest.MustAdd(t, s, "plain", storetest.UsersOf(2))
	g, _, err = s.Group(ctx, "plain", func(total int, ms iter.Seq[membership.Member]) {
		assert.Equal(t, 1, total)
		assert.Equal(t, []membership.Member{{UID: 2}}, slices.Collect(ms))
	})
	require.NoError(t, err)
	assert.Equal(t, directory.GroupRecord{ID: "plain", Attributes: account.GroupAttributes{DisplayName: "plain"}, Revision: g.Revision, Members: 1}, g)

	// A batch sets attributes and members in one change.
	b, err := s.Batch(ctx, membership.Batch{Writes: []membership.Write{SetGroup("team", "Team", "t"),
		{Op: membership.OpAdd, GroupID: "team", Users: storetest.UsersOf(5, 6)}, {Op: membership.OpDeleteGroup, GroupID: "new"}}})
	require.NoError(t, err)
	changes := storetest.AllChanges(t, s, b.Revision-1)
	require.Len(t, changes, 1)
	require.Len(t, changes[0].Changes, 3)
	assert.Equal(t, membership.Change{Op: membership.OpSetGroup, GroupID: "team", GroupAttributes: &account.GroupAttributes{DisplayName: "Team", ExternalID: "t"}}, changes[0].Changes[0])
	assert.Equal(t, membership.Change{Op: membership.OpDeleteGroup, GroupID: "new"}, changes[0].Changes[2])
	_, ok, err = s.Group(ctx, "new", nil)
	require.NoError(t, err)
	assert.False(t, ok)
}

// records reads what q selects: its total and the ids of its page.
func records(t *testing.T, s Store, q directory.GroupQuery) (int, []string) {
	t.Helper()
	var total int
	ids := []string{}
	require.NoError(t, s.GroupRecords(context.Background(), q, func(n int, gs iter.Seq[directory.GroupRecord]) {
		total = n
		for g := range gs {
			ids = append(ids, g.ID)
		}
	}))
	return total, ids
}

// users reads what q selects: its total and the uids of its page.
func users(t *testing.T, s Store, q directory.UserQuery) (int, []membership.UID) {
	t.Helper()
	var total int
	uids := []membership.UID{}
	require.NoError(t, s.Users(context.Background(), q, func(n int, us iter.Seq[directory.UserRecord]) {
		total = n
		for u := range us {
			uids = append(uids, u.UID)
		}
	}))
	return total, uids
}

func testQueries(t *testing.T, ctx context.Context, s Store) {
	for i, name := range []string{"a", "B", "c", "d", "é"} {
		ext := ""
		if i%2 == 0 {
			ext = "even"
		}
		storetest.MustWrite(t, s, SetUser(membership.UID(10*(i+1)), account.Account{UserName: name, ExternalID: ext, Active: true}, membership.Precondition{}))
	}
	for _, tt := range []struct {
		q     directory.UserQuery
		total int
		want  []membership.UID
	}{
		{directory.UserQuery{Limit: 10}, 5, []membership.UID{10, 20, 30, 40, 50}},
		{directory.UserQuery{Offset: 1, Limit: 2}, 5, []membership.UID{20, 30}},
		{directory.UserQuery{Offset: 4, Limit: 2}, 5, []membership.UID{50}},
		{directory.UserQuery{Offset: 9, Limit: 2}, 5, []membership.UID{}},
		{directory.UserQuery{UserName: "b", Limit: 10}, 1, []membership.UID{20}},
		{directory.UserQuery{UserName: "É", Limit: 10}, 1, []membership.UID{50}},
		{directory.UserQuery{UserName: "z", Limit: 10}, 0, []membership.UID{}},
		{directory.UserQuery{ExternalID: "even", Limit: 10}, 3, []membership.UID{10, 30, 50}},
		{directory.UserQuery{ExternalID: "even", Offset: 1, Limit: 1}, 3, []membership.UID{30}},
	} {
		total, got := users(t, s, tt.q)
		assert.Equal(t, tt.total, total, "%+v", tt.q)
		assert.Equal(t, tt.want, got, "%+v", tt.q)
	}

	storetest.MustWrite(t, s, SetGroup("g1", "Same", "x"))
	storetest.MustWrite(t, s, SetGroup("g2", "Same", ""))
	storetest.MustWrite(t, s, SetGroup("g3", "Other", "x"))
	storetest.MustAdd(t, s, "Same", storetest.UsersOf(1))
	storetest.MustAdd(t, s, "g0", storetest.UsersOf(1))
	for _, tt := range []struct {
		q     directory.GroupQuery
		total int
		want  []string
	}{
		{directory.GroupQuery{Limit: 10}, 5, []string{"Same", "g0", "g1", "g2", "g3"}},
		{directory.GroupQuery{Offset: 2, Limit: 2}, 5, []string{"g1", "g2"}},
		{directory.GroupQuery{Offset: 5, Limit: 2}, 5, []string{}},
		{directory.GroupQuery{DisplayName: "Same", Limit: 10}, 3, []string{"Same", "g1", "g2"}},
		{directory.GroupQuery{DisplayName: "Same", Offset: 1, Limit: 1}, 3, []string{"g1"}},
		{directory.GroupQuery{DisplayName: "same", Limit: 10}, 0, []string{}},
		{directory.GroupQuery{DisplayName: "g0", Limit: 10}, 1, []string{"g0"}},
		{directory.GroupQuery{DisplayName: "g1", Limit: 10}, 0, []string{}},
		{directory.GroupQuery{ExternalID: "x", Limit: 10}, 2, []string{"g1", "g3"}},
	} {
		total, got := records(t, s, tt.q)
		assert.Equal(t, tt.total, total, "%+v", tt.q)
		assert.Equal(t, tt.want, got, "%+v", tt.q)
	}
	storetest.MustWrite(t, s, SetGroup("g1", "Renamed", ""))
	_, got := records(t, s, directory.GroupQuery{ExternalID: "x", Limit: 10})
	assert.Equal(t, []string{"g3"}, got, "the index follows a rename")
}

func testFollower(t *testing.T, ctx context.Context, s Store) {
	f := storetest.NewFollower()
	groups := []string{"p", "q"}
	for _, g := range groups {
		require.NoError(t, f.Relist(s, g))
	}
	from := storetest.Latest(t, s)
	storetest.MustWrite(t, s, SetUser(1, account.Account{UserName: "one", DisplayName: "One", Active: true}, membership.Precondition{}))
	storetest.MustAdd(t, s, "p", storetest.UsersOf(1, 2))
	storetest.MustAdd(t, s, "q", []membership.User{{UID: 1}, storetest.Nicknamed(3, "Three")})
	storetest.MustWrite(t, s, SetUser(1, account.Account{UserName: "one", DisplayName: "Uno", Active: true}, membership.Precondition{}))
	storetest.MustWrite(t, s, SetGroup("p", "Pee", ""))
	storetest.MustWrite(t, s, SetUser(1, account.Account{UserName: "one", DisplayName: "Uno", Active: false}, membership.Precondition{}))
	storetest.MustWrite(t, s, SetUser(3, account.Account{UserName: "three", Active: true}, membership.Precondition{}))
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpDeleteUser, UIDs: []membership.UID{3}})
	storetest.MustAdd(t, s, "q", storetest.UsersOf(4))
	f.ApplyAll(storetest.AllChanges(t, s, from))
	for _, g := range groups {
		got, _ := storetest.ListAll(t, s, g)
		assert.Equal(t, got, f.ListOf(g), "group %s", g)
	}
}

func testRaces(t *testing.T, _ context.Context, s Store) {
	const racers = 8
	sameName := make([]membership.Write, racers) // each its own uid, all the same user name
	sameUID := make([]membership.Write, racers)  // all the same free uid, each its own user name
	for i := range racers {
		sameName[i] = SetUser(membership.UID(100+i), account.Account{UserName: "same", Active: true}, membership.Precondition{Empty: true})
		sameUID[i] = SetUser(200, account.Account{UserName: fmt.Sprintf("u%d", i), Active: true}, membership.Precondition{Empty: true})
	}
	storetest.OneWinner(t, storetest.WriteAtOnce(s, sameName), membership.CodeUserNameTaken)
	total, _ := users(t, s, directory.UserQuery{UserName: "SAME", Limit: 10})
	assert.Equal(t, 1, total, "one account has the user name")
	storetest.OneWon(t, storetest.WriteAtOnce(s, sameUID))
}
