package membership

import (
	"context"
	"errors"
	"fmt"
	"time"

	"example.com/groupmembership/membership/scope"
)

// OpBatch is a batch's change: the changes of its writes, in order, under
// one revision (Change.Changes).
const OpBatch Op = "batch"

// MaxBatchRemovals bounds the members a batch's replaces and group
// deletions may hold in all (a group named twice counts twice): a batch
// holds the shards of its groups while it runs, and a million removals take
// about 50 ms in memory. A batch past it is refused whole
// (CodeTooManyChanges); a large group is deleted on its own.
const MaxBatchRemovals = 1_000_000

// DefaultMaxBatchWrites is the default limit on the writes of one batch.
const DefaultMaxBatchWrites = 1000

// Batch is writes to many groups applied all or nothing, as one change with
// one revision: no reader ever sees part of it. Each write is an OpAdd,
// OpRemove, OpReplace, OpDeleteGroup, OpAddGroups, OpRemoveGroups,
// OpReplaceGroups or OpSetGroup, applied in order, each after the
// ones before it. Every write's precondition is checked against the state
// before the batch; if one does not hold, nothing is applied and the error
// is PreconditionFailed naming the write. A user a batch leaves in no group
// is forgotten, nickname included, once the whole batch is applied: a user
// moved from one group to another in one batch keeps its nickname.
type Batch struct {
	Writes []Write
	// Actor, Principal and Time are the batch's, as a Write's are: its
	// writes' own are not used.
	Actor     UID
	Principal string
	Time      time.Time
	// Idem is the batch's, as a Write's is.
	Idem Idempotency
	// MaxDepth and MaxAncestors are as a Write's: the Service sets them.
	MaxDepth     int
	MaxAncestors int
}

// BatchResult is what a batch reports: each write's Result, in order, all
// at the batch's revision (or, when the batch changed nothing, the latest),
// and that revision.
type BatchResult struct {
	Results  []Result
	Revision Revision
	// Replayed says the batch repeats one applied before with its
	// Idempotency-Key: this is that batch's result, and nothing was applied.
	Replayed bool
}

// MaxBatchWrites returns the most writes one Batch may hold.
func (s *Service) MaxBatchWrites() int { return s.maxBatchWrites }

// Batch applies b, validated whole first: at most MaxBatchWrites writes,
// at most MaxUsers users and uids in all, and each write as Write would
// validate it (an OpAdd, OpRemove, OpReplace or OpDeleteGroup), an error
// naming the write's index. See Store.Batch.
//
// Errors: CodeTooManyChanges, CodeTooManyUsers, CodeInvalidChanges (an op a
// batch does not take), the errors of Write, and whatever the Store
// returns, CodePreconditionFailed included.
func (s *Service) Batch(ctx context.Context, b Batch) (BatchResult, error) {
	if err := s.validateBatch(b); err != nil {
		return BatchResult{}, err
	}
	sc := scope.Of(ctx)
	for i, w := range b.Writes {
		if err := authorizeWrite(sc, w); err != nil {
			return BatchResult{}, BatchElementError(i, w.GroupID, err)
		}
	}
	b.MaxDepth, b.MaxAncestors = s.maxDepth, s.maxAncestors
	if b.Idem.Key != "" {
		if err := ValidateIdempotencyKey(b.Idem.Key); err != nil {
			return BatchResult{}, err
		}
		b.Idem.Fingerprint = FingerprintBatch(b)
	} else {
		for i, w := range b.Writes {
			if w.If.neverHolds() {
				return BatchResult{}, BatchElementError(i, w.GroupID, s.failNever(ctx, w.GroupID))
			}
		}
	}
	var res BatchResult
	err := s.applyChecked(ctx, b.Writes, b.Idem.Key != "", BatchElementError, func(ws []Write) (err error) {
		checked := b
		checked.Writes = ws
		res, err = s.store.Batch(ctx, checked)
		return err
	})
	return res, hideGroups(sc, err)
}

// BatchElementError returns err, an error of write i of a batch, to
// groupID, with a message that names the write.
func BatchElementError(i int, groupID string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return elementError("changes", i, groupID, e)
	}
	return fmt.Errorf("changes element %d (group %q): %w", i, groupID, err)
}

// elementError returns e, of element i of a request's list (changes,
// checks), of groupID, with a message naming the element.
func elementError(list string, i int, groupID string, e *Error) *Error {
	named := *e
	named.Message = fmt.Sprintf("%s element %d (group %q): %s", list, i, groupID, e.Message)
	return &named
}

// validateBatch returns the error Batch would return for b before it
// reaches the store, nil when b is valid.
func (s *Service) validateBatch(b Batch) error {
	if err := validatePrincipal(b.Principal); err != nil {
		return err
	}
	if len(b.Writes) > s.maxBatchWrites {
		return Errorf(CodeTooManyChanges, "the batch has more than %d changes", s.maxBatchWrites)
	}
	users := 0
	for _, w := range b.Writes {
		users += len(w.Users) + len(w.UIDs) + len(w.Subgroups)
	}
	if users > s.maxUsers {
		return Errorf(CodeTooManyUsers, "the batch names %d users and groups in all, more than %d", users, s.maxUsers)
	}
	for i, w := range b.Writes {
		err := s.validateWrite(w)
		if err == nil && (w.Op == OpRemoveUser || w.Op == OpSetUser || w.Op == OpDeleteUser) {
			err = Errorf(CodeInvalidChanges, "a batch takes the ops add, remove, replace, delete_group, add_groups, remove_groups, replace_groups and set_group, not %s", w.Op)
		}
		if err != nil {
			e := &Error{Code: ErrorCode(err), Message: ErrorMessage(err)}
			if e.Code == CodeInternal { // an unknown op: the request's fault
				e.Code = CodeInvalidChanges
			}
			e.Message = fmt.Sprintf("changes element %d: %s", i, e.Message)
			return e
		}
	}
	return nil
}
