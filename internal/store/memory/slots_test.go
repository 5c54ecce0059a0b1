package memory

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// A transitive read's kept merge of a group with no revision (as a
// snapshot of version 1 gives its groups) sees the group dropped: its slot
// is freed, and the merge must not be read as current.
func TestAKeptMergeSeesAGroupOfNoRevisionDropped(t *testing.T) {
	ctx := context.Background()
	src := New()
	_, err := src.Write(ctx, storetest.Nest("a", "b"))
	require.NoError(t, err)
	_, err = storetest.Add(ctx, src, "b", []membership.User{{UID: 1}, {UID: 2}})
	require.NoError(t, err)
	st := src.Export()
	for i := range st.Groups {
		st.Groups[i].Revision = 0
	}
	m := New()
	m.Import(st)
	for range 2 { // the second read is answered from the merge kept
		got, _, _ := storetest.TransitiveMembers(t, m, "a", membership.ListOptions{})
		require.Equal(t, []membership.Member{{UID: 1}, {UID: 2}}, got)
	}
	_, err = storetest.Remove(ctx, m, "b", []membership.UID{1, 2})
	require.NoError(t, err)
	got, _, _ := storetest.TransitiveMembers(t, m, "a", membership.ListOptions{})
	assert.Empty(t, got, "b, emptied, was dropped")
}
