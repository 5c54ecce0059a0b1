package nestingtest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
)

// revisionReads are the reads whose revisions testRevisions follows, by
// name, each of the same store.
func revisionReads(t *testing.T, n membership.Nesting) map[string]func() membership.Revision {
	ctx := context.Background()
	return map[string]func() membership.Revision{
		"members of top": func() membership.Revision {
			_, _, rev := storetest.TransitiveMembers(t, n, "top", membership.ListOptions{})
			pre, err := n.TransitiveRevision(ctx, "top")
			require.NoError(t, err)
			assert.Equal(t, rev, pre, "the transitive revision is the list's")
			return rev
		},
		"2's record in top": func() membership.Revision {
			_, _, ok, rev, err := n.TransitiveMember(ctx, "top", 2)
			require.NoError(t, err)
			require.True(t, ok)
			return rev
		},
		"groups below top": func() membership.Revision {
			_, _, rev := storetest.Subgroups(t, n, "top", membership.NestingListOptions{Transitive: true})
			return rev
		},
		"top's parents": func() membership.Revision {
			_, _, rev := storetest.Parents(t, n, "top", membership.NestingListOptions{})
			return rev
		},
		"leaf's parents": func() membership.Revision {
			_, _, rev := storetest.Parents(t, n, "leaf", membership.NestingListOptions{})
			return rev
		},
		"groups above leaf": func() membership.Revision {
			_, _, rev := storetest.Parents(t, n, "leaf", membership.NestingListOptions{Transitive: true})
			return rev
		},
		"2's groups": func() membership.Revision {
			_, _, rev := storetest.TransitiveGroups(t, n, 2, membership.GroupListOptions{})
			return rev
		},
	}
}

// testRevisions checks that every read of groups in groups answers at the
// revision of what it reads, its ETag: a write of anything else leaves it
// as it is, a write of what it reads moves it.
func testRevisions(t *testing.T, ctx context.Context, s store.Expiring) {
	t0 := storetest.InAnHour()
	add := func(group string, users ...membership.User) membership.Write {
		return membership.Write{Op: membership.OpAdd, GroupID: group, Users: users}
	}
	nickname := func(uid membership.UID, nick string) membership.User {
		return membership.User{UID: uid, Nickname: nick, HasNickname: true}
	}
	// outside > top > mid > leaf, top > hollow (no members); mid holds 1,
	// leaf 2, top 4; elsewhere holds 3, junk and junk2 9.
	for _, w := range []membership.Write{
		storetest.Nest("outside", "top"), storetest.Nest("top", "mid", "hollow"), storetest.Nest("mid", "leaf"),
		add("mid", membership.User{UID: 1}), add("leaf", nickname(2, "Two")), add("top", membership.User{UID: 4}),
		add("elsewhere", membership.User{UID: 3}), add("junk", membership.User{UID: 9}), add("junk2", membership.User{UID: 9}),
	} {
		storetest.MustWrite(t, s, w)
	}
	expiring := storetest.Nest("outside")
	expiring.Subgroups = []membership.Subgroup{storetest.NestedUntil("top", t0)}
	reads := revisionReads(t, s)
	for _, step := range []struct {
		name  string
		w     membership.Write
		moves []string
	}{
		{"a member of a group outside", add("elsewhere", membership.User{UID: 5}), nil},
		{"a group outside deleted", membership.Write{Op: membership.OpDeleteGroup, GroupID: "junk"}, nil},
		{"a nesting outside", storetest.Nest("elsewhere2", "elsewhere"), nil},
		{"a nesting above", storetest.Nest("over", "outside"), []string{"groups above leaf", "2's groups"}},
		{"another user of a group below", add("leaf", membership.User{UID: 6}), []string{"members of top"}},
		{"another user's nickname", add("elsewhere", nickname(3, "Three")), []string{"members of top"}},
		{"the user's nickname", add("leaf", nickname(2, "Deux")), []string{"members of top", "2's record in top"}},
		{"the end of the user's membership", add("leaf", storetest.ExpiresAt(2, t0)), []string{"members of top", "2's record in top"}},
		{"the user in a group outside", add("elsewhere", membership.User{UID: 2}), []string{"2's record in top", "2's groups"}},
		{"a nesting below", storetest.Nest("mid", "newsub"), []string{"members of top", "2's record in top", "groups below top"}},
		{"a member of the empty group below", add("hollow", membership.User{UID: 7}), []string{"members of top"}},
		{"the empty group below emptied again", membership.Write{Op: membership.OpRemove, GroupID: "hollow", UIDs: []membership.UID{7}}, []string{"members of top"}},
		{"another group outside deleted", membership.Write{Op: membership.OpDeleteGroup, GroupID: "junk2"}, nil},
		{"a group above the user's other group deleted", membership.Write{Op: membership.OpDeleteGroup, GroupID: "elsewhere2"}, []string{"2's groups"}},
		{"another parent of the user's group", storetest.Nest("p2", "leaf"), []string{"leaf's parents", "groups above leaf", "2's groups"}},
		{"the end of a nesting above", expiring, []string{"top's parents"}},
		{"a nesting above removed", storetest.NestingWrite(membership.OpRemoveGroups, "over", "outside"), []string{"groups above leaf", "2's groups"}},
	} {
		checkMoves(t, s, reads, step.name, step.w, step.moves)
	}
}

// checkMoves makes the write w, of the step name, and checks that it
// moves the revisions of the reads named in moves, and leaves the others'
// as they were.
func checkMoves(t *testing.T, s membership.Store, reads map[string]func() membership.Revision, name string, w membership.Write, moves []string) {
	t.Helper()
	before := map[string]membership.Revision{}
	for read, revision := range reads {
		before[read] = revision()
	}
	_, err := s.Write(context.Background(), w)
	require.NoError(t, err, name)
	for read, revision := range reads {
		if slices.Contains(moves, read) {
			assert.NotEqual(t, before[read], revision(), "%s moves %s", name, read)
		} else {
			assert.Equal(t, before[read], revision(), "%s leaves %s", name, read)
		}
	}
}

// testDirectoryRevisions checks that the directory's writes of a user (an
// account's display name, its deactivation, its deletion) move the
// revisions of the transitive reads that show the user, as a membership
// write does, and no other.
func testDirectoryRevisions(t *testing.T, ctx context.Context, s store.Expiring) {
	write := func(name string, w membership.Write) {
		_, err := s.Write(ctx, w)
		require.NoError(t, err, name)
	}
	add := func(group string, uids ...membership.UID) membership.Write {
		return membership.Write{Op: membership.OpAdd, GroupID: group, Users: storetest.UsersOf(uids...)}
	}
	setUser := func(uid membership.UID, name string, active bool) membership.Write {
		a := account.Account{UserName: fmt.Sprintf("user%d", uid), DisplayName: name, Active: active}
		return membership.Write{Op: membership.OpSetUser, UIDs: []membership.UID{uid}, Account: &a}
	}
	deleteUser := func(uid membership.UID) membership.Write {
		return membership.Write{Op: membership.OpDeleteUser, UIDs: []membership.UID{uid}}
	}
	// top > leaf; leaf holds 2, 3 and 6, other holds 2 and 5; elsewhere,
	// outside any nesting, holds 4.
	for _, w := range []membership.Write{
		storetest.Nest("top", "leaf"), add("leaf", 2, 3, 6), add("other", 2, 5), add("elsewhere", 4),
		setUser(2, "Two", true), setUser(3, "Three", true), setUser(4, "Four", true),
	} {
		write(string(w.Op), w)
	}
	reads := directoryReads(t, s)
	for _, step := range []struct {
		name  string
		w     membership.Write
		moves []string
	}{
		{"the account of a user outside, renamed", setUser(4, "Vier", true), []string{"members of top"}}, // every nickname moves a list
		{"the user's account, unchanged", setUser(2, "Two", true), nil},
		{"the user renamed", setUser(2, "Deux", true), []string{"members of top", "2's record in top"}},
		{"the user deactivated", setUser(2, "Deux", false), []string{"members of top", "2's record in top", "2's groups"}},
		{"the user deactivated again", setUser(2, "Deux", false), nil},
		{"the other user deleted", deleteUser(3), []string{"members of top", "3's record in top", "3's groups"}},
		{"a user without an account removed from every group", membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{6}}, []string{"members of top", "6's groups"}},
	} {
		checkMoves(t, s, reads, step.name, step.w, step.moves)
	}
}

// directoryReads returns the transitive reads of testDirectoryRevisions
// that show users 2, 3 and 6, each answering its revision.
func directoryReads(t *testing.T, s store.Expiring) map[string]func() membership.Revision {
	ctx := context.Background()
	return map[string]func() membership.Revision{
		"members of top": func() membership.Revision {
			_, _, rev := storetest.TransitiveMembers(t, s, "top", membership.ListOptions{})
			return rev
		},
		"2's record in top": func() membership.Revision {
			_, _, _, rev, err := s.TransitiveMember(ctx, "top", 2)
			require.NoError(t, err)
			return rev
		},
		"3's record in top": func() membership.Revision {
			_, _, _, rev, err := s.TransitiveMember(ctx, "top", 3)
			require.NoError(t, err)
			return rev
		},
		"2's groups": func() membership.Revision {
			_, _, rev := storetest.TransitiveGroups(t, s, 2, membership.GroupListOptions{})
			return rev
		},
		"3's groups": func() membership.Revision {
			_, _, rev := storetest.TransitiveGroups(t, s, 3, membership.GroupListOptions{})
			return rev
		},
		"6's groups": func() membership.Revision {
			_, _, rev := storetest.TransitiveGroups(t, s, 6, membership.GroupListOptions{})
			return rev
		},
	}
}

// testAGroupMadeByItsAttributes checks that a group made again by its
// attributes alone (set_group), after it was deleted, answers a
// transitive read at its making, not at a revision an answer of the group
// before gave.
func testAGroupMadeByItsAttributes(t *testing.T, ctx context.Context, s store.Expiring) {
	for _, w := range []membership.Write{
		storetest.Nest("top", "leaf"),
		{Op: membership.OpAdd, GroupID: "leaf", Users: []membership.User{{UID: 2}}},
	} {
		storetest.MustWrite(t, s, w)
	}
	_, _, ok, before, err := s.TransitiveMember(ctx, "top", 2)
	require.NoError(t, err)
	require.True(t, ok)
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpDeleteGroup, GroupID: "top"})
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpSetGroup, GroupID: "top", Group: &account.GroupAttributes{DisplayName: "Top"}})
	_, _, ok, after, err := s.TransitiveMember(ctx, "top", 2)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.NotEqual(t, before, after, "2's record in top, a member before, none now")
}

// testNonMemberRevision checks that TransitiveMember answers "not a
// member" at the revision of what it reads, as it answers a member: the
// latest change of the nestings below the group and of the user's groups,
// which a change that could make the user a member moves, and a change of
// anything else below the group does not.
func testNonMemberRevision(t *testing.T, ctx context.Context, s store.Expiring) {
	write := func(name string, w membership.Write) membership.Revision {
		res, err := s.Write(ctx, w)
		require.NoError(t, err, name)
		return res.Revision
	}
	add := func(group string, us ...membership.User) membership.Write {
		return membership.Write{Op: membership.OpAdd, GroupID: group, Users: us}
	}
	remove := func(group string, uid membership.UID) membership.Write {
		return membership.Write{Op: membership.OpRemove, GroupID: group, UIDs: []membership.UID{uid}}
	}
	// top > mid > leaf; leaf holds 2, design (outside) holds 3.
	for _, w := range []membership.Write{
		storetest.Nest("top", "mid"), storetest.Nest("mid", "leaf"),
		add("leaf", membership.User{UID: 2}), add("design", membership.User{UID: 3}),
	} {
		write(string(w.Op), w)
	}
	read := func() (bool, membership.Revision) {
		_, _, ok, rev, err := s.TransitiveMember(ctx, "top", 3)
		require.NoError(t, err)
		return ok, rev
	}
	ok, at := read()
	require.False(t, ok, "3 is in no group below top")
	for _, step := range []struct {
		name   string
		w      membership.Write
		member bool // after the write
		moves  bool
	}{
		{"another user of a group below", add("leaf", membership.User{UID: 5}), false, false},
		{"another user's nickname below", add("leaf", membership.User{UID: 2, Nickname: "Two", HasNickname: true}), false, false},
		{"a member of a group outside", add("junk", membership.User{UID: 9}), false, false},
		{"a nesting outside", storetest.Nest("other", "junk"), false, false},
		{"a nesting above", storetest.Nest("outside", "top"), false, false},
		{"the user's group nested below", storetest.Nest("mid", "design"), true, true},
		{"that nesting removed", storetest.NestingWrite(membership.OpRemoveGroups, "mid", "design"), false, true},
		{"another user of a group below, again", add("mid", membership.User{UID: 6}), false, false},
		{"the user added below", add("leaf", membership.User{UID: 3}), true, true},
		{"the user removed below", remove("leaf", 3), false, true},
		{"a nesting below of no one of the user's", storetest.Nest("leaf", "empty"), false, true},
	} {
		rev := write(step.name, step.w)
		ok, now := read()
		require.Equal(t, step.member, ok, "after %s, 3 is a member of top", step.name)
		if step.moves {
			assert.Equal(t, rev, now, "%s: the answer is at its revision", step.name)
			at = now
		} else {
			assert.Equal(t, at, now, "%s leaves 3's answer in top", step.name)
		}
	}
}
