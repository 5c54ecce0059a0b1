package membership

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Who may do what. A request made with a credential acts for a principal
// (an app, a job), whose Scope says what it may do to which groups. The
// Service refuses with CodeForbidden, whole and before the store sees it,
// a request that reaches past the Scope its context carries (WithScope):
// a write to a group it may not write, a read of a group it may not read,
// a transitive read that reaches, through nesting, a group it may not read.
// The lists of many groups (Groups, UserGroups) list only those it may
// read. A context without a Scope reaches everything: the service's own
// work (the expirer), and a service without credentials.

// Right is what a principal may do to a group. Each right includes the one
// before it: write reads too, and admin does everything, to every group.
type Right uint8

// The rights, from least to most.
const (
	RightRead Right = iota + 1
	RightWrite
	RightAdmin
)

// String returns the right as the ACL file and the errors name it.
func (r Right) String() string {
	switch r {
	case RightRead:
		return "read"
	case RightWrite:
		return "write"
	case RightAdmin:
		return "admin"
	}
	return fmt.Sprintf("right(%d)", uint8(r))
}

// IDRange is the group ids from Start, included, up to End, excluded, in
// byte order; an End of "" has no end.
type IDRange struct {
	Start, End string
}

// contains reports whether id is in r.
func (r IDRange) contains(id string) bool {
	return id >= r.Start && (r.End == "" || id < r.End)
}

// Intersect returns the ids both r and o hold, and false when there are
// none.
func (r IDRange) Intersect(o IDRange) (IDRange, bool) {
	out := IDRange{Start: max(r.Start, o.Start), End: r.End}
	if out.End == "" || o.End != "" && o.End < out.End {
		out.End = o.End
	}
	return out, out.End == "" || out.Start < out.End
}

// PrefixRange returns the range of the ids that start with prefix: every
// id for "".
func PrefixRange(prefix string) IDRange {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return IDRange{Start: prefix, End: string(b[:i+1])}
		}
	}
	return IDRange{Start: prefix} // "", or only 0xff bytes: no end
}

// exactRange returns the range of id alone: no group id holds a control
// character, so id followed by a NUL byte is the next string after it.
func exactRange(id string) IDRange { return IDRange{Start: id, End: id + "\x00"} }

// GroupSet is a set of group ids: exact ids and prefixes, kept as sorted,
// disjoint ranges, so that a look-up is a binary search and a store can
// count and page the groups of a set as ranges of its index. The zero
// GroupSet is empty.
type GroupSet struct {
	ranges []IDRange // sorted by Start, disjoint, none empty
}

// GroupSetOf returns the set of patterns: "*" is every group, an id that
// ends in "*" every group whose id starts with what is before the star,
// and any other an id exactly.
//
// Errors: as NewGroupSet's.
func GroupSetOf(patterns ...string) (GroupSet, error) {
	var exact, prefixes []string
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			prefixes = append(prefixes, prefix)
		} else {
			exact = append(exact, p)
		}
	}
	return NewGroupSet(exact, prefixes)
}

// NewGroupSet returns the set of the ids exact and of every id that starts
// with one of prefixes ("" starts every id).
//
// Errors: CodeInvalidGroupID, naming the id or the prefix (with its *)
// that cannot start a group id.
func NewGroupSet(exact, prefixes []string) (GroupSet, error) {
	ranges := make([]IDRange, 0, len(exact)+len(prefixes))
	for _, id := range exact {
		if err := ValidateGroupID(id); err != nil {
			return GroupSet{}, Errorf(CodeInvalidGroupID, "group %q: %s", id, ErrorMessage(err))
		}
		ranges = append(ranges, exactRange(id))
	}
	for _, p := range prefixes {
		if p != "" {
			if err := ValidateGroupID(p); err != nil {
				return GroupSet{}, Errorf(CodeInvalidGroupID, "group prefix %q: %s", p+"*", ErrorMessage(err))
			}
		}
		ranges = append(ranges, PrefixRange(p))
	}
	return GroupSet{ranges: mergeRanges(ranges)}, nil
}

// mergeRanges returns ranges sorted, with those that overlap or touch made
// one.
func mergeRanges(ranges []IDRange) []IDRange {
	slices.SortFunc(ranges, func(a, b IDRange) int { return strings.Compare(a.Start, b.Start) })
	var out []IDRange
	for _, r := range ranges {
		if n := len(out); n > 0 && (out[n-1].End == "" || r.Start <= out[n-1].End) {
			if out[n-1].End != "" && (r.End == "" || r.End > out[n-1].End) {
				out[n-1].End = r.End
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// Contains reports whether id is in s.
func (s GroupSet) Contains(id string) bool {
	i, _ := slices.BinarySearchFunc(s.ranges, id, func(r IDRange, id string) int { return strings.Compare(r.Start, id) })
	// ranges[i-1] is the last range that starts at or before id (i when
	// one starts exactly there).
	if i < len(s.ranges) && s.ranges[i].Start == id {
		return true
	}
	return i > 0 && s.ranges[i-1].contains(id)
}

// All reports whether s holds every group id.
func (s GroupSet) All() bool {
	return len(s.ranges) == 1 && s.ranges[0] == IDRange{}
}

// Ranges returns the ranges of s, sorted and disjoint. The caller must not
// change them.
func (s GroupSet) Ranges() []IDRange { return s.ranges }

// Scope is what one principal may do: its Right on its groups, or
// everything for RightAdmin. A nil *Scope may do everything.
type Scope struct {
	principal string
	right     Right
	groups    GroupSet
	// tag is a digest of the groups, for the ETags of the lists that show
	// only the groups of a scope (ReadTag).
	tag string
}

// NewScope returns the scope of principal: right on groups, or on every
// group for RightAdmin.
func NewScope(principal string, right Right, groups GroupSet) *Scope {
	if right == RightAdmin {
		groups = GroupSet{ranges: []IDRange{{}}}
	}
	h := sha256.New()
	for _, r := range groups.ranges {
		fmt.Fprintf(h, "%q %q\n", r.Start, r.End)
	}
	return &Scope{principal: principal, right: right, groups: groups, tag: hex.EncodeToString(h.Sum(nil)[:8])}
}

// Principal returns the name of the principal the scope is of, "" for
// nil.
func (s *Scope) Principal() string {
	if s == nil {
		return ""
	}
	return s.principal
}

// Allows reports whether s gives right on the group groupID.
func (s *Scope) Allows(right Right, groupID string) bool {
	return s == nil || s.right == RightAdmin || right <= s.right && right != RightAdmin && s.groups.Contains(groupID)
}

// AllowsAll reports whether s gives right on every group: for RightAdmin,
// whether s is an admin's.
func (s *Scope) AllowsAll(right Right) bool {
	return s == nil || s.right == RightAdmin || right <= s.right && right != RightAdmin && s.groups.All()
}

// Readable returns the groups s may read, nil when it may read every
// group: what a list of many groups is limited to.
func (s *Scope) Readable() *GroupSet {
	if s.AllowsAll(RightRead) {
		return nil
	}
	return &s.groups
}

// ReadTag returns a digest of the groups s may read, "" when it reads
// them all: a list that shows only those differs with it, so its ETag
// takes it.
func (s *Scope) ReadTag() string {
	if s.AllowsAll(RightRead) {
		return ""
	}
	return s.tag
}

// Forbidden returns the CodeForbidden error of s lacking right on groupID
// ("" for every group); admin is of no group.
func (s *Scope) Forbidden(right Right, groupID string) *Error {
	if right == RightAdmin {
		return Errorf(CodeForbidden, "principal %q lacks %s", s.principal, right)
	}
	if groupID == "" {
		return Errorf(CodeForbidden, "principal %q lacks %s on every group (*)", s.principal, right)
	}
	return Errorf(CodeForbidden, "principal %q lacks %s on group %q", s.principal, right, groupID)
}

// scopeKey is the context key of a request's Scope.
type scopeKey struct{}

// WithScope returns ctx carrying s: the Service lets what ctx is given to
// reach only what s allows.
func WithScope(ctx context.Context, s *Scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, s)
}

// ScopeOf returns the Scope ctx carries, nil (everything) when it carries
// none.
func ScopeOf(ctx context.Context) *Scope {
	s, _ := ctx.Value(scopeKey{}).(*Scope)
	return s
}
