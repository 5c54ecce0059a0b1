// Package scope is what a principal may do: its right on its groups, as
// a request's context carries it to the membership.Service, which refuses
// (forbidden) what reaches past it; and what a principal's name may be
// (ValidatePrincipal). A context without a Scope reaches
// everything: the service's own work (the expirer), and a service without
// credentials.
package scope

import (
	"context"
	"fmt"

	"example.com/groupmembership/membership/groupids"
)

// Right is what a principal may do to a group. Each right includes the one
// before it: write reads too, and admin does everything, to every group.
type Right uint8

// The rights, from least to most.
const (
	Read Right = iota + 1
	Write
	Admin
)

// String returns the right as the ACL file and the errors name it.
func (r Right) String() string {
	switch r {
	case Read:
		return "read"
	case Write:
		return "write"
	case Admin:
		return "admin"
	}
	return fmt.Sprintf("right(%d)", uint8(r))
}

// Scope is what one principal may do: its Right on its groups, or
// everything for Admin. A nil *Scope may do everything.
type Scope struct {
	principal string
	right     Right
	groups    groupids.Set
	// tag is a digest of the groups, for the ETags of the lists that show
	// only the groups of a scope (ReadTag).
	tag string
}

// New returns the scope of principal: right on groups, or on every group
// for Admin.
func New(principal string, right Right, groups groupids.Set) *Scope {
	if right == Admin {
		groups = groupids.All()
	}
	return &Scope{principal: principal, right: right, groups: groups, tag: groups.Digest()}
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
	return s == nil || s.right == Admin || right <= s.right && right != Admin && s.groups.Contains(groupID)
}

// AllowsAll reports whether s gives right on every group: for Admin,
// whether s is an admin's.
func (s *Scope) AllowsAll(right Right) bool {
	return s == nil || s.right == Admin || right <= s.right && right != Admin && s.groups.All()
}

// Readable returns the groups s may read, nil when it may read every
// group: what a list of many groups is limited to.
func (s *Scope) Readable() *groupids.Set {
	if s.AllowsAll(Read) {
		return nil
	}
	return &s.groups
}

// ReadTag returns a digest of the groups s may read, "" when it reads
// them all: a list that shows only those differs with it, so its ETag
// takes it.
func (s *Scope) ReadTag() string {
	if s.AllowsAll(Read) {
		return ""
	}
	return s.tag
}

// key is the context key of a request's Scope.
type key struct{}

// With returns ctx carrying s: the membership.Service lets what ctx is
// given reach only what s allows.
func With(ctx context.Context, s *Scope) context.Context {
	return context.WithValue(ctx, key{}, s)
}

// Of returns the Scope ctx carries, nil (everything) when it carries none.
func Of(ctx context.Context) *Scope {
	s, _ := ctx.Value(key{}).(*Scope)
	return s
}
