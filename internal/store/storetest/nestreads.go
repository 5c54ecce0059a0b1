package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// Subgroups returns what n.Subgroups lists for group, the total it gives
// and its revision.
func Subgroups(t *testing.T, n membership.Nesting, group string, opts membership.NestingListOptions) ([]membership.Nested, int, membership.Revision) {
	t.Helper()
	return nestedList(t, func(list membership.NestedListFunc) (membership.Revision, error) {
		return n.Subgroups(context.Background(), group, opts, list)
	})
}

// Parents returns what n.Parents lists for group, the total it gives and
// its revision.
func Parents(t *testing.T, n membership.Nesting, group string, opts membership.NestingListOptions) ([]membership.Nested, int, membership.Revision) {
	t.Helper()
	return nestedList(t, func(list membership.NestedListFunc) (membership.Revision, error) {
		return n.Parents(context.Background(), group, opts, list)
	})
}

func nestedList(t *testing.T, read func(membership.NestedListFunc) (membership.Revision, error)) ([]membership.Nested, int, membership.Revision) {
	t.Helper()
	got, total := []membership.Nested{}, -1
	rev, err := read(collect(&got, &total))
	require.NoError(t, err)
	return got, total, rev
}

// TransitiveMembers returns what n.ListTransitiveMembers lists for group,
// the total it gives and its revision.
func TransitiveMembers(t *testing.T, n membership.Nesting, group string, opts membership.ListOptions) ([]membership.Member, int, membership.Revision) {
	t.Helper()
	got, total, rev, err := ReadTransitiveMembers(n, group, opts)
	require.NoError(t, err)
	return got, total, rev
}

// ReadTransitiveMembers is TransitiveMembers returning its error rather
// than failing the test, for a reader off the test goroutine.
func ReadTransitiveMembers(n membership.Nesting, group string, opts membership.ListOptions) ([]membership.Member, int, membership.Revision, error) {
	got, total := []membership.Member{}, -1
	rev, err := n.ListTransitiveMembers(context.Background(), group, opts, collect(&got, &total))
	return got, total, rev, err
}

// TransitiveGroups returns what n.TransitiveUserGroups lists for uid, the
// total it gives and its revision.
func TransitiveGroups(t *testing.T, n membership.Nesting, uid membership.UID, opts membership.GroupListOptions) ([]string, int, membership.Revision) {
	t.Helper()
	got, total, rev, err := ReadTransitiveGroups(n, uid, opts)
	require.NoError(t, err)
	return got, total, rev
}

// ReadTransitiveGroups is TransitiveGroups returning its error rather
// than failing the test, for a reader off the test goroutine.
func ReadTransitiveGroups(n membership.Nesting, uid membership.UID, opts membership.GroupListOptions) ([]string, int, membership.Revision, error) {
	got, total := []string{}, -1
	rev, err := n.TransitiveUserGroups(context.Background(), uid, opts, collect(&got, &total))
	return got, total, rev, err
}

// Nest returns the write that nests children in parent, as the Service
// sends it (NestingWrite).
func Nest(parent string, children ...string) membership.Write {
	return NestingWrite(membership.OpAddGroups, parent, children...)
}

// NestingWrite returns the nesting write op of children to parent, as the
// Service sends it (MaxDepth membership.DefaultMaxDepth, MaxAncestors
// membership.DefaultMaxAncestors).
func NestingWrite(op membership.Op, parent string, children ...string) membership.Write {
	w := membership.Write{Op: op, GroupID: parent, MaxDepth: membership.DefaultMaxDepth, MaxAncestors: membership.DefaultMaxAncestors,
		Subgroups: []membership.Subgroup{}}
	for _, c := range children {
		w.Subgroups = append(w.Subgroups, membership.Subgroup{GroupID: c})
	}
	return w
}

// NestedUntil returns a subgroup element whose nesting ends at at (zero:
// made permanent).
func NestedUntil(child string, at time.Time) membership.Subgroup {
	return membership.Subgroup{GroupID: child, Expiry: membership.Expiry{Set: true, At: at}}
}

// Nested returns the subgroups ids, as a list of them gives them: without
// expiries.
func Nested(ids ...string) []membership.Nested {
	out := []membership.Nested{}
	for _, id := range ids {
		out = append(out, membership.Nested{GroupID: id})
	}
	return out
}
