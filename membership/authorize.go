package membership

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"

	"example.com/groupmembership/membership/scope"
)

// How the Service holds a request to its scope.Scope. Each check runs
// after the request is validated, and before the store sees it; a scope
// that allows what is asked on every group costs one comparison.

// Forbidden returns the CodeForbidden error of s lacking right on groupID
// ("" for every group); admin is of no group.
func Forbidden(s *scope.Scope, right scope.Right, groupID string) *Error {
	if right == scope.Admin {
		return Errorf(CodeForbidden, "principal %q lacks %s", s.Principal(), right)
	}
	if groupID == "" {
		return Errorf(CodeForbidden, "principal %q lacks %s on every group (*)", s.Principal(), right)
	}
	return Errorf(CodeForbidden, "principal %q lacks %s on group %q", s.Principal(), right, groupID)
}

// authorizeWrite returns the CodeForbidden error of w when scope may not
// make it: a write needs write on its group (on every group for
// OpRemoveUser and a user's account), and a nesting write read on each
// subgroup it names.
func authorizeWrite(sc *scope.Scope, w Write) error {
	if sc.AllowsAll(scope.Write) {
		return nil
	}
	if w.Op == OpRemoveUser || w.Op == OpSetUser || w.Op == OpDeleteUser {
		e := Forbidden(sc, scope.Write, "")
		why := "removing a user from every group writes to every group"
		if w.Op != OpRemoveUser {
			why = "an account is of no group, and a write of one may take its user out of every group"
		}
		e.Message += ": " + why
		return e
	}
	if !sc.Allows(scope.Write, w.GroupID) {
		return Forbidden(sc, scope.Write, w.GroupID)
	}
	for i, g := range w.Subgroups {
		if !sc.Allows(scope.Read, g.GroupID) {
			e := Forbidden(sc, scope.Read, g.GroupID)
			e.Message = fmt.Sprintf("groups element %d: %s: nesting a group needs read on it", i, e.Message)
			return e
		}
	}
	return nil
}

// authorizeRead returns the CodeForbidden error of a read of groupID when
// scope may not read it.
func authorizeRead(sc *scope.Scope, groupID string) error {
	if sc.Allows(scope.Read, groupID) {
		return nil
	}
	return Forbidden(sc, scope.Read, groupID)
}

// authorizeChecks returns the CodeForbidden error of the first check
// whose group scope may not read, naming it.
func authorizeChecks(sc *scope.Scope, checks []Check) error {
	if sc.AllowsAll(scope.Read) {
		return nil
	}
	for i, c := range checks {
		if !sc.Allows(scope.Read, c.GroupID) {
			return checkError(i, c.GroupID, Forbidden(sc, scope.Read, c.GroupID))
		}
	}
	return nil
}

// checkError returns e, of check i of groupID, with a message naming the
// check.
func checkError(i int, groupID string, e *Error) *Error {
	named := *e
	named.Message = fmt.Sprintf("checks element %d (group %q): %s", i, groupID, e.Message)
	return &named
}

// errNestingMoved fails a transitive read of a scope that the nesting
// changed under: the groups it reached may not be those checked.
var errNestingMoved = Errorf(CodeUnavailable, "the groups in groups changed while this transitive read ran, "+
	"so the groups it reached may not be those its principal was checked for; nothing is wrong: try again")

// readBelow runs read, a transitive read of each of groupIDs for scope:
// it refuses it unless scope may read each group and every group below it
// (naming the first, in byte order, that it may not), and fails it
// (errNestingMoved) when the nesting changed while read ran. element
// names the group's place in the request for an error, nil when it has
// none (one group).
func (s *Service) readBelow(ctx context.Context, sc *scope.Scope, groupIDs []string, element func(i int, e *Error) *Error, read func() error) error {
	if sc.AllowsAll(scope.Read) {
		return read()
	}
	if element == nil {
		element = func(_ int, e *Error) *Error { return e }
	}
	n := s.store
	var before Revision
	checked := make(map[string]bool, len(groupIDs))
	for i, id := range groupIDs {
		if !sc.Allows(scope.Read, id) {
			return element(i, Forbidden(sc, scope.Read, id))
		}
		if checked[id] {
			continue
		}
		checked[id] = true
		rev, err := checkBelow(ctx, n, sc, id)
		if e := (*Error)(nil); errors.As(err, &e) && e.Code == CodeForbidden {
			return element(i, e)
		}
		if err != nil {
			return err
		}
		if len(checked) > 1 && rev != before {
			return errNestingMoved
		}
		before = rev
	}
	if err := read(); err != nil {
		return err
	}
	if len(groupIDs) == 0 {
		return nil
	}
	after, err := n.Subgroups(ctx, groupIDs[0], NestingListOptions{Limit: 1}, func(int, iter.Seq[Nested]) {})
	if err == nil && after != before {
		err = errNestingMoved
	}
	return err
}

// checkBelow returns the revision of the nesting it read, and the
// CodeForbidden error naming the first group below groupID, in byte
// order, that scope may not read.
func checkBelow(ctx context.Context, n Nesting, sc *scope.Scope, groupID string) (Revision, error) {
	outside := ""
	rev, err := n.Subgroups(ctx, groupID, NestingListOptions{Transitive: true}, func(_ int, groups iter.Seq[Nested]) {
		for g := range groups {
			if !sc.Allows(scope.Read, g.GroupID) {
				outside = g.GroupID
				return
			}
		}
	})
	if err != nil || outside == "" {
		return rev, err
	}
	e := Forbidden(sc, scope.Read, outside)
	e.Message = fmt.Sprintf("%s, which group %q holds through nesting: a transitive read needs read on every group below", e.Message, groupID)
	return rev, e
}

// readNestedInScope answers a list of the groups below or above groupID
// (read: Nesting.Subgroups or Parents) for scope, which must be able to
// read groupID and every group the whole list names (readablePage).
// relation says where the groups are ("below", "above") for the error.
func readNestedInScope(ctx context.Context, sc *scope.Scope, groupID string, opts NestingListOptions, list NestedListFunc,
	read func(context.Context, string, NestingListOptions, NestedListFunc) (Revision, error), relation string) (Revision, error) {
	if err := authorizeRead(sc, groupID); err != nil {
		return 0, err
	}
	var all []Nested
	rev, err := read(ctx, groupID, NestingListOptions{Transitive: opts.Transitive}, func(_ int, groups iter.Seq[Nested]) {
		all = slices.Collect(groups)
	})
	if err == nil {
		err = readablePage(sc, all, func(g Nested) string { return g.GroupID }, opts.After, opts.Limit, list,
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
			e := Forbidden(sc, scope.Read, id(item))
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
