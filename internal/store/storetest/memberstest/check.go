package memberstest

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// testCheckMembers checks CheckMembers: every answer in order, all at one
// revision, also while writers change the groups checked.
func testCheckMembers(t *testing.T, newStore func(t *testing.T) membership.Store) {
	storetest.Run(t, newStore, []storetest.Case[membership.Store]{
		{Name: "answers each check in order, at the latest revision", Test: func(t *testing.T, ctx context.Context, s membership.Store) {
			storetest.MustAdd(t, s, "a", []membership.User{{UID: 1}, {UID: 2}, {UID: math.MaxInt64}})
			storetest.MustAdd(t, s, "b", []membership.User{{UID: 2}})
			checks := []membership.Check{
				{GroupID: "a", UID: 1}, {GroupID: "a", UID: 3}, {GroupID: "b", UID: 2}, {GroupID: "b", UID: 1},
				{GroupID: "nobody", UID: 1}, {GroupID: "a", UID: 1}, {GroupID: "a", UID: math.MaxInt64},
			}
			found, rev, err := s.CheckMembers(ctx, checks)
			require.NoError(t, err)
			assert.Equal(t, []bool{true, false, true, false, false, true, true}, found)
			assert.Equal(t, storetest.Latest(t, s), rev)

			_, err = storetest.Remove(ctx, s, "a", []membership.UID{1})
			require.NoError(t, err)
			storetest.MustAdd(t, s, "other", []membership.User{{UID: 9}})
			found, rev, err = s.CheckMembers(ctx, checks)
			require.NoError(t, err)
			assert.Equal(t, []bool{false, false, true, false, false, false, true}, found)
			assert.Equal(t, storetest.Latest(t, s), rev, "the latest revision, though the last change was to a group not checked")
		}},
		{Name: "no checks: no answers, at the latest revision", Test: func(t *testing.T, ctx context.Context, s membership.Store) {
			storetest.MustAdd(t, s, "a", []membership.User{{UID: 1}})
			found, rev, err := s.CheckMembers(ctx, nil)
			require.NoError(t, err)
			assert.Empty(t, found)
			assert.Equal(t, storetest.Latest(t, s), rev)
		}},
		{Name: "whole-group writes: replace, delete, remove a user everywhere", Test: func(t *testing.T, ctx context.Context, s membership.Store) {
			storetest.MustAdd(t, s, "a", []membership.User{{UID: 1}, {UID: 2}})
			storetest.MustAdd(t, s, "b", []membership.User{{UID: 1}})
			storetest.MustWrite(t, s, membership.Write{Op: membership.OpReplace, GroupID: "a", Users: []membership.User{{UID: 2}, {UID: 3}}})
			storetest.MustWrite(t, s, membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{2}})
			storetest.MustWrite(t, s, membership.Write{Op: membership.OpDeleteGroup, GroupID: "b"})
			found, _, err := s.CheckMembers(ctx, []membership.Check{
				{GroupID: "a", UID: 1}, {GroupID: "a", UID: 2}, {GroupID: "a", UID: 3}, {GroupID: "b", UID: 1},
			})
			require.NoError(t, err)
			assert.Equal(t, []bool{false, false, true, false}, found)
		}},
		{Name: "answers are of one revision while writers move users", Test: func(t *testing.T, ctx context.Context, s membership.Store) {
			observations, errs := checkWhileMoving(s, 2, 8, 4)
			for _, err := range errs {
				require.NoError(t, err)
			}
			require.NotEmpty(t, observations)
			changes, _, err := s.Changes(ctx, membership.ChangeOptions{})
			require.NoError(t, err)
			require.NotEmpty(t, changes)
			require.Equal(t, membership.Revision(1), changes[0].Revision, "the test needs the whole feed")
			storetest.CheckAgainstFeed(t, changes, observations)
		}},
	})
}

// checkWhileMoving is storetest.CheckWhileMoving on s, through its
// Write and CheckMembers.
func checkWhileMoving(s membership.Store, writers, perWriter, rounds int) ([]storetest.CheckObservation, []error) {
	ctx := context.Background()
	checks := storetest.MovingChecks(writers * perWriter)
	move := func(uid membership.UID, from, to string) error {
		if from != "" {
			if _, err := storetest.Remove(ctx, s, from, []membership.UID{uid}); err != nil {
				return err
			}
		}
		_, err := storetest.Add(ctx, s, to, []membership.User{{UID: uid}})
		return err
	}
	check := func() (storetest.CheckObservation, error) {
		found, rev, err := s.CheckMembers(ctx, checks)
		return storetest.CheckObservation{Checks: checks, Found: found, Revision: rev}, err
	}
	return storetest.CheckWhileMoving(writers, perWriter, rounds, move, check)
}
