package membership

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"
)

// Groups in groups. A group holds users and may hold other groups, its
// subgroups: a user of a subgroup, at any depth, is a transitive member of
// every group above it. The nesting is a directed graph without cycles whose
// chains are at most a depth long (MaxDepth), each group below at most so
// many groups (MaxAncestors): a write that would make a group contain
// itself (CodeCycle), a chain deeper (CodeTooDeep) or a group below more
// groups (CodeTooManyAncestors) is refused whole when it is written, so
// that no read ever fails for the shape of the nesting. A nesting may end by itself, as a membership does (Expiry).
//
// A group's direct members are what they always were: ListMembers, Member,
// CheckMembers and UserGroups answer of them alone. The transitive answers
// come from the Nesting methods, each at one revision.
//
// The depth of a chain is the number of nestings on it: backend in
// engineering in all-staff is a chain 2 deep.

// The ops of nesting writes and of their changes in the feed.
const (
	// OpAddGroups makes its Subgroups subgroups of GroupID (or changes
	// their expiry). Its change lists, in Groups, each subgroup it added
	// or whose expiry it changed, with the expiry it has now.
	OpAddGroups Op = "add_groups"
	// OpRemoveGroups makes its Subgroups (ids only) no longer subgroups of
	// GroupID. Its change lists those it removed.
	OpRemoveGroups Op = "remove_groups"
	// OpReplaceGroups makes GroupID's subgroups exactly its Subgroups. Its
	// change lists, in Groups, the whole new set with their expiries.
	OpReplaceGroups Op = "replace_groups"
	// OpExpireGroups is the service's own change of nestings that ended by
	// themselves: its Subgroups whose nesting in GroupID ends at or before
	// its AsOf are removed. Its change lists those it removed; it has no
	// actor.
	OpExpireGroups Op = "expire_groups"
)

// IsNestingOp reports whether op is one of a nesting write.
func IsNestingOp(op Op) bool {
	switch op {
	case OpAddGroups, OpRemoveGroups, OpReplaceGroups, OpExpireGroups:
		return true
	}
	return false
}

// The bounds of the nesting: on the depth of a chain of nestings, and on
// the groups a group may be below, directly or through nesting (what a
// group's set of ancestors, and a nesting write's work for each group
// below it, may grow to); their defaults and the largest a service may be
// given.
const (
	DefaultMaxDepth     = 32
	MaxMaxDepth         = 1000
	DefaultMaxAncestors = 256
	MaxMaxAncestors     = 1 << 20
)

// Subgroup is one element of a nesting write: the group to nest (or to
// stop nesting), with what the request says of the nesting's end.
type Subgroup struct {
	GroupID string
	// Expiry is as for a user: not Set keeps the nesting's expiry (none
	// for a new one). OpRemoveGroups ignores it.
	Expiry Expiry
}

// Nested is a group as the nesting reads list it: its id and, for a
// direct nesting, when the nesting ends (zero: it does not). Transitive
// lists give no expiry.
type Nested struct {
	GroupID string
	Expires time.Time
}

// NestingListOptions select a page of groups by id, in byte order: those
// after After ("" for the first), at most Limit (0: no limit). Transitive
// asks for every group reached through nesting, each once, rather than
// the direct ones.
type NestingListOptions struct {
	After      string
	Limit      int
	Transitive bool
}

// NestedListFunc receives groups from Nesting.Subgroups and
// Nesting.Parents: how many there are in all, and an iterator over those
// asked for, in byte order of their ids. It runs under the same rules as a
// ListFunc.
type NestedListFunc func(total int, groups iter.Seq[Nested])

// Nesting is the part of a Store about groups in groups. Every read
// answers at one revision, which it returns, and the write ops (OpAddGroups,
// OpRemoveGroups, OpReplaceGroups, OpExpireGroups) go through Store.Write
// and Store.Batch as every other op does.
//
// The revision a read returns (but CheckTransitive's, the latest) is that
// of the latest change of what its answer depends on: the answer is what
// it was at that revision, and a change of anything else leaves the
// revision as it is, so that it serves as the answer's ETag. An empty
// answer may answer at revision 0, when the store was empty too. Each
// method below says what its answer depends on.
//
// A nesting write checks Write.MaxDepth and cycles against the state it
// applies to, in the same step, so that two writes racing (a into b, b into
// a) cannot both succeed. OpDeleteGroup removes the group from its parents
// and its subgroups from it. Precondition.Exists and Empty count a group's
// subgroups beside its members, and a group's Revision moves with its
// subgroups as with its members.
type Nesting interface {
	// Subgroups calls list with groupID's subgroups as opts selects:
	// the direct ones, each with its expiry, or, with opts.Transitive,
	// every group below it. It depends on the nestings of the group in
	// them and, transitively, of every group below it in theirs.
	Subgroups(ctx context.Context, groupID string, opts NestingListOptions, list NestedListFunc) (Revision, error)
	// Parents calls list with the groups groupID is directly in, each with
	// the expiry of its nesting, or, with opts.Transitive, every group
	// above it. It depends on the nestings of the group in them, or on the
	// set of groups above it.
	Parents(ctx context.Context, groupID string, opts NestingListOptions, list NestedListFunc) (Revision, error)
	// ListTransitiveMembers calls list with the users of groupID and of
	// every group below it, each once, in ascending uid order, as opts
	// selects, and their exact number. A member's Expires is when its last
	// path into the group ends: a path ends at the earliest expiry on it
	// (the membership's and each nesting's); zero when a path never ends.
	// It depends on the members of the group and of every group below it,
	// their ends, the nestings below it, and the nicknames (the store
	// need not tell whose).
	ListTransitiveMembers(ctx context.Context, groupID string, opts ListOptions, list ListFunc) (Revision, error)
	// TransitiveMember returns uid's record as ListTransitiveMembers would
	// list it, and via, a shortest path of groups from groupID down to a
	// group that holds uid directly (via[0] is groupID); false when uid is
	// not a transitive member. It depends on the nestings below groupID
	// and on uid's groups, ends and nickname.
	TransitiveMember(ctx context.Context, groupID string, uid UID) (m Member, via []string, ok bool, rev Revision, err error)
	// TransitiveUserGroups calls list with every group uid is in, directly
	// or through nesting, as opts selects. It depends on uid's groups and
	// on the groups above each.
	TransitiveUserGroups(ctx context.Context, uid UID, opts GroupListOptions, list GroupListFunc) (Revision, error)
	// CheckTransitive answers every check as CheckMembers does, but
	// transitively, at one revision.
	CheckTransitive(ctx context.Context, checks []Check) (found []bool, rev Revision, err error)
	// NestingRevision returns the revision of the latest change of the
	// nesting anywhere: every nesting write that changes something moves
	// it, and nothing else does.
	NestingRevision(ctx context.Context) (Revision, error)
	// TransitiveRevision returns the revision ListTransitiveMembers would
	// answer groupID's members at now, without reading them: a list's
	// ETag, to answer a conditional request before the list is read.
	TransitiveRevision(ctx context.Context, groupID string) (Revision, error)
}

// CycleError returns the CodeCycle error of a nesting of child in parent
// refused because child already holds parent: path runs from child down
// to parent (path[0] is child, path[len-1] is parent; both are child and
// parent alone when they are one group).
func CycleError(parent, child string, path []string) *Error {
	return named{code: CodeCycle, parent: parent, child: child, groups: path}.err()
}

// named is what the error of a nesting of child in parent names: groups (a
// cycle's path, or the group below too many), and for
// CodeTooManyAncestors its count of ancestors and the bound.
type named struct {
	code          Code
	parent, child string
	groups        []string
	count, most   int
}

// err returns the error of n.
func (n named) err() *Error { return &Error{Code: n.code, Message: n.message(n.groups), named: &n} }

// message returns n's message, naming groups.
func (n named) message(groups []string) string {
	if n.code == CodeCycle {
		return fmt.Sprintf("adding %s to %s makes a cycle: %s > %s", n.child, n.parent, strings.Join(groups, " > "), n.child)
	}
	return fmt.Sprintf("adding %s to %s puts %s below %d groups, more than %d (-max-ancestors)", n.child, n.parent, groups[0], n.count, n.most)
}

// TooDeepError returns the CodeTooDeep error of a nesting of child in
// parent refused because it would make a chain depth nestings deep, more
// than most.
func TooDeepError(parent, child string, depth, most int) *Error {
	return Errorf(CodeTooDeep, "adding %s to %s makes a chain of nestings %d deep, deeper than %d (-max-depth)", child, parent, depth, most)
}

// TooManyAncestorsError returns the CodeTooManyAncestors error of a
// nesting of child in parent refused because it would put group below
// count groups, more than most.
func TooManyAncestorsError(parent, child, group string, count, most int) *Error {
	return named{code: CodeTooManyAncestors, parent: parent, child: child, groups: []string{group}, count: count, most: most}.err()
}

// Nesting returns the store's reads of groups in groups as they are,
// neither validated nor held to a scope: for nestreads.Service, which
// does both.
func (s *Service) Nesting() Nesting { return s.store }

// validateSubgroups checks a nesting write's subgroups: at most MaxUsers,
// each a valid group id other than groupID, each expiry valid as of now.
func (s *Service) validateSubgroups(w Write) error {
	if err := ValidateGroupID(w.GroupID); err != nil {
		return err
	}
	if len(w.Subgroups) > s.maxUsers {
		return Errorf(CodeTooManyGroups, "groups has more than %d elements", s.maxUsers)
	}
	if len(w.Users) > 0 || len(w.UIDs) > 0 {
		return Errorf(CodeInternal, "a nesting write names users")
	}
	var now time.Time
	for i, g := range w.Subgroups {
		err := ValidateGroupID(g.GroupID)
		if err == nil && g.Expiry.Set && w.Op != OpRemoveGroups {
			if now.IsZero() {
				now = s.now()
			}
			err = ValidateExpiry(g.Expiry, now)
		}
		if err != nil {
			return Errorf(CodeInvalidGroups, "groups element %d: %s", i, ErrorMessage(err))
		}
		if g.GroupID == w.GroupID && w.Op != OpRemoveGroups {
			return CycleError(w.GroupID, g.GroupID, []string{g.GroupID})
		}
	}
	return nil
}

// ResolveSubgroupTTLs returns groups with every TTL turned into the time it
// sets for a write committed at commit, as ResolveTTLs does for users.
func ResolveSubgroupTTLs(groups []Subgroup, commit time.Time) []Subgroup {
	if !slices.ContainsFunc(groups, func(g Subgroup) bool { return g.Expiry.TTL != 0 }) {
		return groups
	}
	out := slices.Clone(groups)
	for i, g := range out {
		if g.Expiry.TTL != 0 {
			out[i].Expiry = Expiry{Set: true, At: ExpiryTime(g.Expiry, commit)}
		}
	}
	return out
}
