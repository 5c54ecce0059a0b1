package memory

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// Check foretells Write: for each write, on a store in a known state, what
// Check says is what Write then does (the same error, or the same revision
// and nothing changed, or a change).
func TestCheckForetellsWrite(t *testing.T) {
	ann := membership.User{UID: 1, Nickname: "Ann", HasNickname: true}
	bo := membership.User{UID: 2}
	// fill makes g = {1 Ann, 2} at revision 2, h = {2} at revision 3, and
	// deletes d at revision 5: the latest revision is 5.
	fill := func(t *testing.T) *Store {
		m := New()
		for _, w := range []membership.Write{
			{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{ann}},
			{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{bo}},
			{Op: membership.OpAdd, GroupID: "h", Users: []membership.User{bo}},
			{Op: membership.OpAdd, GroupID: "d", Users: []membership.User{{UID: 7}}},
			{Op: membership.OpDeleteGroup, GroupID: "d"},
		} {
			_, err := m.Write(context.Background(), w)
			require.NoError(t, err)
		}
		require.Equal(t, membership.Revision(5), m.LatestRevision())
		return m
	}
	revs := func(rs ...membership.Revision) membership.Precondition {
		return membership.Precondition{Revisions: rs}
	}
	for _, tt := range []struct {
		name        string
		w           membership.Write
		wantChanges bool
		wantErr     bool // PreconditionFailed
	}{
		{name: "add of members as they are", w: membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{bo, ann, {UID: 1}}}},
		{name: "add of no one", w: membership.Write{Op: membership.OpAdd, GroupID: "new"}},
		{name: "add of a new member", w: membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 3}}}, wantChanges: true},
		{name: "add to a new group", w: membership.Write{Op: membership.OpAdd, GroupID: "new", Users: []membership.User{bo}}, wantChanges: true},
		{name: "add of a new nickname", w: membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 2, Nickname: "Bo", HasNickname: true}}}, wantChanges: true},
		{name: "add that clears a nickname", w: membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1, HasNickname: true}}}, wantChanges: true},
		{name: "remove of non-members", w: membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{3, 4}}},
		{name: "remove from an empty group", w: membership.Write{Op: membership.OpRemove, GroupID: "d", UIDs: []membership.UID{7}}},
		{name: "remove of a member", w: membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{3, 2}}, wantChanges: true},
		{name: "replace by the same", w: membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{bo, {UID: 1}, bo}}},
		{name: "replace by the same, nickname too", w: membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{ann, bo}}},
		{name: "replace of an empty group by no one", w: membership.Write{Op: membership.OpReplace, GroupID: "d"}},
		{name: "replace by fewer", w: membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{ann}}, wantChanges: true},
		{name: "replace by more", w: membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{ann, bo, {UID: 3}}}, wantChanges: true},
		{name: "replace by as many others", w: membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{ann, {UID: 3}}}, wantChanges: true},
		{name: "replace by no one", w: membership.Write{Op: membership.OpReplace, GroupID: "g"}, wantChanges: true},
		{name: "replace that changes a nickname", w: membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{{UID: 1, Nickname: "Al", HasNickname: true}, bo}}, wantChanges: true},
		{name: "delete of an empty group", w: membership.Write{Op: membership.OpDeleteGroup, GroupID: "d"}},
		{name: "delete of a group", w: membership.Write{Op: membership.OpDeleteGroup, GroupID: "h"}, wantChanges: true},
		{name: "remove_user of a user in no group", w: membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{7}}},
		{name: "remove_user of a member", w: membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{2}}, wantChanges: true},
		{name: "if-match that holds", w: membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 3}}, If: revs(9, 2)}, wantChanges: true},
		{name: "if-match that holds, nothing to change", w: membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{3}, If: revs(2)}},
		{name: "if-match that fails", w: membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 3}}, If: revs(1, 3)}, wantErr: true},
		{name: "if-match that fails, nothing to change", w: membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{3}, If: revs(3)}, wantErr: true},
		{name: "if-match of an empty group", w: membership.Write{Op: membership.OpReplace, GroupID: "d", Users: []membership.User{bo}, If: revs(5)}, wantChanges: true},
		{name: "if-match * of an empty group", w: membership.Write{Op: membership.OpDeleteGroup, GroupID: "d", If: membership.Precondition{Exists: true}}, wantErr: true},
		{name: "if-match * of a group", w: membership.Write{Op: membership.OpDeleteGroup, GroupID: "g", If: membership.Precondition{Exists: true}}, wantChanges: true},
		{name: "if-none-match * of a group", w: membership.Write{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{bo}, If: membership.Precondition{Empty: true}}, wantErr: true},
		{name: "if-none-match * of an empty group", w: membership.Write{Op: membership.OpReplace, GroupID: "new", Users: []membership.User{bo}, If: membership.Precondition{Empty: true}}, wantChanges: true},
		{name: "if-none-match * of an empty group, nothing to change", w: membership.Write{Op: membership.OpReplace, GroupID: "new", If: membership.Precondition{Empty: true}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := fill(t)
			rev, changes, err := m.Check(tt.w)
			if tt.wantErr {
				require.Error(t, err)
				assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err))
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantChanges, changes)

			res, werr := m.Write(context.Background(), tt.w)
			switch {
			case tt.wantErr:
				assert.Equal(t, err, werr, "Write fails as Check said")
				assert.Equal(t, membership.Revision(5), m.LatestRevision())
			case tt.wantChanges:
				require.NoError(t, werr)
				assert.Equal(t, membership.Revision(6), res.Revision, "Write changes, as Check said")
			default:
				require.NoError(t, werr)
				assert.Equal(t, membership.Result{Revision: rev}, res, "Write changes nothing and reports the revision Check did")
				assert.Equal(t, membership.Revision(5), m.LatestRevision())
			}
		})
	}
}

func TestCheckRefusesWritesWriteRefuses(t *testing.T) {
	m := New()
	for _, w := range []membership.Write{
		{Op: "rename", GroupID: "g"},
		{Op: membership.OpRemoveUser, UIDs: []membership.UID{1, 2}},
		{Op: membership.OpRemoveUser},
	} {
		_, _, err := m.Check(w)
		assert.Error(t, err, "%+v", w)
		_, werr := m.Write(context.Background(), w)
		assert.Error(t, werr, "%+v", w)
	}
}
