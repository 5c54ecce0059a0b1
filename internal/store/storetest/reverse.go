package storetest

import (
	"context"
	"testing"

	"example.com/groupmembership/membership"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// UserGroups returns what s.UserGroups lists for uid, and the total it gives.
func UserGroups(t *testing.T, s membership.Store, uid membership.UID, opts membership.GroupListOptions) ([]string, int) {
	t.Helper()
	var got []string
	total := -1
	require.NoError(t, s.UserGroups(context.Background(), uid, opts, collect(&got, &total)))
	return got, total
}

// ReverseAgrees checks that s.UserGroups says, for each of uids, exactly
// what the lists of groups say.
func ReverseAgrees(t *testing.T, s membership.Store, groups []string, uids []membership.UID) {
	t.Helper()
	in := map[membership.UID][]string{}
	for _, g := range groups { // groups is in byte order
		list, _ := ListAll(t, s, g)
		for _, m := range list {
			in[m.UID] = append(in[m.UID], g)
		}
	}
	for _, uid := range uids {
		got, total := UserGroups(t, s, uid, membership.GroupListOptions{})
		assert.Equal(t, len(in[uid]), total, "uid %d", uid)
		if len(in[uid]) == 0 {
			assert.Empty(t, got, "uid %d", uid)
		} else {
			assert.Equal(t, in[uid], got, "uid %d", uid)
		}
	}
}
