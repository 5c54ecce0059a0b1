package memberstest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// withinGroups are the groups the tests of Within fill, in byte order:
// team-a/* and team-b select the three between, and not team-bb (a
// prefix of the exact id team-b), team-a (the prefix without its slash) or
// a group after team-a/ whose id is past it.
var withinGroups = []string{"a", "team-a", "team-a/x", "team-a/y", "team-b", "team-bb", "team-c/z"}

// testWithin checks that Groups and UserGroups, given Within, select only
// the groups it holds, total included, with every page, prefix and after.
func testWithin(t *testing.T, ctx context.Context, s membership.Store) {
	for _, g := range withinGroups {
		storetest.MustAdd(t, s, g, []membership.User{{UID: 1}, {UID: 2}})
	}
	within := storetest.WithinSet("team-b", "team-a/*")
	ids := func(groups []membership.GroupSize) []string {
		out := []string{}
		for _, g := range groups {
			out = append(out, g.ID)
		}
		return out
	}
	for _, tt := range []struct {
		name  string
		opts  membership.GroupsOptions
		want  []string
		total int
	}{
		{"all", membership.GroupsOptions{}, []string{"team-a/x", "team-a/y", "team-b"}, 3},
		{"a page", membership.GroupsOptions{Limit: 2}, []string{"team-a/x", "team-a/y"}, 3},
		{"the page after", membership.GroupsOptions{After: "team-a/y", Limit: 2}, []string{"team-b"}, 3},
		{"after a group outside", membership.GroupsOptions{After: "team-a", Limit: 1}, []string{"team-a/x"}, 3},
		{"after them all", membership.GroupsOptions{After: "team-b"}, []string{}, 3},
		{"a prefix within a range", membership.GroupsOptions{Prefix: "team-a/y"}, []string{"team-a/y"}, 1},
		{"a prefix across ranges", membership.GroupsOptions{Prefix: "team-"}, []string{"team-a/x", "team-a/y", "team-b"}, 3},
		{"a prefix outside", membership.GroupsOptions{Prefix: "team-c"}, []string{}, 0},
	} {
		tt.opts.Within = within
		got, total := storetest.Groups(t, s, tt.opts)
		assert.Equal(t, tt.want, ids(got), tt.name)
		assert.Equal(t, tt.total, total, tt.name)
	}
	got, total := storetest.Groups(t, s, membership.GroupsOptions{Within: storetest.WithinSet("*")})
	assert.Equal(t, withinGroups, ids(got), "* holds every group")
	assert.Equal(t, len(withinGroups), total)

	groups, total := storetest.UserGroups(t, s, 1, membership.GroupListOptions{Within: within})
	assert.Equal(t, []string{"team-a/x", "team-a/y", "team-b"}, groups)
	assert.Equal(t, 3, total)
	groups, total = storetest.UserGroups(t, s, 2, membership.GroupListOptions{Within: within, After: "team-a/x", Limit: 1})
	assert.Equal(t, []string{"team-a/y"}, groups)
	assert.Equal(t, 3, total, "the total counts every group within, not the page")
	groups, total = storetest.UserGroups(t, s, 1, membership.GroupListOptions{Within: storetest.WithinSet("zzz")})
	assert.Empty(t, groups)
	assert.Equal(t, 0, total)
}
