package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"example.com/groupmembership/internal/store/writecodec"
	"example.com/groupmembership/membership"
)

// opBatch is the op byte of a batch's record. It is set with no flag but
// withKey, withDepth and withPrincipal: each write carries its own
// precondition, and the batch its stamp, always.
const opBatch byte = 6

// withDepth is set in the op byte of a batch with bounds on nestings
// (Batch.MaxDepth, MaxAncestors), which follow its key.
const withDepth byte = 0x40

// Batch is a batch as the log holds it: one record for the whole batch,
// its writes as the request gave them, each with its precondition (less
// the revisions its group had already passed), and the batch's one actor,
// one principal, one time, its commit's, and Idempotency-Key, if it has
// one (its writes have none of their own). Replayed, it is applied as it was applied when
// it was written: every precondition is checked again, against the state
// before the batch, so a batch that another change overtook between its
// check and its turn fails on replay too, taking no revision; one that
// succeeds gets its revision and time again.
type Batch membership.Batch

// Cost is the sum of its writes' costs, each counted as a single write's
// (which counts a stamp), and its key's.
func (c *Batch) Cost() int64 {
	n := keyCost(c.Idem)
	for i := range c.Writes {
		n += (*Write)(&c.Writes[i]).Cost()
	}
	if len(c.Writes) == 0 {
		n += (&Write{}).Cost() // the record of a keyed batch of no write
	}
	return n
}

// Append appends c as a record's payload. c's writes must be of the ops
// writecodec.BatchTakes, and have no actor, principal, time or key of
// their own.
func (c *Batch) Append(b []byte) []byte { return appendBatch(b, c) }

// SetTime implements Record.
func (c *Batch) SetTime(t time.Time) {
	c.Time = t
	for i := range c.Writes {
		c.Writes[i].Users = membership.ResolveTTLs(c.Writes[i].Users, t)
		c.Writes[i].Subgroups = membership.ResolveSubgroupTTLs(c.Writes[i].Subgroups, t)
	}
}

// appendBatch appends c to b as a record's payload: opBatch (with withKey
// when c has a key, withPrincipal when it has a principal, withDepth when
// it has bounds on nestings), the stamp, the principal, the key, the bounds,
// the write count, then each write as appendWrite lays it out.
func appendBatch(b []byte, c *Batch) []byte {
	op := opBatch
	if c.Idem.Key != "" {
		op |= withKey
	}
	if c.MaxDepth != 0 || c.MaxAncestors != 0 {
		op |= withDepth
	}
	if c.Principal != "" {
		op |= withPrincipal
	}
	b = append(b, op)
	b = appendStamp(b, c.Time, c.Actor)
	if op&withPrincipal != 0 {
		b = writecodec.AppendString(b, c.Principal)
	}
	if op&withKey != 0 {
		b = appendKey(b, c.Idem)
	}
	if op&withDepth != 0 {
		b = appendBounds(b, c.MaxDepth, c.MaxAncestors)
	}
	b = binary.AppendUvarint(b, uint64(len(c.Writes)))
	for i := range c.Writes {
		b = appendWrite(b, (*Write)(&c.Writes[i]))
	}
	return b
}

// decodeBatch decodes the payload of a batch's record, which Decode told
// from a write's by its op byte. It refuses what appendBatch never writes:
// a batch of no write (unless it has a key), a write of an op a batch does
// not take, a batch within a batch, a write with a key of its own.
func decodeBatch(payload []byte) (*Batch, error) {
	r := bytes.NewReader(payload[1:])
	c := &Batch{}
	err := readStamp(r, &c.Time, &c.Actor)
	if err != nil {
		return nil, err
	}
	if payload[0]&withPrincipal != 0 {
		if c.Principal, err = readPrincipal(r); err != nil {
			return nil, err
		}
	}
	if payload[0]&withKey != 0 {
		if c.Idem, err = readKey(r); err != nil {
			return nil, err
		}
	}
	if payload[0]&withDepth != 0 {
		if c.MaxDepth, c.MaxAncestors, err = readBounds(r); err != nil {
			return nil, err
		}
		if c.MaxDepth == 0 && c.MaxAncestors == 0 {
			return nil, errors.New("bounds of 0 flagged")
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
		w, err := readWrite(r) // refuses op 6: a batch holds no batch
		switch {
		case err != nil:
			return nil, fmt.Errorf("batch write %d: %w", i, err)
		case !writecodec.BatchTakes(w.Op):
			return nil, fmt.Errorf("batch write %d: a batch takes no %s", i, w.Op)
		case !w.Time.IsZero() || w.Actor != 0 || w.Principal != "":
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
