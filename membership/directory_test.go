package membership_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
	"example.com/groupmembership/membership/groupids"
	"example.com/groupmembership/membership/scope"
)

// setUser returns the write of uid's account a.
func setUser(a account.Account, uids ...membership.UID) membership.Write {
	return membership.Write{Op: membership.OpSetUser, UIDs: uids, Account: &a}
}

// The directory's writes are validated whole before the store sees them,
// and held to the request's scope: a user's on every group, a group's
// attributes on the group.
func TestServiceValidatesTheDirectorysWrites(t *testing.T) {
	ctx := context.Background()
	ann := account.Account{UserName: "ann", Active: true}
	group := func(id string) membership.Write {
		return membership.Write{Op: membership.OpSetGroup, GroupID: id, Group: &account.GroupAttributes{DisplayName: "Admins"}}
	}
	writer := scope.With(ctx, scope.New("sync-job", scope.Write, groupids.New(nil, []string{"team-a/"})))
	tests := []struct {
		name string
		ctx  context.Context
		w    membership.Write
		want membership.Code // "": the store gets it
	}{
		{"an account", ctx, setUser(ann, 1), ""},
		{"an account of no user", ctx, setUser(ann), membership.CodeInvalidUID},
		{"an account of two users", ctx, setUser(ann, 1, 2), membership.CodeInvalidUID},
		{"an account of uid 0", ctx, setUser(ann, 0), membership.CodeInvalidUID},
		{"an account without a userName", ctx, setUser(account.Account{Active: true}, 1), membership.CodeInvalidAttributes},
		{"an account in a group", ctx, func() membership.Write { w := setUser(ann, 1); w.GroupID = "g"; return w }(), membership.CodeInvalidUID},
		{"a set_user without its account", ctx, membership.Write{Op: membership.OpSetUser, UIDs: []membership.UID{1}}, membership.CodeInternal},
		{"a deletion", ctx, membership.Write{Op: membership.OpDeleteUser, UIDs: []membership.UID{1}}, ""},
		{"a deletion with an account", ctx, func() membership.Write { w := setUser(ann, 1); w.Op = membership.OpDeleteUser; return w }(), membership.CodeInternal},
		{"a group's attributes", ctx, group("g"), ""},
		{"a group's attributes of a bad id", ctx, group(""), membership.CodeInvalidGroupID},
		{"a group's attributes without a displayName", ctx,
			membership.Write{Op: membership.OpSetGroup, GroupID: "g", Group: &account.GroupAttributes{}}, membership.CodeInvalidAttributes},
		{"a group's attributes with uids", ctx, func() membership.Write { w := group("g"); w.UIDs = []membership.UID{1}; return w }(), membership.CodeInvalidUID},
		{"an account, by a principal of some groups", writer, setUser(ann, 1), membership.CodeForbidden},
		{"a deletion, by a principal of some groups", writer, membership.Write{Op: membership.OpDeleteUser, UIDs: []membership.UID{1}}, membership.CodeForbidden},
		{"a group's attributes in its scope", writer, group("team-a/x"), ""},
		{"a group's attributes outside it", writer, group("secret"), membership.CodeForbidden},
	}
	for _, tt := range tests {
		store := &recordingStore{}
		_, err := membership.NewService(store, membership.ServiceOptions{}).Write(tt.ctx, tt.w)
		if tt.want == "" {
			assert.NoError(t, err, tt.name)
			assert.Len(t, store.calls, 1, tt.name)
			continue
		}
		assert.Equal(t, tt.want, membership.ErrorCode(err), "%s: %v", tt.name, err)
		assert.Empty(t, store.calls, tt.name)
	}
}

// A batch takes a group's attributes, not an account.
func TestABatchTakesAGroupsAttributesOnly(t *testing.T) {
	ctx := context.Background()
	store := &recordingStore{}
	svc := membership.NewService(store, membership.ServiceOptions{})
	_, err := svc.Batch(ctx, membership.Batch{Writes: []membership.Write{
		{Op: membership.OpSetGroup, GroupID: "g", Group: &account.GroupAttributes{DisplayName: "G"}},
		{Op: membership.OpAdd, GroupID: "g", Users: users(1)},
	}})
	require.NoError(t, err)
	for _, w := range []membership.Write{setUser(account.Account{UserName: "ann"}, 1), {Op: membership.OpDeleteUser, UIDs: []membership.UID{1}}} {
		_, err := svc.Batch(ctx, membership.Batch{Writes: []membership.Write{w}})
		assert.Equal(t, membership.CodeInvalidChanges, membership.ErrorCode(err), "%s", w.Op)
	}
	assert.Equal(t, []string{"batch 2"}, store.calls)
}

// A keyed write's fingerprint covers the account or the attributes it
// sets.
func TestFingerprintOfADirectoryWriteCoversWhatItSets(t *testing.T) {
	ann := setUser(account.Account{UserName: "ann", Active: true}, 1)
	inactive := setUser(account.Account{UserName: "ann"}, 1)
	renamed := setUser(account.Account{UserName: "ann", DisplayName: "Ann", Active: true}, 1)
	assert.NotEqual(t, membership.FingerprintWrite(ann), membership.FingerprintWrite(inactive))
	assert.NotEqual(t, membership.FingerprintWrite(ann), membership.FingerprintWrite(renamed))
	g := membership.Write{Op: membership.OpSetGroup, GroupID: "g", Group: &account.GroupAttributes{DisplayName: "G"}}
	other := g
	other.Group = &account.GroupAttributes{DisplayName: "G", ExternalID: "x"}
	assert.NotEqual(t, membership.FingerprintWrite(g), membership.FingerprintWrite(other))
}
