package transitive

import (
	"context"
	"slices"

	"example.com/groupmembership/internal/store/memory/nesting"
	"example.com/groupmembership/membership"
)

// Subgroups implements membership.Nesting. It answers at the revision of
// the latest change of the nesting: the graph is the same from then on.
func (r *Reader) Subgroups(_ context.Context, groupID string, opts membership.NestingListOptions, list membership.NestedListFunc) (membership.Revision, error) {
	graph, rev := r.s.RLockNesting()
	defer r.s.RUnlockNesting()
	n := graph.Node(groupID)
	switch {
	case n == nil:
		pageNested(nil, nil, opts, list)
	case opts.Transitive:
		pageNested(sortedIDs(graph.Below(groupID)), func(int) int64 { return 0 }, opts, list)
	default:
		ids, ats := nestedIDs(n.Children)
		pageNested(ids, func(i int) int64 { return ats[i] }, opts, list)
	}
	return rev, nil
}

// Parents implements membership.Nesting, at the revision Subgroups
// answers at.
func (r *Reader) Parents(_ context.Context, groupID string, opts membership.NestingListOptions, list membership.NestedListFunc) (membership.Revision, error) {
	graph, rev := r.s.RLockNesting()
	defer r.s.RUnlockNesting()
	n := graph.Node(groupID)
	switch {
	case n == nil:
		pageNested(nil, nil, opts, list)
	case opts.Transitive:
		ids := make([]string, 0, n.AncestorCount())
		n.Ancestors(func(a *nesting.Node) { ids = append(ids, a.ID) })
		slices.Sort(ids)
		pageNested(ids, func(int) int64 { return 0 }, opts, list)
	default:
		ids, ats := nestedIDs(n.Parents)
		pageNested(ids, func(i int) int64 { return ats[i] }, opts, list)
	}
	return rev, nil
}

// pageNested calls list with a page of ids (sorted) as opts selects, the
// expiry of each from at.
func pageNested(ids []string, at func(i int) int64, opts membership.NestingListOptions, list membership.NestedListFunc) {
	start := 0
	if opts.After != "" {
		start, _ = slices.BinarySearch(ids, opts.After)
		if start < len(ids) && ids[start] == opts.After {
			start++
		}
	}
	end := len(ids)
	if opts.Limit > 0 {
		end = min(end, start+opts.Limit)
	}
	list(len(ids), func(yield func(membership.Nested) bool) {
		for i := start; i < end; i++ {
			if !yield(membership.Nested{GroupID: ids[i], Expires: nesting.TimeOf(at(i))}) {
				return
			}
		}
	})
}

// nestedIDs returns the ids of edges and their ends.
func nestedIDs(edges []nesting.Edge) ([]string, []int64) {
	ids := make([]string, len(edges))
	ats := make([]int64, len(edges))
	for i, e := range edges {
		ids[i], ats[i] = e.Node.ID, e.At
	}
	return ids, ats
}

// sortedIDs returns the ids of nodes in byte order.
func sortedIDs(nodes []*nesting.Node) []string {
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	slices.Sort(ids)
	return ids
}
