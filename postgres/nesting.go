package postgres

import (
	"context"

	"example.com/groupmembership/membership"
)

// The transitive reads are memory's, which has applied the log: each
// answers at one revision of it, pages by key, and holds no more than the
// page it gives. See the package comment for the nesting writes.

// Subgroups implements membership.Nesting.
func (s *Store) Subgroups(ctx context.Context, groupID string, opts membership.NestingListOptions, list membership.NestedListFunc) (membership.Revision, error) {
	return s.mem.Subgroups(ctx, groupID, opts, list)
}

// Parents implements membership.Nesting.
func (s *Store) Parents(ctx context.Context, groupID string, opts membership.NestingListOptions, list membership.NestedListFunc) (membership.Revision, error) {
	return s.mem.Parents(ctx, groupID, opts, list)
}

// ListTransitiveMembers implements membership.Nesting.
func (s *Store) ListTransitiveMembers(ctx context.Context, groupID string, opts membership.ListOptions, list membership.ListFunc) (membership.Revision, error) {
	return s.mem.ListTransitiveMembers(ctx, groupID, opts, list)
}

// TransitiveMember implements membership.Nesting.
func (s *Store) TransitiveMember(ctx context.Context, groupID string, uid membership.UID) (membership.Member, []string, bool, membership.Revision, error) {
	return s.mem.TransitiveMember(ctx, groupID, uid)
}

// TransitiveUserGroups implements membership.Nesting.
func (s *Store) TransitiveUserGroups(ctx context.Context, uid membership.UID, opts membership.GroupListOptions, list membership.GroupListFunc) (membership.Revision, error) {
	return s.mem.TransitiveUserGroups(ctx, uid, opts, list)
}

// CheckTransitive implements membership.Nesting.
func (s *Store) CheckTransitive(ctx context.Context, checks []membership.Check) ([]bool, membership.Revision, error) {
	return s.mem.CheckTransitive(ctx, checks)
}

// TransitiveRevision implements membership.Nesting.
func (s *Store) TransitiveRevision(ctx context.Context, groupID string) (membership.Revision, error) {
	return s.mem.TransitiveRevision(ctx, groupID)
}
