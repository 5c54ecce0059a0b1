package memory

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// A store reloaded from its snapshot answers a transitive read at a
// revision no older than the latest change of what it reads, so that an
// ETag of before that change never matches the answer after it: a group
// below that lost its last subgroup or its last member (and, with neither
// left, its own group) still counts as changed then.
func TestAReloadedTransitiveReadIsNoOlderThanItsLatestChange(t *testing.T) {
	ctx := context.Background()
	write := func(t *testing.T, m *Store, w membership.Write) membership.Revision {
		t.Helper()
		_, err := m.Write(ctx, w)
		require.NoError(t, err)
		return m.LatestRevision()
	}
	add := func(group string, uids ...membership.UID) membership.Write {
		w := membership.Write{Op: membership.OpAdd, GroupID: group}
		for _, u := range uids {
			w.Users = append(w.Users, membership.User{UID: u})
		}
		return w
	}
	remove := func(group string, uid membership.UID) membership.Write {
		return membership.Write{Op: membership.OpRemove, GroupID: group, UIDs: []membership.UID{uid}}
	}
	unnest := storetest.NestingWrite(membership.OpRemoveGroups, "q", "y")

	for _, tc := range []struct {
		name string
		qHas []membership.UID // q's members, besides its subgroup y
	}{{"q left with nothing", nil}, {"q left with a member", []membership.UID{5}}} {
		t.Run("subgroups of "+tc.name, func(t *testing.T) {
			m := New()
			write(t, m, add("y", 1))
			if len(tc.qHas) > 0 {
				write(t, m, add("q", tc.qHas...))
			}
			write(t, m, storetest.Nest("q", "y"))
			write(t, m, storetest.Nest("r", "q"))
			_, _, before := storetest.Subgroups(t, m, "r", membership.NestingListOptions{Transitive: true})
			changed := write(t, m, unnest)
			write(t, m, add("other", 9))
			back := reload(t, m, 4)
			got, _, rev := storetest.Subgroups(t, back, "r", membership.NestingListOptions{Transitive: true})
			assert.Equal(t, storetest.Nested("q"), got)
			assert.Greater(t, rev, before)
			assert.GreaterOrEqual(t, rev, changed)
		})
	}
	t.Run("members of a group left with nothing", func(t *testing.T) {
		m := New()
		write(t, m, add("q", 1))
		write(t, m, storetest.Nest("r", "q"))
		_, _, before := storetest.TransitiveMembers(t, m, "r", membership.ListOptions{})
		changed := write(t, m, remove("q", 1))
		write(t, m, add("other", 9))
		back := reload(t, m, 4)
		got, total, rev := storetest.TransitiveMembers(t, back, "r", membership.ListOptions{})
		assert.Empty(t, got)
		assert.Zero(t, total)
		assert.Greater(t, rev, before)
		assert.GreaterOrEqual(t, rev, changed)
	})
}

// A store reloaded from its snapshot answers a transitive record, or that
// there is none, at a revision no older than the latest change that made
// the user a member or no member: the ETag of the other answer, from
// before the change, never matches it.
func TestAReloadedTransitiveRecordIsNoOlderThanItsLatestChange(t *testing.T) {
	ctx := context.Background()
	m := New()
	read := func(s *Store) (bool, membership.Revision) {
		_, _, ok, rev, err := s.TransitiveMember(ctx, "top", 3)
		require.NoError(t, err)
		return ok, rev
	}
	for _, w := range []membership.Write{
		storetest.Nest("top", "leaf"),
		{Op: membership.OpAdd, GroupID: "leaf", Users: []membership.User{{UID: 2}}},
		{Op: membership.OpAdd, GroupID: "design", Users: []membership.User{{UID: 3}}},
	} {
		_, err := m.Write(ctx, w)
		require.NoError(t, err)
	}
	for _, step := range []struct {
		name   string
		w      membership.Write
		member bool
	}{
		{"the user added below", membership.Write{Op: membership.OpAdd, GroupID: "leaf", Users: []membership.User{{UID: 3}}}, true},
		{"the user removed below", membership.Write{Op: membership.OpRemove, GroupID: "leaf", UIDs: []membership.UID{3}}, false},
		{"the user's group nested below", storetest.Nest("leaf", "design"), true},
		{"that nesting removed", storetest.NestingWrite(membership.OpRemoveGroups, "leaf", "design"), false},
	} {
		_, before := read(m)
		res, err := m.Write(ctx, step.w)
		require.NoError(t, err, step.name)
		_, err = m.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "other", Users: []membership.User{{UID: 9}}})
		require.NoError(t, err)
		m = reload(t, m, 4)
		ok, rev := read(m)
		require.Equal(t, step.member, ok, step.name)
		assert.Greater(t, rev, before, step.name)
		assert.GreaterOrEqual(t, rev, res.Revision, step.name)
	}
}
