package durable

import (
	"context"

	"example.com/groupmembership/membership"
)

// The transitive reads of groups in groups are memory's, as every read
// is: they never touch the disk. Nesting writes go through Write and
// Batch, logged as every write is.

var _ membership.Nesting = (*Store)(nil)

// Subgroups implements membership.Nesting: memory's.
func (d *Store) Subgroups(ctx context.Context, groupID string, opts membership.NestingListOptions, list membership.NestedListFunc) (membership.Revision, error) {
	return d.mem.Subgroups(ctx, groupID, opts, list)
}

// Parents implements membership.Nesting: memory's.
func (d *Store) Parents(ctx context.Context, groupID string, opts membership.NestingListOptions, list membership.NestedListFunc) (membership.Revision, error) {
	return d.mem.Parents(ctx, groupID, opts, list)
}

// ListTransitiveMembers implements membership.Nesting: memory's.
func (d *Store) ListTransitiveMembers(ctx context.Context, groupID string, opts membership.ListOptions, list membership.ListFunc) (membership.Revision, error) {
	return d.mem.ListTransitiveMembers(ctx, groupID, opts, list)
}

// TransitiveMember implements membership.Nesting: memory's.
func (d *Store) TransitiveMember(ctx context.Context, groupID string, uid membership.UID) (membership.Member, []string, bool, membership.Revision, error) {
	return d.mem.TransitiveMember(ctx, groupID, uid)
}

// TransitiveUserGroups implements membership.Nesting: memory's.
func (d *Store) TransitiveUserGroups(ctx context.Context, uid membership.UID, opts membership.GroupListOptions, list membership.GroupListFunc) (membership.Revision, error) {
	return d.mem.TransitiveUserGroups(ctx, uid, opts, list)
}

// CheckTransitive implements membership.Nesting: memory's.
func (d *Store) CheckTransitive(ctx context.Context, checks []membership.Check) ([]bool, membership.Revision, error) {
	return d.mem.CheckTransitive(ctx, checks)
}

// TransitiveRevision implements membership.Nesting: memory's.
func (d *Store) TransitiveRevision(ctx context.Context, groupID string) (membership.Revision, error) {
	return d.mem.TransitiveRevision(ctx, groupID)
}
