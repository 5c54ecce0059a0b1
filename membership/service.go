package membership

import (
	"context"
	"math"
	"time"

	"example.com/groupmembership/membership/account"
	"example.com/groupmembership/membership/scope"
)

// DefaultMaxUsers is the default limit on users in one request.
const DefaultMaxUsers = 10000

// Service applies add, remove and list requests to a Store. It validates each
// request whole before any of it reaches the Store, so a bad request changes
// nothing.
type Service struct {
	store     Store
	maxUsers  int
	maxChecks int
	// maxBatchWrites bounds the writes of one Batch.
	maxBatchWrites int
	// maxDepth bounds the chains of nestings (Write.MaxDepth), and
	// maxAncestors the groups above a group (Write.MaxAncestors).
	maxDepth, maxAncestors int
	// now is the clock expiries are validated against.
	now func() time.Time
}

// ServiceOptions configure NewService. A limit <= 0 takes its default.
type ServiceOptions struct {
	// MaxUsers is the most users one change may name: DefaultMaxUsers.
	MaxUsers int
	// MaxChecks is the most checks one CheckMembers may ask:
	// DefaultMaxChecks.
	MaxChecks int
	// MaxBatchWrites is the most writes one Batch may hold:
	// DefaultMaxBatchWrites.
	MaxBatchWrites int
	// Now is the clock expiries are validated against: time.Now when nil.
	Now func() time.Time
	// MaxDepth bounds the chains of nestings: DefaultMaxDepth, at most
	// MaxMaxDepth.
	MaxDepth int
	// MaxAncestors bounds the groups a group may be below:
	// DefaultMaxAncestors, at most MaxMaxAncestors.
	MaxAncestors int
}

// NewService returns a Service over store with the limits of opts.
func NewService(store Store, opts ServiceOptions) *Service {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Service{store: store, now: opts.Now,
		maxUsers:       limitOr(opts.MaxUsers, DefaultMaxUsers, math.MaxInt),
		maxChecks:      limitOr(opts.MaxChecks, DefaultMaxChecks, math.MaxInt),
		maxBatchWrites: limitOr(opts.MaxBatchWrites, DefaultMaxBatchWrites, math.MaxInt),
		maxDepth:       limitOr(opts.MaxDepth, DefaultMaxDepth, MaxMaxDepth),
		maxAncestors:   limitOr(opts.MaxAncestors, DefaultMaxAncestors, MaxMaxAncestors)}
}

// limitOr returns limit, at most most, or def when limit is not positive.
func limitOr(limit, def, most int) int {
	if limit <= 0 {
		return def
	}
	return min(limit, most)
}

// MaxUsers returns the most users one request may name.
func (s *Service) MaxUsers() int { return s.maxUsers }

// validate checks what every change request must be: a valid group id and
// at most MaxUsers users.
func (s *Service) validate(groupID string, users int) error {
	if err := ValidateGroupID(groupID); err != nil {
		return err
	}
	if users > s.maxUsers {
		return Errorf(CodeTooManyUsers, "users has more than %d elements", s.maxUsers)
	}
	return nil
}

// ListMembers calls list with the members of the group that opts selects, in
// ascending uid order, and returns the revision listed; see
// Store.ListMembers.
//
// Errors: CodeInvalidGroupID, CodeInvalidQuery, and whatever the Store
// returns.
func (s *Service) ListMembers(ctx context.Context, groupID string, opts ListOptions, list ListFunc) (Revision, error) {
	if err := ValidateGroupID(groupID); err != nil {
		return 0, err
	}
	if err := opts.Validate(); err != nil {
		return 0, err
	}
	if err := authorizeRead(scope.Of(ctx), groupID); err != nil {
		return 0, err
	}
	return s.store.ListMembers(ctx, groupID, opts, list)
}

// Member returns the member uid of the group.
//
// Errors: CodeInvalidGroupID, CodeNotMember, and whatever the Store returns.
func (s *Service) Member(ctx context.Context, groupID string, uid UID) (Member, error) {
	if err := ValidateGroupID(groupID); err != nil {
		return Member{}, err
	}
	if err := authorizeRead(scope.Of(ctx), groupID); err != nil {
		return Member{}, err
	}
	m, ok, err := s.store.Member(ctx, groupID, uid)
	if err != nil {
		return Member{}, err
	}
	if !ok {
		return Member{}, Errorf(CodeNotMember, "user %d is not a member of the group", uid)
	}
	return m, nil
}

// Epoch returns the store's epoch; see Store.Epoch.
func (s *Service) Epoch() uint64 { return s.store.Epoch() }

// Revision returns the group's current revision; see Store.Revision.
//
// Errors: CodeInvalidGroupID, and whatever the Store returns.
func (s *Service) Revision(ctx context.Context, groupID string) (Revision, error) {
	if err := ValidateGroupID(groupID); err != nil {
		return 0, err
	}
	if err := authorizeRead(scope.Of(ctx), groupID); err != nil {
		return 0, err
	}
	return s.store.Revision(ctx, groupID)
}

// UserGroups calls list with the groups uid is in, as opts selects; see
// Store.UserGroups. Its revision is 0: a direct list has none (the groups
// through nesting, with theirs, are nestreads.Service's).
//
// Errors: CodeInvalidQuery, and whatever the Store returns.
func (s *Service) UserGroups(ctx context.Context, uid UID, opts GroupListOptions, list GroupListFunc) (Revision, error) {
	if err := opts.Validate(); err != nil {
		return 0, err
	}
	opts.Within = scope.Of(ctx).Readable()
	return 0, s.store.UserGroups(ctx, uid, opts, list)
}

// Changes returns the changes of the store that opts selects, and the store's
// latest revision; see Store.Changes.
//
// Errors: CodeInvalidQuery, CodeChangesGone, and whatever the Store returns.
func (s *Service) Changes(ctx context.Context, opts ChangeOptions) ([]Change, Revision, error) {
	if err := CheckLimit(opts.Limit, MaxPageSize); err != nil {
		return nil, 0, err
	}
	if sc := scope.Of(ctx); !sc.AllowsAll(scope.Read) {
		e := Forbidden(sc, scope.Read, "")
		e.Message += ": the change feed holds the changes of every group"
		return nil, 0, e
	}
	return s.store.Changes(ctx, opts)
}

// CheckLimit returns a CodeInvalidQuery error unless limit is 0 (no limit)
// or from 1 to most: MaxPageSize for what a client asks, one more for the
// page and the one that tells whether another follows. The message names the
// bound clients see, MaxPageSize.
func CheckLimit(limit, most int) error {
	if limit < 0 || limit > most {
		return Errorf(CodeInvalidQuery, "limit %d is not an integer from 1 to %d", limit, MaxPageSize)
	}
	return nil
}

// Write applies w, validated whole first: its op, its group id (but for
// OpRemoveUser), at most MaxUsers users, uids or subgroups, each valid,
// exactly one uid for OpRemoveUser, no group nested in itself, and a
// principal's name that ValidatePrincipal takes, if any. See Store.Write
// and Nesting.
//
// A write with an Idempotency key is fingerprinted here (see Idempotency).
//
// Errors: CodeInvalidGroupID, CodeTooManyUsers, CodeInvalidUsers,
// CodeInvalidUID (OpRemoveUser), CodeInvalidIdempotencyKey,
// CodePreconditionFailed, CodeIdempotencyKeyReused,
// CodeIdempotencyKeyInFlight, CodeMissingGroups, CodeInvalidGroups,
// CodeTooManyGroups, CodeCycle, CodeTooDeep, CodeTooManyAncestors,
// CodeInvalidAttributes,
// CodeUserNameTaken, CodeInactiveUser, CodeInternal (a bad principal's
// name: the service's fault), and whatever the Store returns.
func (s *Service) Write(ctx context.Context, w Write) (Result, error) {
	if err := s.validateWrite(w); err != nil {
		return Result{}, err
	}
	if err := validatePrincipal(w.Principal); err != nil {
		return Result{}, err
	}
	if err := authorizeWrite(scope.Of(ctx), w); err != nil {
		return Result{}, err
	}
	if IsNestingOp(w.Op) {
		w.MaxDepth, w.MaxAncestors = s.maxDepth, s.maxAncestors
	}
	if w.Idem.Key != "" {
		if err := ValidateIdempotencyKey(w.Idem.Key); err != nil {
			return Result{}, err
		}
		w.Idem.Fingerprint = FingerprintWrite(w)
	} else if w.If.neverHolds() && w.Op != OpSetUser && w.Op != OpDeleteUser { // a user's: the store answers
		return Result{}, s.failNever(ctx, w.GroupID)
	}
	if !removesSubgroups(w) {
		res, err := s.store.Write(ctx, w)
		return res, hideGroups(scope.Of(ctx), err)
	}
	var res Result
	err := s.applyChecked(ctx, []Write{w}, w.Idem.Key != "", nil, func(ws []Write) (err error) {
		res, err = s.store.Write(ctx, ws[0])
		return err
	})
	return res, hideGroups(scope.Of(ctx), err)
}

// failNever returns the CodePreconditionFailed error of a write to groupID
// whose precondition can never hold (NeverHolds), with the group's current
// revision, without taking the write to the store. A write with an
// Idempotency key goes to the store all the same: a repeat of one applied
// before gets its reply, which only the store knows.
func (s *Service) failNever(ctx context.Context, groupID string) error {
	rev, err := s.store.Revision(ctx, groupID)
	if err != nil {
		return err
	}
	return PreconditionFailed(rev)
}

func (s *Service) validateWrite(w Write) error {
	switch w.Op {
	case OpAdd, OpReplace:
		if err := s.validate(w.GroupID, len(w.Users)); err != nil {
			return err
		}
		var now time.Time // read once, for the first expiry: most writes name none
		for i, u := range w.Users {
			err := ValidateUser(u)
			if err == nil && u.Expiry.Set {
				if now.IsZero() {
					now = s.now()
				}
				err = ValidateExpiry(u.Expiry, now)
			}
			if err != nil {
				return Errorf(CodeInvalidUsers, "users element %d: %s", i, ErrorMessage(err))
			}
		}
	case OpRemove:
		if err := s.validate(w.GroupID, len(w.UIDs)); err != nil {
			return err
		}
		for i, uid := range w.UIDs {
			if !ValidUID(uid) {
				return Errorf(CodeInvalidUsers, "users element %d: uid %d is not %s", i, uid, UIDRange)
			}
		}
	case OpDeleteGroup:
		return ValidateGroupID(w.GroupID)
	case OpRemoveUser:
		if len(w.UIDs) != 1 || !ValidUID(w.UIDs[0]) {
			return Errorf(CodeInvalidUID, "the user to remove is not one uid, %s", UIDRange)
		}
		if !w.If.IsZero() {
			return Errorf(CodeInvalidQuery, "removing a user from every group takes no precondition")
		}
	case OpAddGroups, OpRemoveGroups, OpReplaceGroups:
		return s.validateSubgroups(w)
	case OpSetUser, OpDeleteUser, OpSetGroup:
		return validateDirectoryWrite(w)
	case OpExpire, OpExpireGroups:
		return Errorf(CodeInvalidQuery, "expiries are the service's own changes")
	default:
		return Errorf(CodeInternal, "unknown op %q", w.Op)
	}
	return nil
}

// Groups calls list with the groups that have members, as opts selects;
// see Store.Groups.
//
// Errors: CodeInvalidQuery, and whatever the Store returns.
func (s *Service) Groups(ctx context.Context, opts GroupsOptions, list GroupsFunc) (Revision, error) {
	if err := CheckLimit(opts.Limit, MaxPageSize+1); err != nil {
		return 0, err
	}
	if opts.After != "" {
		if err := ValidateGroupID(opts.After); err != nil {
			return 0, Errorf(CodeInvalidQuery, "after is not a group id: %v", err)
		}
	}
	if opts.Prefix != "" {
		if err := ValidateGroupID(opts.Prefix); err != nil {
			return 0, Errorf(CodeInvalidQuery, "prefix is not the start of a group id: %v", err)
		}
	}
	opts.Within = scope.Of(ctx).Readable()
	return s.store.Groups(ctx, opts, list)
}

// validateDirectoryWrite checks a write of a directory op: its one uid and
// Account (none for OpDeleteUser), or its group and Group.
func validateDirectoryWrite(w Write) error {
	var err error
	switch {
	case len(w.Users)+len(w.Subgroups) > 0 || (w.Op == OpSetUser) != (w.Account != nil) || (w.Op == OpSetGroup) != (w.Group != nil):
		return Errorf(CodeInternal, "a %s write with users, groups, or the wrong attributes", w.Op)
	case w.Op == OpSetGroup && len(w.UIDs) == 0:
		if err := ValidateGroupID(w.GroupID); err != nil {
			return err
		}
		err = account.CheckGroup(*w.Group)
	case w.Op == OpSetGroup || w.GroupID != "" || len(w.UIDs) != 1 || !ValidUID(w.UIDs[0]):
		return Errorf(CodeInvalidUID, "a %s write names one user, %s, and no group; a set_group no user", w.Op, UIDRange)
	case w.Account != nil:
		err = account.Check(*w.Account)
	}
	if err != nil {
		return Errorf(CodeInvalidAttributes, "%s", err)
	}
	return nil
}
