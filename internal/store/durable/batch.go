package durable

import (
	"context"
	"fmt"
	"time"

	"example.com/groupmembership/internal/store/wal/record"
	"example.com/groupmembership/internal/store/writecodec"
	"example.com/groupmembership/membership"
)

// Batch applies b, all or nothing, as one change with one revision (see
// membership.Batch), once its record is on disk: one record for the whole
// batch, committed as Write's are (sharing fsyncs with them), applied by
// memory's Batch in log order, on commit and on every replay alike. Its
// change carries b's Actor and Principal and the time the committer gave
// it (b's Time and its writes' actors, principals and times are not
// used).
//
// A batch with an Idempotency key (b.Idem) is applied once for its key,
// b.Principal's own, as Write's are: a repeat of one memory remembers is answered its first
// result, Replayed, without a record, before any check (a retry of a batch
// whose precondition held must not fail on the change it made); the key of
// another request is refused, CodeIdempotencyKeyReused. A keyed batch is
// logged with its key, and memory remembers the key when the committer
// applies the record, on every replay too.
//
// b is then checked against memory, read only, write by write: a write
// of an op a batch does not take, or whose precondition fails already,
// refuses the batch at once, without a record, naming the write (a keyed
// batch so refused leaves its key free). Every other batch is logged, one
// that turns out to change nothing included (checks one by one are of no
// one state, so they cannot tell that for sure), and so is a keyed batch
// of no write: memory then applies nothing and gives no revision, on
// replay too, but remembers its key. A batch whose precondition held when
// checked but not when applied (another change came between) is logged,
// refused CodePreconditionFailed, and refused again on replay.
//
// A batch's nesting writes are applied with b.MaxDepth and MaxAncestors,
// which its record keeps, each after the writes before it: a nesting that one of them
// makes possible (a group taken out of another before it is nested the
// other way round) is not refused by a check against the state before the
// batch. So only the first nesting write of a batch that no write before
// it can have changed the nesting of (by a remove_groups, replace_groups
// or delete_group) is checked for a cycle, depth or ancestors before the batch is
// logged: it is then refused without a record. Any other cycle or chain
// too deep is found as memory applies the batch, which is logged, refused
// whole, and refused again on replay.
//
// Its record is bounded by LargestEntry when the caller bounds its writes
// (membership.DefaultMaxBatchWrites) and its users in all (-max-users);
// the queue counts it as its writes' entries. A batch too large for one
// record (MaxEntryBytes) is refused, CodeBodyTooLarge, changing nothing.
//
// Errors: CodePreconditionFailed, CodeCycle, CodeTooDeep,
// CodeTooManyAncestors, CodeInvalidQuery (a precondition naming more than
// record.MaxPreconditionRevisions revisions its group has not passed),
// CodeInvalidUsers or CodeInvalidGroups (an expiry not after 1970),
// CodeIdempotencyKeyReused, CodeUnavailable, CodeBodyTooLarge.
func (d *Store) Batch(_ context.Context, b membership.Batch) (membership.BatchResult, error) {
	var release func()
	if b.Idem.Key != "" {
		var err error
		if release, err = d.keySlots.take(b.Principal, b.Idem.Key, d.opts.CommitTimeout); err != nil {
			return membership.BatchResult{}, err
		}
		defer func() {
			if release != nil {
				release()
			}
		}()
		if res, replayed, err := d.mem.ReplayBatch(b.Principal, b.Idem, time.Now()); replayed || err != nil {
			return res, err
		}
	} else if len(b.Writes) == 0 {
		return membership.BatchResult{Results: []membership.Result{}, Revision: d.mem.LatestRevision()}, nil
	}
	// The committer gives the time.
	c := &record.Batch{Writes: make([]membership.Write, len(b.Writes)), Actor: b.Actor, Principal: b.Principal, Idem: b.Idem,
		MaxDepth: b.MaxDepth, MaxAncestors: b.MaxAncestors}
	for i, w := range b.Writes {
		if !writecodec.BatchTakes(w.Op) {
			return membership.BatchResult{}, fmt.Errorf("batch element %d: op %q is not one a batch takes", i, w.Op)
		}
		check := w
		if membership.IsNestingOp(w.Op) {
			check.Subgroups = nil // its precondition alone: see nestingToCheck
		}
		rev, _, err := d.mem.Check(check)
		if err == nil {
			err = loggable(w)
		}
		if err == nil {
			c.Writes[i] = logged(membership.Write{Op: w.Op, GroupID: w.GroupID, Users: w.Users, UIDs: w.UIDs, Subgroups: w.Subgroups,
				Group: w.Group, MaxDepth: w.MaxDepth, MaxAncestors: w.MaxAncestors, If: w.If})
			c.Writes[i].If.Revisions, err = pendingRevisions(w.If.Revisions, rev)
		}
		if err != nil {
			return membership.BatchResult{}, membership.BatchElementError(i, w.GroupID, err)
		}
	}
	if i, ok := nestingToCheck(b.Writes); ok {
		w := b.Writes[i]
		w.If, w.MaxDepth, w.MaxAncestors = membership.Precondition{}, b.MaxDepth, b.MaxAncestors
		if _, _, err := d.mem.Check(w); err != nil {
			return membership.BatchResult{}, membership.BatchElementError(i, w.GroupID, err) // as memory's Batch refuses it
		}
	}
	r := d.commitHolding(c, release)
	release = nil // the committer's to release, once it has decided c
	return r.batch, r.err
}

// nestingToCheck returns the index of the first nesting write of writes
// when the writes before it cannot have changed the nesting, so that a
// check of it against the state before the batch tells what applying it
// in its turn would: a cycle or a chain too deep there is one then too,
// and no write before it can be the first to make one.
func nestingToCheck(writes []membership.Write) (int, bool) {
	for i, w := range writes {
		switch w.Op {
		case membership.OpAddGroups, membership.OpReplaceGroups:
			return i, true
		case membership.OpRemoveGroups, membership.OpDeleteGroup:
			return 0, false
		}
	}
	return 0, false
}
