package memberstest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// testStamps checks that every change carries the actor its write named
// and the time it was committed.
func testStamps(t *testing.T, s membership.Store) {
	ctx := context.Background()
	since := time.Now()
	writes := []membership.Write{
		{Op: membership.OpAdd, GroupID: "g", Users: storetest.UsersOf(1, 2, 3), Actor: 7},
		{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{3}, Actor: math.MaxInt64},
		{Op: membership.OpReplace, GroupID: "g", Users: storetest.UsersOf(1, 4), Actor: 8},
		{Op: membership.OpRemoveUser, UIDs: []membership.UID{4}, Actor: 9},
		{Op: membership.OpAdd, GroupID: "h", Users: storetest.UsersOf(5)}, // no actor
		{Op: membership.OpDeleteGroup, GroupID: "g", Actor: 10, If: membership.Precondition{Exists: true}},
	}
	for _, w := range writes {
		storetest.MustWrite(t, s, w)
	}
	// What changes nothing, and what fails, records nothing, actor or not.
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpAdd, GroupID: "h", Users: storetest.UsersOf(5), Actor: 11})
	_, err := s.Write(ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: "h", Actor: 12, If: membership.Precondition{Empty: true}})
	require.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err))
	storetest.MustAdd(t, s, "h", storetest.UsersOf(6)) // names no actor

	got := storetest.Untimed(t, storetest.AllChanges(t, s, 0), since)
	require.Len(t, got, len(writes)+1)
	for i, w := range writes {
		assert.Equal(t, w.Op, got[i].Op, "change %d", i+1)
		assert.Equal(t, w.Actor, got[i].Actor, "change %d (%s)", i+1, w.Op)
	}
	assert.Equal(t, membership.UID(0), got[len(writes)].Actor, "AddMembers names no actor")
}
