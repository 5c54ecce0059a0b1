package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"example.com/groupmembership/internal/store/writecodec"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
)

// opBatch is the op of a batch's row (migration 0004).
const opBatch int16 = 6

// A batch's row holds its writes in its batch column, as appendBatch lays
// them out: the write count, then each write as
//
//	op          a byte: 1 add, 2 remove, 3 replace, 4 delete_group,
//	            8 add_groups, 9 remove_groups, 10 replace_groups, 14
//	            set_group, with 0x80 set when a precondition follows
//	group id    its length and its bytes
//	add, replace  the users (writecodec.AppendUsers: each uid, a byte of
//	            flags, 1 a nickname follows, 2 an expiry follows, then
//	            those)
//	remove      the uid count, then each uid
//	delete_group  nothing
//	add_groups, remove_groups, replace_groups  the subgroups
//	            (writecodec.AppendSubgroups: each id, a byte that says
//	            whether an expiry follows (1) or not (0), and the expiry:
//	            milliseconds since 1970, 0 for a nesting made permanent);
//	            a remove_groups has none
//	set_group   the attributes (writecodec.AppendGroupAttributes)
//	precondition  a byte of flags (1 Exists, 2 Empty), the revision count,
//	            then each revision
//
// All integers are unsigned varints; a string is its length and its bytes.
// The users, uids, subgroups and precondition are laid out by package
// writecodec, as the records of a data directory's log hold them. The
// batch's actor, time and bound on depth are the row's, once for the
// whole batch.
const withPrecondition byte = 0x80

// opNumber returns op's number in ops, 0 for none.
func opNumber(op membership.Op) byte {
	for n, known := range ops {
		if known == op && op != "" {
			return byte(n)
		}
	}
	return 0
}

// appendBatch appends ws, whose ops a batch takes (writecodec.BatchTakes), to b.
func appendBatch(b []byte, ws []membership.Write) []byte {
	b = binary.AppendUvarint(b, uint64(len(ws)))
	for _, w := range ws {
		op := opNumber(w.Op)
		if !w.If.IsZero() {
			op |= withPrecondition
		}
		b = writecodec.AppendString(append(b, op), w.GroupID)
		switch w.Op {
		case membership.OpAdd, membership.OpReplace:
			b = writecodec.AppendUsers(b, w.Users)
		case membership.OpRemove:
			b = writecodec.AppendUIDs(b, w.UIDs)
		case membership.OpAddGroups, membership.OpReplaceGroups:
			b = writecodec.AppendSubgroups(b, w.Subgroups)
		case membership.OpRemoveGroups: // a remove ignores expiries: none is written
			ids := make([]membership.Subgroup, len(w.Subgroups))
			for i, g := range w.Subgroups {
				ids[i].GroupID = g.GroupID
			}
			b = writecodec.AppendSubgroups(b, ids)
		case membership.OpSetGroup:
			b = writecodec.AppendGroupAttributes(b, *w.Group)
		}
		if op&withPrecondition != 0 {
			b = writecodec.AppendPrecondition(b, w.If)
		}
	}
	return b
}

// decodeBatch decodes a batch column. It refuses what appendBatch never
// writes, so that a damaged row stops the instance rather than apply
// something else.
func decodeBatch(data []byte) ([]membership.Write, error) {
	r := bytes.NewReader(data)
	n, err := writecodec.ReadCount(r)
	if err != nil {
		return nil, err
	}
	ws := make([]membership.Write, 0, n)
	for i := range n {
		w, err := readWrite(r)
		if err != nil {
			return nil, fmt.Errorf("write %d: %w", i, err)
		}
		ws = append(ws, w)
	}
	if r.Len() != 0 {
		return nil, errors.New("trailing bytes")
	}
	return ws, nil
}

// readWrite reads one write of a batch.
func readWrite(r *bytes.Reader) (membership.Write, error) {
	var w membership.Write
	op, err := r.ReadByte()
	if err != nil {
		return w, err
	}
	kind := op &^ withPrecondition
	if int(kind) >= len(ops) || !writecodec.BatchTakes(ops[kind]) {
		return w, fmt.Errorf("op %d is not one a batch takes", op)
	}
	w.Op = ops[kind]
	if w.GroupID, err = writecodec.ReadString(r); err != nil {
		return w, err
	}
	switch w.Op {
	case membership.OpAdd, membership.OpReplace:
		w.Users, err = writecodec.ReadUsers(r)
	case membership.OpRemove:
		w.UIDs, err = writecodec.ReadUIDs(r)
	case membership.OpAddGroups, membership.OpReplaceGroups:
		w.Subgroups, err = writecodec.ReadSubgroups(r)
	case membership.OpRemoveGroups:
		w.Subgroups, err = writecodec.ReadSubgroups(r)
		if err == nil && slices.ContainsFunc(w.Subgroups, func(g membership.Subgroup) bool { return g.Expiry.Set }) {
			err = errors.New("an expiry on a remove_groups, which never has one")
		}
	case membership.OpSetGroup:
		var a account.GroupAttributes
		a, err = writecodec.ReadGroupAttributes(r)
		w.Group = &a
	}
	if err == nil && op&withPrecondition != 0 {
		w.If, err = writecodec.ReadPrecondition(r)
	}
	return w, err
}

// batchOf returns the batch c, a batch's row, holds: ws, with the row's
// actor, principal, Idempotency key and the time it was placed in the log.
func (c change) batchOf(ws []membership.Write) membership.Batch {
	b := membership.Batch{Writes: ws, Time: c.sequencedAt, Idem: c.idem, MaxDepth: c.depth(), MaxAncestors: c.ancestors()}
	if c.actor != nil {
		b.Actor = membership.UID(*c.actor)
	}
	if c.principal != nil {
		b.Principal = *c.principal
	}
	return b
}

// Batch applies b, all or nothing, as one change with one revision (see
// membership.Batch): one row of the log, which every instance applies in
// the order of pos through the memory store's Batch, so that every
// instance decides alike whether its preconditions hold, against the state
// before it. It returns once this instance has applied it, as Write does.
// The change carries b's Actor and Principal and the time the row was
// placed in the log (b's Time and its writes' actors, principals and
// times are not used).
//
// A write of an op a batch does not take is refused. A precondition that
// fails here for good (it names only revisions its group has passed)
// refuses the batch without a row, naming the write; any other goes to
// the log, which settles it. A batch of no write is answered here once
// this instance has applied the log as placed now.
//
// A batch with an Idempotency key (b.Idem) is applied once for its key,
// b.Principal's own, as a keyed Write is: answered here only when this instance has applied
// a change with its key already, otherwise settled by the log, its
// preconditions included.
//
// Its nesting writes are checked for cycles, depth and ancestors
// (b.MaxDepth and MaxAncestors, kept in the row) as the batch is applied,
// each after the writes before it, as a nesting Write is.
//
// Errors: CodePreconditionFailed, CodeIdempotencyKeyReused, CodeCycle,
// CodeTooDeep, CodeTooManyAncestors, CodeUnavailable.
func (s *Store) Batch(ctx context.Context, b membership.Batch) (membership.BatchResult, error) {
	for i, w := range b.Writes {
		if !writecodec.BatchTakes(w.Op) {
			return membership.BatchResult{}, fmt.Errorf("batch element %d: op %q is not one a batch takes", i, w.Op)
		}
	}
	c := batchChange(b)
	if c.idem.Key != "" {
		if res, replayed, err := s.mem.ReplayBatch(b.Principal, c.idem, time.Now()); replayed || err != nil {
			return res, err
		}
	} else {
		for i, w := range b.Writes {
			if st := s.localState(ctx, w); !st.unsure && failsForGood(w.If, st) {
				return membership.BatchResult{}, membership.BatchElementError(i, w.GroupID, membership.PreconditionFailed(st.revision))
			}
		}
		if len(b.Writes) == 0 && s.caughtUp(ctx) {
			return membership.BatchResult{Results: []membership.Result{}, Revision: s.mem.LatestRevision()}, nil
		}
	}
	o := s.submit(ctx, c)
	if o.batch.Replayed {
		s.mem.NoteReplay()
	}
	return o.batch, o.err
}

// batchChange returns b as a row of the log: its writes, its actor and
// principal, its
// Idempotency key with the Service's fingerprint (membership.FingerprintBatch,
// TTLs and all), its bounds on nestings. Each
// user's and subgroup's TTL is turned into the time it sets, counted from
// now, by this instance's clock, as changeOf does: the batch column holds
// times only.
func batchChange(b membership.Batch) change {
	now := time.Now()
	ws := slices.Clone(b.Writes) // b's are the caller's
	for i := range ws {
		ws[i].Users = membership.ResolveTTLs(ws[i].Users, now)
		ws[i].Subgroups = membership.ResolveSubgroupTTLs(ws[i].Subgroups, now)
	}
	c := change{op: opBatch, uids: []int64{}, batch: appendBatch(nil, ws), idem: b.Idem, principal: principalOf(b.Principal)}
	c.setBounds(b.MaxDepth, b.MaxAncestors)
	if b.Actor != 0 {
		actor := int64(b.Actor)
		c.actor = &actor
	}
	return c
}
