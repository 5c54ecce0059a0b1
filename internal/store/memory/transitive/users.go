package transitive

import (
	"context"
	"slices"

	"example.com/groupmembership/internal/store/memory/nesting"
	"example.com/groupmembership/membership"
)

// CheckTransitive implements membership.Nesting. Each check reads the
// user's groups in the reverse index, and for each asks whether the group
// checked is it or above it: about what a direct check costs for a user
// in few groups, however large the nesting. It answers at the latest
// revision, read while every user checked and the nesting are held still:
// no change of theirs is in flight then.
func (r *Reader) CheckTransitive(_ context.Context, checks []membership.Check) ([]bool, membership.Revision, error) {
	found := make([]bool, len(checks))
	graph, _ := r.s.RLockNesting()
	defer r.s.RUnlockNesting()
	targets := make([]*nesting.Node, len(checks))
	for i, c := range checks {
		targets[i] = graph.Node(c.GroupID)
	}
	rev := r.s.GroupsOfUsers(len(checks), func(i int) membership.UID { return checks[i].UID }, func(i int, id string) {
		if !found[i] {
			found[i] = id == checks[i].GroupID || targets[i] != nil && graph.Node(id).IsAbove(targets[i])
		}
	})
	return found, rev, nil
}

// TransitiveUserGroups implements membership.Nesting: the user's groups in
// the reverse index and every group above each, at the latest revision,
// read as CheckTransitive reads.
func (r *Reader) TransitiveUserGroups(_ context.Context, uid membership.UID, opts membership.GroupListOptions, list membership.GroupListFunc) (membership.Revision, error) {
	graph, _ := r.s.RLockNesting()
	defer r.s.RUnlockNesting()
	in := map[string]struct{}{}
	rev := r.s.GroupsOfUsers(1, func(int) membership.UID { return uid }, func(_ int, id string) {
		in[id] = struct{}{}
		graph.Node(id).Ancestors(func(a *nesting.Node) { in[a.ID] = struct{}{} })
	})
	if opts.Within != nil {
		for id := range in {
			if !opts.Within.Contains(id) {
				delete(in, id)
			}
		}
	}
	ids := make([]string, 0, len(in))
	for id := range in {
		if id > opts.After {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	if opts.Limit > 0 && len(ids) > opts.Limit {
		ids = ids[:opts.Limit]
	}
	list(len(in), slices.Values(ids))
	return rev, nil
}
