package durable

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/writecodec"
	"example.com/groupmembership/membership"
)

// opBatch is the op byte of a batch's record (see entry.go). It is set
// with no flag but withKey: each write carries its own precondition, and
// the batch its stamp, always.
const opBatch byte = 6

// batchEntry is a batch as the log holds it: one record for the whole
// batch, its writes as the request gave them, each with its precondition
// (less the revisions its group had already passed), and the batch's one
// actor, one time, the committer's, and Idempotency-Key, if it has one
// (its writes have none of their own). Replaying it applies it to memory
// as it was applied when it was written: memory checks every precondition
// again, against the state before the batch, so a batch that another
// change overtook between its check and its turn fails on replay too,
// taking no revision; one that succeeds gets its revision and time again.
type batchEntry membership.Batch

// cost is the sum of its writes' costs, each counted as an entry's (which
// counts a stamp), and its key's.
func (c *batchEntry) cost() int64 {
	n := keyCost(c.Idem)
	for i := range c.Writes {
		n += (*entry)(&c.Writes[i]).cost()
	}
	if len(c.Writes) == 0 {
		n += (&entry{}).cost() // the record of a keyed batch of no write
	}
	return n
}

func (c *batchEntry) appendTo(b []byte) []byte { return appendBatch(b, c) }

// applyTo gives the batch's change its time: the committer stamped every
// batch it logged. A keyed batch is applied once for its key, as of that
// time, as a keyed entry is.
func (c *batchEntry) applyTo(m *memory.Store) result {
	res, err := m.BatchLogged(membership.Batch(*c))
	return result{batch: res, err: err}
}

func (c *batchEntry) setTime(t time.Time) {
	c.Time = t
	for i := range c.Writes {
		c.Writes[i].Users = membership.ResolveTTLs(c.Writes[i].Users, t)
	}
}

// appendBatch appends c to b as a record's payload: opBatch (with withKey
// when c has a key), the stamp, the key, the write count, then each write
// as appendEntry lays it out. c's writes must be of the ops batchTakes,
// and have no actor, time or key of their own.
func appendBatch(b []byte, c *batchEntry) []byte {
	op := opBatch
	if c.Idem.Key != "" {
		op |= withKey
	}
	b = append(b, op)
	b = appendStamp(b, c.Time, c.Actor)
	if op&withKey != 0 {
		b = appendKey(b, c.Idem)
	}
	b = binary.AppendUvarint(b, uint64(len(c.Writes)))
	for i := range c.Writes {
		b = appendEntry(b, (*entry)(&c.Writes[i]))
	}
	return b
}

// decodeBatch decodes the payload of a batch's record. It refuses what
// appendBatch never writes: a batch of no write (unless it has a key), a
// write of an op a batch does not take, a batch within a batch, a write
// with a key of its own.
func decodeBatch(payload []byte) (*batchEntry, error) {
	if len(payload) == 0 || payload[0]&^withKey != opBatch {
		return nil, errors.New("not a batch")
	}
	r := bytes.NewReader(payload[1:])
	c := &batchEntry{}
	if err := readStamp(r, &c.Time, &c.Actor); err != nil {
		return nil, err
	}
	if payload[0]&withKey != 0 {
		var err error
		if c.Idem, err = readKey(r); err != nil {
			return nil, err
		}
	}
	n, err := writecodec.ReadCount(r)
	switch {
	case err != nil:
		return nil, err
	case n == 0 && c.Idem.Key == "":
		return nil, errors.New("a batch of no write")
	}
	c.Writes = make([]membership.Write, 0, n)
	for i := range n {
		w, err := readEntry(r) // refuses op 6: a batch holds no batch
		switch {
		case err != nil:
			return nil, fmt.Errorf("batch write %d: %w", i, err)
		case !batchTakes(w.Op):
			return nil, fmt.Errorf("batch write %d: a batch takes no %s", i, w.Op)
		case !w.Time.IsZero() || w.Actor != 0:
			return nil, fmt.Errorf("batch write %d has a stamp of its own", i)
		case w.Idem.Key != "":
			return nil, fmt.Errorf("batch write %d has a key of its own", i)
		}
		c.Writes = append(c.Writes, membership.Write(*w))
	}
	if r.Len() != 0 {
		return nil, errors.New("trailing bytes in record")
	}
	return c, nil
}

// batchTakes reports whether a batch takes writes of op.
func batchTakes(op membership.Op) bool {
	switch op {
	case membership.OpAdd, membership.OpRemove, membership.OpReplace, membership.OpDeleteGroup:
		return true
	}
	return false
}

// Batch applies b, all or nothing, as one change with one revision (see
// membership.Batch), once its record is on disk: one record for the whole
// batch, committed as Write's are (sharing fsyncs with them), applied by
// memory's Batch in log order, on commit and on every replay alike. Its
// change carries b's Actor and the time the committer gave it (b's Time
// and its writes' actors and times are not used).
//
// A batch with an Idempotency key (b.Idem) is applied once for its key,
// as Write's are: a repeat of one memory remembers is answered its first
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
// Its record is bounded by LargestEntry when the caller bounds its writes
// (membership.DefaultMaxBatchWrites) and its users in all (-max-users);
// the queue counts it as its writes' entries. A batch too large for one
// record (MaxEntryBytes) is refused, CodeBodyTooLarge, changing nothing.
//
// Errors: CodePreconditionFailed, CodeInvalidQuery (a precondition naming
// more than MaxPreconditionRevisions revisions its group has not passed),
// CodeInvalidUsers (an expiry not after 1970), CodeInvalidIdempotencyKey,
// CodeIdempotencyKeyReused, CodeUnavailable, CodeBodyTooLarge.
func (d *Store) Batch(_ context.Context, b membership.Batch) (membership.BatchResult, error) {
	var release func()
	if b.Idem.Key != "" {
		var err error
		if b.Idem, err = idempotency(b.Idem, func() membership.Fingerprint { return membership.FingerprintBatch(b) }); err != nil {
			return membership.BatchResult{}, err
		}
		if release, err = d.keySlots.take(b.Idem.Key, d.opts.CommitTimeout); err != nil {
			return membership.BatchResult{}, err
		}
		defer func() {
			if release != nil {
				release()
			}
		}()
		if res, replayed, err := d.mem.ReplayBatch(b.Idem, time.Now()); replayed || err != nil {
			return res, err
		}
	} else if len(b.Writes) == 0 {
		return membership.BatchResult{Results: []membership.Result{}, Revision: d.mem.LatestRevision()}, nil
	}
	// The committer gives the time.
	c := &batchEntry{Writes: make([]membership.Write, len(b.Writes)), Actor: b.Actor, Idem: b.Idem}
	for i, w := range b.Writes {
		if !batchTakes(w.Op) {
			return membership.BatchResult{}, fmt.Errorf("batch element %d: op %q is not one a batch takes", i, w.Op)
		}
		rev, _, err := d.mem.Check(w)
		if err == nil {
			err = loggable(w)
		}
		if err == nil {
			c.Writes[i] = membership.Write{Op: w.Op, GroupID: w.GroupID, Users: w.Users, UIDs: w.UIDs, If: w.If}
			c.Writes[i].If.Revisions, err = pendingRevisions(w.If.Revisions, rev)
		}
		if err != nil {
			return membership.BatchResult{}, memory.BatchElementError(i, w.GroupID, err)
		}
	}
	r := d.commitHolding(c, release)
	release = nil // the committer's to release, once it has decided c
	return r.batch, r.err
}
