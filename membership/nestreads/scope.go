package nestreads

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/scope"
)

// How a read of groups in groups is held to the request's scope.Scope. A
// scope that allows read on every group costs one comparison; any other
// must read every group the answer depends on: the groups a list names,
// or every group below those a transitive read reaches.

// errNestingMoved fails a transitive read of a scope that the nesting
// changed under: the groups it reached may not be those checked.
var errNestingMoved = membership.Errorf(membership.CodeUnavailable, "the groups in groups changed while this transitive read ran, "+
	"so the groups it reached may not be those its principal was checked for; nothing is wrong: try again")

// readBelow runs read, a transitive read of each of groupIDs for scope:
// it refuses it unless scope may read each group and every group below it
// (CodeForbidden, naming the first, in byte order, that it may not), and
// fails it (errNestingMoved, CodeUnavailable) when the nesting changed
// (membership.Nesting.NestingRevision) between the checks and the end of
// read. element names the group's place in the request for an error, nil
// when it has none (one group).
func (s *Service) readBelow(ctx context.Context, sc *scope.Scope, groupIDs []string, element func(i int, e *membership.Error) *membership.Error, read func() error) error {
	if sc.AllowsAll(scope.Read) {
		return read()
	}
	if element == nil {
		element = func(_ int, e *membership.Error) *membership.Error { return e }
	}
	n := s.store
	before, err := n.NestingRevision(ctx)
	if err != nil {
		return err
	}
	checked := make(map[string]bool, len(groupIDs))
	for i, id := range groupIDs {
		if !sc.Allows(scope.Read, id) {
			return element(i, membership.Forbidden(sc, scope.Read, id))
		}
		if checked[id] {
			continue
		}
		checked[id] = true
		err := checkBelow(ctx, n, sc, id)
		if e := (*membership.Error)(nil); errors.As(err, &e) && e.Code == membership.CodeForbidden {
			return element(i, e)
		}
		if err != nil {
			return err
		}
	}
	if err := read(); err != nil {
		return err
	}
	after, err := n.NestingRevision(ctx)
	if err == nil && after != before {
		err = errNestingMoved
	}
	return err
}

// checkBelow returns the CodeForbidden error naming the first group below
// groupID, in byte order, that scope may not read.
func checkBelow(ctx context.Context, n membership.Nesting, sc *scope.Scope, groupID string) error {
	outside := ""
	_, err := n.Subgroups(ctx, groupID, membership.NestingListOptions{Transitive: true}, func(_ int, groups iter.Seq[membership.Nested]) {
		for g := range groups {
			if !sc.Allows(scope.Read, g.GroupID) {
				outside = g.GroupID
				return
			}
		}
	})
	if err != nil || outside == "" {
		return err
	}
	e := membership.Forbidden(sc, scope.Read, outside)
	e.Message = fmt.Sprintf("%s, which group %q holds through nesting: a transitive read needs read on every group below", e.Message, groupID)
	return e
}

// readNestedInScope answers a list of the groups below or above groupID
// (read: membership.Nesting.Subgroups or Parents) for scope, which must be
// able to read groupID and every group the whole list names
// (readablePage).
// relation says where the groups are ("below", "above") for the error.
func readNestedInScope(ctx context.Context, sc *scope.Scope, groupID string, opts membership.NestingListOptions, list membership.NestedListFunc,
	read func(context.Context, string, membership.NestingListOptions, membership.NestedListFunc) (membership.Revision, error), relation string) (membership.Revision, error) {
	if !sc.Allows(scope.Read, groupID) {
		return 0, membership.Forbidden(sc, scope.Read, groupID)
	}
	var all []membership.Nested
	rev, err := read(ctx, groupID, membership.NestingListOptions{Transitive: opts.Transitive}, func(_ int, groups iter.Seq[membership.Nested]) {
		all = slices.Collect(groups)
	})
	if err == nil {
		err = readablePage(sc, all, func(g membership.Nested) string { return g.GroupID }, opts.After, opts.Limit, list,
			fmt.Sprintf("which is %s group %q: listing the groups %s a group needs read on each", relation, groupID, relation))
	}
	return rev, err
}

// readablePage calls list with the page of all (sorted by id) after
// after, at most limit (0: all), when scope may read every group of all,
// read whole at one revision; else it returns the CodeForbidden error of
// the first it may not, followed by why.
func readablePage[T any](sc *scope.Scope, all []T, id func(T) string, after string, limit int, list func(int, iter.Seq[T]), why string) error {
	for _, item := range all {
		if !sc.Allows(scope.Read, id(item)) {
			e := membership.Forbidden(sc, scope.Read, id(item))
			e.Message += ", " + why
			return e
		}
	}
	from, found := slices.BinarySearchFunc(all, after, func(item T, after string) int { return strings.Compare(id(item), after) })
	if found {
		from++
	}
	page := all[from:]
	if limit > 0 && len(page) > limit {
		page = page[:limit]
	}
	list(len(all), slices.Values(page))
	return nil
}
