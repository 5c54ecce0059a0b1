package memory

import (
	"context"
	"fmt"
	"iter"
	"testing"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// Import's doc asks for an empty store: one whose groups were all deleted
// is empty, but its group numbers are not fresh. Numbers freed by deletes
// are given out again last-freed first, so the snapshot's groups get
// numbers that descend in st.Groups order, and the reverse index's radix
// sort keeps arrival order within a user: its fill puts a user's pairs in
// order all the same, so that UserGroups, and a later remove, find every
// one.
func TestImportIntoAnEmptiedStore(t *testing.T) {
	ctx := context.Background()
	m := NewWith(Options{Shards: 1, ChangesKeep: membership.DefaultChangesKeep})
	ids := []string{"a", "b", "c", "d"}
	for _, id := range ids {
		_, err := storetest.Add(ctx, m, id, []membership.User{{UID: 7}})
		require.NoError(t, err)
	}
	for _, id := range ids {
		_, err := m.Write(ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: id})
		require.NoError(t, err)
	}
	require.Zero(t, m.Stats().Groups, "the store is empty")

	st := &snap.State{LastRevision: 100}
	for _, id := range ids {
		st.Groups = append(st.Groups, snap.Group{ID: id, Revision: 1, UIDs: []membership.UID{5, 7, 9}})
	}
	m.Import(st)

	groupsOf := func(uid membership.UID) []string {
		var got []string
		require.NoError(t, m.UserGroups(ctx, uid, membership.GroupListOptions{}, func(_ int, gs iter.Seq[string]) {
			for g := range gs {
				got = append(got, g)
			}
		}))
		return got
	}
	for _, uid := range []membership.UID{5, 7, 9} {
		require.Equal(t, ids, groupsOf(uid), "uid %d", uid)
	}
	// Remove uid 7 from each group in turn: the reverse index must follow.
	for i := len(ids) - 1; i >= 0; i-- {
		_, err := storetest.Remove(ctx, m, ids[i], []membership.UID{7})
		require.NoError(t, err)
		require.Equal(t, ids[:i], nonNil(groupsOf(7)), "after removing 7 from %s", ids[i])
	}
	require.Equal(t, fmt.Sprint(4, 8, 2), fmt.Sprint(m.Stats().Groups, m.Stats().Members, m.Stats().Users))
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
