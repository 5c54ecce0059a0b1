package storetest

import (
	"context"
	"iter"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// ListAll returns what s.ListMembers lists for groupID, checking that the
// count it gives matches the members it yields.
func ListAll(t *testing.T, s membership.Store, groupID string) ([]membership.Member, membership.Revision) {
	t.Helper()
	var got []membership.Member
	count := -1
	rev, err := s.ListMembers(context.Background(), groupID, membership.ListOptions{}, func(n int, members iter.Seq[membership.Member]) {
		count = n
		got = make([]membership.Member, 0, n)
		for m := range members {
			got = append(got, m)
		}
	})
	require.NoError(t, err)
	require.Equal(t, len(got), count, "the count given to list must match the members yielded")
	return got, rev
}

// Groups returns what s.Groups lists for opts, and the total it gives.
func Groups(t *testing.T, s membership.Store, opts membership.GroupsOptions) ([]membership.GroupSize, int) {
	t.Helper()
	got, total := []membership.GroupSize{}, -1
	_, err := s.Groups(context.Background(), opts, collect(&got, &total))
	require.NoError(t, err)
	return got, total
}

// collect returns a function for a store's list to call, which keeps the
// total the list gives in *total and appends what it yields to *got.
func collect[T any](got *[]T, total *int) func(int, iter.Seq[T]) {
	return func(n int, items iter.Seq[T]) {
		*total = n
		*got = slices.AppendSeq(*got, items)
	}
}

// Latest returns the store's latest revision.
func Latest(t *testing.T, s membership.Store) membership.Revision {
	t.Helper()
	_, last, err := s.Changes(context.Background(), membership.ChangeOptions{})
	require.NoError(t, err)
	return last
}

// AllChanges returns every change of s after the revision after, failing
// the test on an error.
func AllChanges(t *testing.T, s membership.Store, after membership.Revision) []membership.Change {
	t.Helper()
	changes, _, err := s.Changes(context.Background(), membership.ChangeOptions{After: after})
	require.NoError(t, err)
	return changes
}

// EmptiesAsNil returns a copy of changes with their empty slices (uids,
// nicknames, expiries, a batch's changes) nil: a change with an empty list
// and one with none are the same change, which a store may give back
// either way.
func EmptiesAsNil(changes []membership.Change) []membership.Change {
	changes = slices.Clone(changes)
	for i := range changes {
		c := &changes[i]
		if len(c.UIDs) == 0 {
			c.UIDs = nil
		}
		if len(c.Nicknames) == 0 {
			c.Nicknames = nil
		}
		if len(c.Expiries) == 0 {
			c.Expiries = nil
		}
		if len(c.Groups) == 0 {
			c.Groups = nil
		}
		if c.Changes = EmptiesAsNil(c.Changes); len(c.Changes) == 0 {
			c.Changes = nil
		}
	}
	return changes
}
