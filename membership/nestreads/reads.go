package nestreads

import (
	"context"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/scope"
)

// Subgroups calls list with groupID's subgroups as opts selects; see
// membership.Nesting.Subgroups.
//
// Errors: CodeInvalidGroupID, CodeInvalidQuery, CodeForbidden, and
// whatever the store returns.
func (s *Service) Subgroups(ctx context.Context, groupID string, opts membership.NestingListOptions, list membership.NestedListFunc) (membership.Revision, error) {
	if err := validateNestingRead(groupID, opts); err != nil {
		return 0, err
	}
	if sc := scope.Of(ctx); !sc.AllowsAll(scope.Read) {
		return readNestedInScope(ctx, sc, groupID, opts, list, s.store.Subgroups, "below")
	}
	return s.store.Subgroups(ctx, groupID, opts, list)
}

// Parents calls list with the groups groupID is in as opts selects; see
// membership.Nesting.Parents.
//
// Errors: as Subgroups.
func (s *Service) Parents(ctx context.Context, groupID string, opts membership.NestingListOptions, list membership.NestedListFunc) (membership.Revision, error) {
	if err := validateNestingRead(groupID, opts); err != nil {
		return 0, err
	}
	if sc := scope.Of(ctx); !sc.AllowsAll(scope.Read) {
		return readNestedInScope(ctx, sc, groupID, opts, list, s.store.Parents, "above")
	}
	return s.store.Parents(ctx, groupID, opts, list)
}

// validateNestingRead checks the group and the page a list of subgroups
// or parents asks for.
func validateNestingRead(groupID string, opts membership.NestingListOptions) error {
	if err := membership.ValidateGroupID(groupID); err != nil {
		return err
	}
	if err := membership.CheckLimit(opts.Limit, membership.MaxPageSize+1); err != nil {
		return err
	}
	if opts.After != "" {
		if err := membership.ValidateGroupID(opts.After); err != nil {
			return membership.Errorf(membership.CodeInvalidQuery, "after is not a group id: %v", err)
		}
	}
	return nil
}

// TransitiveMember returns uid's record as a transitive member of the
// group, and a shortest path down to a group that holds it directly; see
// membership.Nesting.TransitiveMember. The revision is the answer's, the
// answer CodeNotMember included: that the user is no member holds at a
// revision as a record does, and moves with the same changes (its ETag).
//
// Errors: CodeInvalidGroupID, CodeNotMember, those of readBelow, and
// whatever the store returns.
func (s *Service) TransitiveMember(ctx context.Context, groupID string, uid membership.UID) (membership.Member, []string, membership.Revision, error) {
	if err := membership.ValidateGroupID(groupID); err != nil {
		return membership.Member{}, nil, 0, err
	}
	var m membership.Member
	var via []string
	var ok bool
	var rev membership.Revision
	err := s.readBelow(ctx, scope.Of(ctx), []string{groupID}, nil, func() (err error) {
		m, via, ok, rev, err = s.store.TransitiveMember(ctx, groupID, uid)
		return err
	})
	if err != nil {
		return membership.Member{}, nil, 0, err
	}
	if !ok {
		return membership.Member{}, nil, rev, membership.Errorf(membership.CodeNotMember, "user %d is not a member of the group, directly or through its subgroups", uid)
	}
	return m, via, rev, nil
}

// TransitiveRevision returns the revision a transitive read of groupID
// moves with; see membership.Nesting.TransitiveRevision.
//
// Errors: CodeInvalidGroupID, those of readBelow, and whatever the store
// returns.
func (s *Service) TransitiveRevision(ctx context.Context, groupID string) (membership.Revision, error) {
	if err := membership.ValidateGroupID(groupID); err != nil {
		return 0, err
	}
	var rev membership.Revision
	err := s.readBelow(ctx, scope.Of(ctx), []string{groupID}, nil, func() (err error) {
		rev, err = s.store.TransitiveRevision(ctx, groupID)
		return err
	})
	return rev, err
}

// CheckTransitive answers every check transitively, at one revision; see
// membership.Nesting.CheckTransitive. Its checks are validated as
// membership.Service.CheckMembers's.
//
// Errors: those of CheckMembers, and of readBelow.
func (s *Service) CheckTransitive(ctx context.Context, checks []membership.Check) ([]bool, membership.Revision, error) {
	if err := s.svc.ValidateChecks(checks); err != nil {
		return nil, 0, err
	}
	groupIDs := make([]string, len(checks))
	for i, c := range checks {
		groupIDs[i] = c.GroupID
	}
	var found []bool
	var rev membership.Revision
	err := s.readBelow(ctx, scope.Of(ctx), groupIDs, func(i int, e *membership.Error) *membership.Error {
		return membership.CheckElementError(i, groupIDs[i], e)
	}, func() (err error) {
		found, rev, err = s.store.CheckTransitive(ctx, checks)
		return err
	})
	return found, rev, err
}

// ListTransitiveMembers calls list with the users of groupID and of every
// group below it, as opts selects; see
// membership.Nesting.ListTransitiveMembers. Its page is validated as
// membership.Service.ListMembers's.
//
// Errors: CodeInvalidGroupID, CodeInvalidQuery, those of readBelow, and
// whatever the store returns.
func (s *Service) ListTransitiveMembers(ctx context.Context, groupID string, opts membership.ListOptions, list membership.ListFunc) (membership.Revision, error) {
	if err := membership.ValidateGroupID(groupID); err != nil {
		return 0, err
	}
	if err := opts.Validate(); err != nil {
		return 0, err
	}
	var rev membership.Revision
	err := s.readBelow(ctx, scope.Of(ctx), []string{groupID}, nil, func() (err error) {
		rev, err = s.store.ListTransitiveMembers(ctx, groupID, opts, list)
		return err
	})
	return rev, err
}

// TransitiveUserGroups calls list with every group uid is in, directly or
// through nesting, as opts selects; see
// membership.Nesting.TransitiveUserGroups. Its page is validated as
// membership.Service.UserGroups's, and it needs read on every group.
//
// Errors: CodeInvalidQuery, CodeForbidden, and whatever the store returns.
func (s *Service) TransitiveUserGroups(ctx context.Context, uid membership.UID, opts membership.GroupListOptions, list membership.GroupListFunc) (membership.Revision, error) {
	if err := opts.Validate(); err != nil {
		return 0, err
	}
	if sc := scope.Of(ctx); !sc.AllowsAll(scope.Read) {
		// Whether a refusal named a group or not, it would tell that
		// uid is in a group outside the scope: refused whatever the
		// user's groups are.
		e := membership.Forbidden(sc, scope.Read, "")
		e.Message += ": a user's groups through nesting may be any group's"
		return 0, e
	}
	return s.store.TransitiveUserGroups(ctx, uid, opts, list)
}
