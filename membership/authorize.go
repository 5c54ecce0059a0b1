package membership

import (
	"cmp"
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

// hideGroups returns err, a write's error, with each run of the groups its
// message names (a cycle's path, the group below too many) that sc may not
// read named as one: they would show groups, and nestings, of no concern
// to its principal, which can read the write's own (it names one, and
// writes the other).
func hideGroups(sc *scope.Scope, err error) error {
	var e *Error
	if !errors.As(err, &e) || e.named == nil || sc.AllowsAll(scope.Read) {
		return err
	}
	var shown []string
	outside := fmt.Sprintf("(groups outside principal %q's read scope)", sc.Principal())
	for _, id := range e.named.groups {
		if sc.Allows(scope.Read, id) {
			shown = append(shown, id)
		} else if len(shown) == 0 || shown[len(shown)-1] != outside {
			shown = append(shown, outside)
		}
	}
	hidden := *e
	hidden.named = nil
	hidden.Message = strings.Replace(e.Message, e.named.message(e.named.groups), e.named.message(shown), 1)
	return &hidden
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
			return CheckElementError(i, c.GroupID, Forbidden(sc, scope.Read, c.GroupID))
		}
	}
	return nil
}

// CheckElementError returns e, of check i of groupID, with a message
// naming the check.
func CheckElementError(i int, groupID string, e *Error) *Error {
	return elementError("checks", i, groupID, e)
}

// A replace of a group's subgroups (OpReplaceGroups) removes every subgroup
// it does not name, and a delete of the group (OpDeleteGroup) every one. A
// principal may remove only the subgroups it may read, as a DELETE of one
// requires, and a replace or a delete by a principal without read on every
// group is so checked against the group's subgroups before it is
// applied, and applied only at the revision checked: its precondition is
// narrowed to that revision, and a replace whose group changed in between
// is checked and tried again, at most replaceTries times. A batch's
// preconditions are checked against the state before the batch, and the
// subgroups its earlier writes nest are ones it names, so checking that
// state suffices for a replace in a batch too.

// replaceTries is how many times a replace by a scoped principal is
// checked and tried before it is refused errReplaceMoved.
const replaceTries = 3

// errReplaceMoved fails a replace of subgroups by a scoped principal whose
// group kept changing between its check and its write.
var errReplaceMoved = Errorf(CodeUnavailable, "the group's subgroups kept changing while this write was checked "+
	"against its principal's read scope; nothing was changed: try again")

// checkedReplace is a replace of subgroups checked against a scope: the
// index of its write, its group, and the group's revision it was checked at.
type checkedReplace struct {
	write    int
	groupID  string
	revision Revision
}

// applyChecked runs apply with writes, their replaces of subgroups
// checked against the request's scope and narrowed to the revisions
// checked (narrowReplaces), and again while a precondition failure is the
// narrowing's; element names a write's error (BatchElementError), nil for
// a lone write. keyed says the request has an Idempotency-Key: a check it
// fails is then the store's to overrule with a replay (replayOr).
func (s *Service) applyChecked(ctx context.Context, writes []Write, keyed bool, element func(i int, groupID string, err error) error, apply func([]Write) error) error {
	sc := scope.Of(ctx)
	if sc.AllowsAll(scope.Read) || !slices.ContainsFunc(writes, removesSubgroups) {
		return apply(writes)
	}
	if element == nil {
		element = func(_ int, _ string, err error) error { return err }
	}
	for range replaceTries {
		narrowed := slices.Clone(writes)
		checked, err := s.narrowReplaces(ctx, sc, narrowed, element)
		if err != nil {
			return replayOr(err, writes, keyed, apply)
		}
		err = apply(narrowed)
		if ErrorCode(err) != CodePreconditionFailed {
			return err
		}
		if moved, merr := s.moved(ctx, checked); merr != nil || !moved {
			return cmp.Or(merr, err)
		}
	}
	return errReplaceMoved
}

// replayOr returns err, the refusal of writes by their check, unless
// keyed writes repeat a request applied before: the store remembers it
// and answers a repeat with its first reply before it looks at the state,
// which the check of the state now must not refuse either. So keyed
// writes go to the store with each precondition of a write the check
// refused one that never holds: a repeat is answered with its reply,
// anything else refused by the store, changing nothing, and err returned.
func replayOr(err error, writes []Write, keyed bool, apply func([]Write) error) error {
	if !keyed {
		return err
	}
	never := slices.Clone(writes)
	for i := range never {
		if removesSubgroups(never[i]) {
			never[i].If = NeverHolds(never[i].If)
		}
	}
	if apply(never) == nil {
		return nil
	}
	return err
}

// removesSubgroups reports whether w may remove subgroups it does not
// name: a replace of them, or a delete of the group.
func removesSubgroups(w Write) bool { return w.Op == OpReplaceGroups || w.Op == OpDeleteGroup }

// narrowReplaces checks each write of writes that removesSubgroups against sc, and
// narrows its precondition to the revision checked (in place): it returns
// the replaces it narrowed, the CodeForbidden error of one that removes a
// subgroup sc may not read (naming it: a direct read of the group lists
// it), or the CodePreconditionFailed error of one whose own precondition
// does not hold at the revision checked, each named by element.
func (s *Service) narrowReplaces(ctx context.Context, sc *scope.Scope, writes []Write, element func(i int, groupID string, err error) error) ([]checkedReplace, error) {
	var checked []checkedReplace
	for i := range writes {
		w := &writes[i]
		if !removesSubgroups(*w) {
			continue
		}
		rev, err := s.checkRemovals(ctx, sc, *w)
		if err != nil {
			return nil, element(i, w.GroupID, err)
		}
		if len(w.If.Revisions) > 0 && !slices.Contains(w.If.Revisions, rev) {
			return nil, element(i, w.GroupID, PreconditionFailed(rev))
		}
		w.If.Revisions = []Revision{rev}
		checked = append(checked, checkedReplace{write: i, groupID: w.GroupID, revision: rev})
	}
	return checked, nil
}

// checkRemovals returns the revision of w's group at which every subgroup
// w removes is one sc may read, or the CodeForbidden error naming the
// first, in byte order, that it may not. It reads the group's revision
// before and after its subgroups, and again until both agree.
func (s *Service) checkRemovals(ctx context.Context, sc *scope.Scope, w Write) (Revision, error) {
	named := make(map[string]bool, len(w.Subgroups))
	for _, g := range w.Subgroups {
		named[g.GroupID] = true
	}
	for range replaceTries {
		before, err := s.store.Revision(ctx, w.GroupID)
		if err != nil {
			return 0, err
		}
		outside := ""
		_, err = s.store.Subgroups(ctx, w.GroupID, NestingListOptions{}, func(_ int, groups iter.Seq[Nested]) {
			for g := range groups {
				if !named[g.GroupID] && !sc.Allows(scope.Read, g.GroupID) {
					outside = g.GroupID
					return
				}
			}
		})
		if err != nil {
			return 0, err
		}
		if outside != "" {
			e := Forbidden(sc, scope.Read, outside)
			how := "this replace"
			if w.Op == OpDeleteGroup {
				how = "deleting it"
			}
			e.Message = fmt.Sprintf("%s, a subgroup of group %q that %s would remove: removing a subgroup needs read on it", e.Message, w.GroupID, how)
			return 0, e
		}
		after, err := s.store.Revision(ctx, w.GroupID)
		if err != nil {
			return 0, err
		}
		if after == before {
			return before, nil
		}
	}
	return 0, errReplaceMoved
}

// moved reports whether a group of checked is at a revision other than
// the one it was checked at: a precondition failure of their write is then
// the narrowing's, and the replace is checked again.
func (s *Service) moved(ctx context.Context, checked []checkedReplace) (bool, error) {
	for _, c := range checked {
		rev, err := s.store.Revision(ctx, c.groupID)
		if err != nil {
			return false, err
		}
		if rev != c.revision {
			return true, nil
		}
	}
	return false, nil
}
