package memberstest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// testWrites checks the writes of the group as a whole (replace, delete a
// group, remove a user everywhere), preconditions, and Groups.
func testWrites(t *testing.T, newStore func(t *testing.T) membership.Store) {
	storetest.Run(t, newStore, []storetest.Case[membership.Store]{
		{Name: "replace makes the group exactly the users, in one revision", Test: testReplace},
		{Name: "replace that changes nothing takes no revision", Test: testReplaceUnchanged},
		{Name: "a write that names a user twice changes nothing when the last nickname is the current one", Test: testUserNamedTwice},
		{Name: "replace that changes only a nickname takes a revision", Test: testReplaceNickname},
		{Name: "replace with no users empties the group; of an unknown group creates it", Test: testReplaceWithNoUsers},
		{Name: "delete group removes every member in one revision", Test: testDeleteGroup},
		{Name: "remove user leaves every group in one revision and is forgotten", Test: testRemoveUser},
	})
	t.Run("a precondition that does not hold changes nothing and names the revision", func(t *testing.T) {
		testPreconditionFails(t, newStore)
	})
	storetest.Run(t, newStore, []storetest.Case[membership.Store]{
		{Name: "exists and empty preconditions", Test: testExistsAndEmpty},
		{Name: "of writers racing with the same precondition exactly one wins", Test: testRacingPreconditions},
		{Name: "groups are listed in byte order, paged, by prefix, with sizes and totals", Test: testGroupsListed},
		{Name: "paging through many groups lists each once, in order", Test: testPagingManyGroups},
		{Name: "the feed reports each whole-group write as one change", Test: testWholeGroupChanges},
		{Name: "a follower of the feed reproduces every list after whole-group writes", Test: testFollowerAfterWholeGroupWrites},
	})
}

func testReplace(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustAdd(t, s, "g", []membership.User{storetest.Nicknamed(1, "Ann"), {UID: 2}, storetest.Nicknamed(3, "Cy")})
	storetest.MustAdd(t, s, "other", []membership.User{{UID: 3}})
	before := storetest.Latest(t, s)
	res := storetest.MustWrite(t, s, membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{{UID: 2}, storetest.Nicknamed(4, "Dee"), {UID: 4}}})
	assert.Equal(t, membership.Result{Count: 1, Removed: 2, Revision: before + 1}, res)
	got, rev := storetest.ListAll(t, s, "g")
	assert.Equal(t, []membership.Member{{UID: 2}, {UID: 4, Nickname: "Dee"}}, got)
	assert.Equal(t, before+1, rev)
	// 1 is in no group: forgotten; 3 is still in other: kept.
	storetest.MustAdd(t, s, "h", storetest.UsersOf(1, 3))
	got, _ = storetest.ListAll(t, s, "h")
	assert.Equal(t, []membership.Member{{UID: 1}, {UID: 3, Nickname: "Cy"}}, got)
	storetest.ReverseAgrees(t, s, []string{"g", "h", "other"}, []membership.UID{1, 2, 3, 4})
}

func testReplaceUnchanged(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustAdd(t, s, "g", []membership.User{storetest.Nicknamed(1, "Ann"), {UID: 2}})
	rev := storetest.Revision(t, s, "g")
	before := storetest.Latest(t, s)
	res := storetest.MustWrite(t, s, membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{{UID: 2}, storetest.Nicknamed(1, "Ann")}})
	assert.Equal(t, membership.Result{Revision: rev}, res)
	assert.Equal(t, before, storetest.Latest(t, s))
}

func testUserNamedTwice(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustAdd(t, s, "g", []membership.User{{UID: 1}, storetest.Nicknamed(2, "B")})
	rev := storetest.Revision(t, s, "g")
	before := storetest.Latest(t, s)
	twice := []membership.User{{UID: 1}, storetest.Nicknamed(2, "X"), storetest.Nicknamed(2, "B")}
	res := storetest.MustWrite(t, s, membership.Write{Op: membership.OpReplace, GroupID: "g", Users: twice})
	assert.Equal(t, membership.Result{Revision: rev}, res)
	res = storetest.MustWrite(t, s, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: twice})
	assert.Equal(t, membership.Result{Revision: rev}, res)
	assert.Equal(t, before, storetest.Latest(t, s), "no revision taken")
}

func testReplaceNickname(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustAdd(t, s, "g", []membership.User{storetest.Nicknamed(1, "Ann")})
	before := storetest.Latest(t, s)
	res := storetest.MustWrite(t, s, membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{storetest.Nicknamed(1, "Anne")}})
	assert.Equal(t, membership.Result{Revision: before + 1}, res)
	got, _ := storetest.ListAll(t, s, "g")
	assert.Equal(t, []membership.Member{{UID: 1, Nickname: "Anne"}}, got)
}

func testReplaceWithNoUsers(t *testing.T, ctx context.Context, s membership.Store) {
	res := storetest.MustWrite(t, s, membership.Write{Op: membership.OpReplace, GroupID: "new", Users: storetest.UsersOf(5, 6)})
	assert.Equal(t, 2, res.Count)
	storetest.MustAdd(t, s, "g", storetest.UsersOf(1, 2, 3))
	res = storetest.MustWrite(t, s, membership.Write{Op: membership.OpReplace, GroupID: "g"})
	assert.Equal(t, 3, res.Removed)
	got, _ := storetest.ListAll(t, s, "g")
	assert.Empty(t, got)
	groups, total := storetest.Groups(t, s, membership.GroupsOptions{})
	assert.Equal(t, []membership.GroupSize{{ID: "new", Members: 2}}, groups)
	assert.Equal(t, 1, total)
	before := storetest.Latest(t, s)
	res = storetest.MustWrite(t, s, membership.Write{Op: membership.OpReplace, GroupID: "g"})
	assert.Equal(t, membership.Result{Revision: res.Revision}, res)
	assert.Equal(t, before, storetest.Latest(t, s), "emptying an empty group changes nothing")
}

func testDeleteGroup(t *testing.T, ctx context.Context, s membership.Store) {
	var big []membership.User
	for uid := membership.UID(1); uid <= 300; uid++ {
		big = append(big, storetest.Nicknamed(uid, fmt.Sprint("n", uid)))
	}
	storetest.MustAdd(t, s, "big", big)
	storetest.MustAdd(t, s, "other", storetest.UsersOf(7, 1000))
	before := storetest.Latest(t, s)
	res := storetest.MustWrite(t, s, membership.Write{Op: membership.OpDeleteGroup, GroupID: "big"})
	assert.Equal(t, membership.Result{Count: 300, Revision: before + 1}, res)
	got, rev := storetest.ListAll(t, s, "big")
	assert.Empty(t, got)
	assert.Equal(t, before+1, rev)
	// 7 is still in other, with its nickname; 8 is forgotten.
	storetest.MustAdd(t, s, "again", storetest.UsersOf(7, 8))
	got, _ = storetest.ListAll(t, s, "again")
	assert.Equal(t, []membership.Member{{UID: 7, Nickname: "n7"}, {UID: 8}}, got)
	storetest.ReverseAgrees(t, s, []string{"again", "big", "other"}, []membership.UID{1, 7, 8, 300, 1000})

	before = storetest.Latest(t, s)
	res = storetest.MustWrite(t, s, membership.Write{Op: membership.OpDeleteGroup, GroupID: "big"})
	assert.Equal(t, 0, res.Count)
	assert.Equal(t, before, storetest.Latest(t, s), "deleting an empty group changes nothing")
}

func testRemoveUser(t *testing.T, ctx context.Context, s membership.Store) {
	for _, g := range []string{"a", "b", "c"} {
		storetest.MustAdd(t, s, g, []membership.User{storetest.Nicknamed(9, "Nine"), {UID: 10}})
	}
	storetest.MustAdd(t, s, "solo", storetest.UsersOf(9))
	before := storetest.Latest(t, s)
	res := storetest.MustWrite(t, s, membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{9}})
	assert.Equal(t, membership.Result{Count: 4, Revision: before + 1}, res)
	for _, g := range []string{"a", "b", "c"} {
		got, rev := storetest.ListAll(t, s, g)
		assert.Equal(t, []membership.Member{{UID: 10}}, got, g)
		assert.Equal(t, before+1, rev, g)
	}
	groups, _ := storetest.Groups(t, s, membership.GroupsOptions{})
	assert.Equal(t, []membership.GroupSize{{ID: "a", Members: 1}, {ID: "b", Members: 1}, {ID: "c", Members: 1}}, groups, "solo is gone")
	storetest.MustAdd(t, s, "a", storetest.UsersOf(9))
	got, _ := storetest.ListAll(t, s, "a")
	assert.Equal(t, []membership.Member{{UID: 9}, {UID: 10}}, got, "the nickname is forgotten")
	storetest.ReverseAgrees(t, s, []string{"a", "b", "c", "solo"}, []membership.UID{9, 10})

	before = storetest.Latest(t, s)
	res = storetest.MustWrite(t, s, membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{404}})
	assert.Equal(t, 0, res.Count)
	assert.Equal(t, before, storetest.Latest(t, s), "removing a user in no group changes nothing")
}

func testPreconditionFails(t *testing.T, newStore func(t *testing.T) membership.Store) {
	ctx := context.Background()
	for _, op := range []membership.Op{membership.OpAdd, membership.OpRemove, membership.OpReplace, membership.OpDeleteGroup} {
		t.Run(string(op), func(t *testing.T) {
			s := newStore(t)
			storetest.MustAdd(t, s, "g", storetest.UsersOf(1, 2))
			stale := storetest.Revision(t, s, "g")
			storetest.MustAdd(t, s, "g", storetest.UsersOf(3))
			current := storetest.Revision(t, s, "g")
			w := membership.Write{Op: op, GroupID: "g", Users: storetest.UsersOf(1, 5), UIDs: []membership.UID{1}}
			before := storetest.Latest(t, s)
			for _, cond := range []membership.Precondition{
				{Revisions: []membership.Revision{stale}},
				{Revisions: []membership.Revision{stale, current + 100}},
				{Empty: true},
			} {
				w.If = cond
				_, err := s.Write(ctx, w)
				var e *membership.Error
				require.ErrorAs(t, err, &e, "%+v", cond)
				assert.Equal(t, membership.CodePreconditionFailed, e.Code)
				assert.Equal(t, current, e.Revision)
			}
			got, _ := storetest.ListAll(t, s, "g")
			assert.Equal(t, []membership.Member{{UID: 1}, {UID: 2}, {UID: 3}}, got)
			assert.Equal(t, before, storetest.Latest(t, s))

			w.If = membership.Precondition{Revisions: []membership.Revision{stale, current}, Exists: true}
			res := storetest.MustWrite(t, s, w)
			assert.Equal(t, before+1, res.Revision)
		})
	}
}

func testExistsAndEmpty(t *testing.T, ctx context.Context, s membership.Store) {
	_, err := s.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: storetest.UsersOf(1), If: membership.Precondition{Exists: true}})
	assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err), "an empty group does not exist")
	res := storetest.MustWrite(t, s, membership.Write{Op: membership.OpReplace, GroupID: "g", Users: storetest.UsersOf(1), If: membership.Precondition{Empty: true}})
	assert.Equal(t, 1, res.Count, "If-None-Match: * creates the group")
	_, err = s.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: "g", Users: storetest.UsersOf(2), If: membership.Precondition{Empty: true}})
	assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err), "but only once")
	res = storetest.MustWrite(t, s, membership.Write{Op: membership.OpDeleteGroup, GroupID: "g", If: membership.Precondition{Exists: true}})
	assert.Equal(t, 1, res.Count)
	got, _ := storetest.ListAll(t, s, "g")
	assert.Empty(t, got)
}

func testRacingPreconditions(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustAdd(t, s, "g", storetest.UsersOf(1))
	rev := storetest.Revision(t, s, "g")
	writes := make([]membership.Write, 16)
	for i := range writes {
		writes[i] = membership.Write{Op: membership.OpReplace, GroupID: "g", Users: storetest.UsersOf(membership.UID(100 + i)),
			If: membership.Precondition{Revisions: []membership.Revision{rev}}}
		if i%2 == 1 {
			writes[i].Op = membership.OpAdd
		}
	}
	storetest.OneWon(t, storetest.WriteAtOnce(s, writes))
	got, _ := storetest.ListAll(t, s, "g")
	assert.LessOrEqual(t, len(got), 2)
	assert.Equal(t, rev+1, storetest.Latest(t, s))
}

func testGroupsListed(t *testing.T, ctx context.Context, s membership.Store) {
	groups, total := storetest.Groups(t, s, membership.GroupsOptions{})
	assert.Empty(t, groups)
	assert.Equal(t, 0, total)
	sizes := map[string]int{"a": 1, "ab": 2, "abc": 3, "b": 1, "b\u00e9": 2, "c": 1}
	for id, n := range sizes {
		storetest.MustAdd(t, s, id, storetest.UserRange(1, n))
	}
	want := []membership.GroupSize{{ID: "a", Members: 1}, {ID: "ab", Members: 2}, {ID: "abc", Members: 3}, {ID: "b", Members: 1}, {ID: "b\u00e9", Members: 2}, {ID: "c", Members: 1}}
	groups, total = storetest.Groups(t, s, membership.GroupsOptions{})
	assert.Equal(t, want, groups)
	assert.Equal(t, 6, total)
	tests := []struct {
		opts      membership.GroupsOptions
		want      []membership.GroupSize
		wantTotal int
	}{
		{membership.GroupsOptions{Prefix: "ab"}, want[1:3], 2},
		{membership.GroupsOptions{Prefix: "a", After: "ab"}, want[2:3], 3},
		{membership.GroupsOptions{Prefix: "b"}, want[3:5], 2},
		{membership.GroupsOptions{Prefix: "b\u00e9"}, want[4:5], 1},
		{membership.GroupsOptions{Prefix: "abcd"}, []membership.GroupSize{}, 0},
		{membership.GroupsOptions{Prefix: "d"}, []membership.GroupSize{}, 0},
		{membership.GroupsOptions{After: "abc", Limit: 2}, want[3:5], 6},
		{membership.GroupsOptions{After: "aa", Limit: 1}, want[1:2], 6},
		{membership.GroupsOptions{After: "c"}, []membership.GroupSize{}, 6},
		{membership.GroupsOptions{Prefix: "b", After: "a"}, want[3:5], 2},
		{membership.GroupsOptions{Prefix: "a", After: "b"}, []membership.GroupSize{}, 3},
	}
	for _, tt := range tests {
		got, total := storetest.Groups(t, s, tt.opts)
		assert.Equal(t, tt.want, got, "%+v", tt.opts)
		assert.Equal(t, tt.wantTotal, total, "%+v", tt.opts)
	}
	_, err := storetest.Remove(ctx, s, "abc", []membership.UID{1, 2, 3})
	require.NoError(t, err)
	storetest.MustAdd(t, s, "ab", storetest.UsersOf(9))
	groups, total = storetest.Groups(t, s, membership.GroupsOptions{Prefix: "a"})
	assert.Equal(t, []membership.GroupSize{{ID: "a", Members: 1}, {ID: "ab", Members: 3}}, groups)
	assert.Equal(t, 2, total)
}

func testPagingManyGroups(t *testing.T, ctx context.Context, s membership.Store) {
	var ids []string
	for i := range 300 {
		id := fmt.Sprintf("g%03d", (i*7)%300)
		ids = append(ids, id)
		storetest.MustAdd(t, s, id, storetest.UsersOf(membership.UID(i+1)))
	}
	slices.Sort(ids)
	var got []string
	after := ""
	for {
		page, total := storetest.Groups(t, s, membership.GroupsOptions{After: after, Limit: 7})
		assert.Equal(t, 300, total)
		if len(page) == 0 {
			break
		}
		for _, g := range page {
			got = append(got, g.ID)
		}
		after = page[len(page)-1].ID
	}
	assert.Equal(t, ids, got)
}

func testWholeGroupChanges(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustAdd(t, s, "g", []membership.User{storetest.Nicknamed(1, "Ann"), {UID: 2}})
	storetest.MustAdd(t, s, "h", []membership.User{storetest.Nicknamed(5, "Eve")})
	start, since := storetest.Latest(t, s), time.Now()
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{{UID: 2}, {UID: 5}, storetest.Nicknamed(3, "Cy")}})
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{2}})
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpDeleteGroup, GroupID: "g"})
	got := storetest.Untimed(t, storetest.AllChanges(t, s, start), since)
	want := []membership.Change{
		{Revision: start + 1, Op: membership.OpReplace, GroupID: "g", UIDs: []membership.UID{2, 3, 5},
			Nicknames: []membership.Member{{UID: 3, Nickname: "Cy"}, {UID: 5, Nickname: "Eve"}}},
		{Revision: start + 2, Op: membership.OpRemoveUser, UIDs: []membership.UID{2}},
		{Revision: start + 3, Op: membership.OpDeleteGroup, GroupID: "g"},
	}
	assert.Equal(t, want, got)
}

func testFollowerAfterWholeGroupWrites(t *testing.T, _ context.Context, s membership.Store) {
	f := storetest.NewFollower()
	steps := []membership.Write{
		{Op: membership.OpAdd, GroupID: "a", Users: []membership.User{storetest.Nicknamed(1, "Ann"), storetest.Nicknamed(2, "Bo"), {UID: 3}}},
		{Op: membership.OpAdd, GroupID: "b", Users: []membership.User{{UID: 1}, storetest.Nicknamed(4, "Di")}},
		{Op: membership.OpReplace, GroupID: "a", Users: []membership.User{{UID: 3}, storetest.Nicknamed(4, "Dee"), {UID: 5}}},
		{Op: membership.OpRemoveUser, UIDs: []membership.UID{4}},
		{Op: membership.OpAdd, GroupID: "c", Users: []membership.User{{UID: 2}, {UID: 4}}},
		{Op: membership.OpDeleteGroup, GroupID: "b"},
		{Op: membership.OpAdd, GroupID: "c", Users: []membership.User{{UID: 1}}},
		{Op: membership.OpReplace, GroupID: "a"},
	}
	after := membership.Revision(0)
	for i, w := range steps {
		storetest.MustWrite(t, s, w)
		for _, c := range storetest.AllChanges(t, s, after) {
			f.Apply(c)
			after = c.Revision
		}
		for _, g := range []string{"a", "b", "c"} {
			want, _ := storetest.ListAll(t, s, g)
			assert.Equal(t, want, f.ListOf(g), "after step %d, group %s", i, g)
		}
	}
}
