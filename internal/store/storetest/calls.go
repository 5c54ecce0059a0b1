package storetest

import (
	"context"

	"example.com/groupmembership/membership"
)

// Add adds users to the group in s: a Write of OpAdd, with no
// precondition and no actor.
func Add(ctx context.Context, s membership.Store, groupID string, users []membership.User) (membership.Result, error) {
	return s.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: groupID, Users: users})
}

// Remove removes uids from the group in s: a Write of OpRemove, with no
// precondition and no actor.
func Remove(ctx context.Context, s membership.Store, groupID string, uids []membership.UID) (membership.Result, error) {
	return s.Write(ctx, membership.Write{Op: membership.OpRemove, GroupID: groupID, UIDs: uids})
}

// Count returns a change's count, for tests that check only that.
func Count(res membership.Result, err error) (int, error) { return res.Count, err }
