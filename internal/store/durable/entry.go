package durable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"
	"unsafe"

	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/writecodec"
	"example.com/groupmembership/membership"
)

// A record of the log (see package wal) holds one entry: an op byte, the
// group id, what the op names, when the op byte has withPrecondition set,
// the precondition, when it has withStamp set, the stamp, and when it has
// withKey set, the Idempotency-Key; or a batch (op 6, batch.go). All
// integers are unsigned varints but the times; a string is its length and
// its bytes. The users, uids and precondition are laid out by package
// writecodec, as the PostgreSQL log's batch column holds them.
//
//	op 1 add, 3 replace   user count, then each uid, a byte of flags (1 a
//	                      nickname follows, 2 an expiry follows), the
//	                      nickname, and the expiry: the time the
//	                      membership ends, in milliseconds since
//	                      1970-01-01 UTC, 0 for one made permanent (never
//	                      a TTL: the committer turns one into the time it
//	                      sets before it writes the record, see setTime)
//	op 2 remove           uid count, then each uid
//	op 4 delete_group     nothing
//	op 5 remove_user      uid count (1), then the uid; the group id is ""
//	op 7 expire           uid count (at least 1), then each uid, then the
//	                      time its expiries were due as of (Write.AsOf),
//	                      in milliseconds since 1970-01-01 UTC (a signed,
//	                      zigzag varint)
//	precondition          a byte of flags (1 Exists, 2 Empty), revision
//	                      count, then each revision
//	stamp                 the time the change was committed, in
//	                      milliseconds since 1970-01-01 UTC (a signed,
//	                      zigzag varint), then the actor's uid (0: none)
//	key                   the Idempotency-Key (1 to 255 printable ASCII
//	                      bytes), then its fingerprint, 16 bytes; only
//	                      after a stamp, whose time is the one the key is
//	                      remembered from
//	op 6 batch            no group id: the stamp, then, when the op byte
//	                      has withKey set (its only flag), the batch's key
//	                      as an entry's, then the write count (at least 1,
//	                      or 0 with a key), then each write as the record
//	                      of its op (1 to 4) holds it, op byte and
//	                      precondition included, but with no stamp (the
//	                      batch's is its writes') and no key
//
// Records of ops 1 and 2 without a precondition or a stamp are as every
// build before the other ops wrote them. This build stamps every record
// it writes (logs of version 4); a record without a stamp, from an older
// build, is applied with no time and no actor. Keys came with logs of
// version 6: a record without one is as version 5 wrote it. Expiries (a
// user's flag 2, and op 7) came with logs of version 7: a record without
// them is as version 6 wrote it. A record is read alike whatever the
// version of its log: one of an older log that holds an expiry, which no
// build wrote, is applied as one of version 7.
const (
	opAdd         byte = 1
	opRemove      byte = 2
	opReplace     byte = 3
	opDeleteGroup byte = 4
	opRemoveUser  byte = 5
	opExpire      byte = 7

	// withPrecondition is set in the op byte of an entry with a
	// precondition.
	withPrecondition byte = 0x80
	// withStamp is set in the op byte of an entry with a time and an
	// actor.
	withStamp byte = 0x40
	// withKey is set in the op byte of an entry, or a batch, with an
	// Idempotency-Key.
	withKey byte = 0x20
)

// keyBytes is the most bytes a key takes in a record beside its own: its
// length and its fingerprint.
const keyBytes = binary.MaxVarintLen16 + len(membership.Fingerprint{})

// entryOps maps the op bytes of entries to their ops; opBatch is none.
var entryOps = [...]membership.Op{
	opAdd:         membership.OpAdd,
	opRemove:      membership.OpRemove,
	opReplace:     membership.OpReplace,
	opDeleteGroup: membership.OpDeleteGroup,
	opRemoveUser:  membership.OpRemoveUser,
	opExpire:      membership.OpExpire,
}

// MaxPreconditionRevisions bounds the revisions of a precondition that a
// write may give beyond those the group has already passed, which the log
// leaves out: a write with more is refused (CodeInvalidQuery), so that
// LargestEntry bounds every record. The HTTP layer takes at most as many
// entity tags in an If-Match, so its clients never meet the refusal.
const MaxPreconditionRevisions = membership.MaxPreconditionRevisions

// MaxExpireUIDs bounds the uids of an expire write (membership.OpExpire),
// as memory's DueExpiries gives them.
const MaxExpireUIDs = 10000

// record is what one record of the log holds: a write (*entry) or a batch
// (*batchEntry).
type record interface {
	// cost returns about how many bytes it holds in memory while it waits
	// to be written.
	cost() int64
	// appendTo appends it to b as a record's payload.
	appendTo(b []byte) []byte
	// applyTo applies it to m. Memory gives it its revision, so replaying
	// the log after the same snapshot gives every change the revision it
	// had; and checks its preconditions, so a change that another
	// overtook between its check and its turn fails, taking no revision,
	// when it is replayed too.
	applyTo(m *memory.Store) result
	// setTime gives it the time of its commit, which its record keeps,
	// and turns every TTL of its users into the time it sets as of t
	// (membership.ResolveTTLs): a record keeps times only, so that a
	// replay gives every membership the expiry it had.
	setTime(t time.Time)
}

// decodeRecord decodes a record's payload: an entry or a batch.
func decodeRecord(payload []byte) (record, error) {
	if len(payload) > 0 && payload[0]&^withKey == opBatch { // no other flag: see appendBatch
		return decodeBatch(payload)
	}
	return decodeEntry(payload)
}

// entry is one write as the log holds it: the request, not its effects,
// with the time the committer gave it. Replaying it applies it to memory
// as it was applied when it was written, precondition and time included,
// so it gives the same revision and time, or fails the same way.
type entry membership.Write

func (c *entry) appendTo(b []byte) []byte { return appendEntry(b, c) }

// applyTo takes c's time as it is: a change the committer stamped gets the
// time it got when it was first applied, and one an older build logged
// without a time gets none. A keyed write is applied once for its key, as
// of that time: a repeat that was logged before its first write was
// applied is a replay (memory decides, as it does on every replay of the
// log), and its caller gets the first write's Result, Replayed.
func (c *entry) applyTo(m *memory.Store) result {
	res, err := m.ApplyLogged(membership.Write(*c))
	return result{res: res, err: err}
}

func (c *entry) setTime(t time.Time) {
	c.Time = t
	c.Users = membership.ResolveTTLs(c.Users, t)
}

// cost returns about how many bytes c holds in memory while it waits to be
// written: its users or uids, their nicknames and expiries, its revisions,
// its key and its record.
func (c *entry) cost() int64 {
	const overhead = 256 // the entry, its pending and result, the record's framing
	n := int64(overhead + 2*len(c.GroupID) + (len(c.UIDs)+len(c.If.Revisions))*(8+varintMax))
	for _, u := range c.Users {
		n += int64(unsafe.Sizeof(u)) + varintMax + int64(2*len(u.Nickname))
		if u.Expiry.Set {
			n += varintMax // its time in the record; the user holds it already
		}
	}
	return n + keyCost(c.Idem)
}

// keyCost returns what idem's key costs in the queue: its bytes in memory
// and in the record.
func keyCost(idem membership.Idempotency) int64 {
	if idem.Key == "" {
		return 0
	}
	return int64(2*len(idem.Key) + keyBytes)
}

// varintMax is the most bytes a uid takes in a record.
const varintMax = binary.MaxVarintLen64

// appendEntry appends c to b as a record's payload. c's op must be one of
// entryOps, and its users' expiries times (see setTime).
func appendEntry(b []byte, c *entry) []byte {
	op := byte(slices.Index(entryOps[:], c.Op))
	if !c.If.IsZero() {
		op |= withPrecondition
	}
	if !c.Time.IsZero() || c.Actor != 0 || c.Idem.Key != "" {
		op |= withStamp
	}
	if c.Idem.Key != "" {
		op |= withKey
	}
	b = writecodec.AppendString(append(b, op), c.GroupID)
	switch c.Op {
	case membership.OpAdd, membership.OpReplace:
		b = writecodec.AppendUsers(b, c.Users)
	case membership.OpRemove, membership.OpRemoveUser:
		b = writecodec.AppendUIDs(b, c.UIDs)
	case membership.OpExpire:
		b = writecodec.AppendUIDs(b, c.UIDs)
		b = binary.AppendVarint(b, c.AsOf.UnixMilli())
	}
	if op&withPrecondition != 0 {
		b = writecodec.AppendPrecondition(b, c.If)
	}
	if op&withStamp != 0 {
		b = appendStamp(b, c.Time, c.Actor)
	}
	if op&withKey != 0 {
		b = appendKey(b, c.Idem)
	}
	return b
}

// appendKey appends an Idempotency-Key: the key, then its fingerprint.
func appendKey(b []byte, idem membership.Idempotency) []byte {
	return append(writecodec.AppendString(b, idem.Key), idem.Fingerprint[:]...)
}

// readKey reads an Idempotency-Key. It refuses what no build writes: a key
// that the Service refuses, or a fingerprint of zeros (the store gives a
// write with none the request's own before it logs it).
func readKey(r *bytes.Reader) (membership.Idempotency, error) {
	var idem membership.Idempotency
	var err error
	if idem.Key, err = writecodec.ReadString(r); err != nil {
		return idem, err
	}
	if err := membership.ValidateIdempotencyKey(idem.Key); err != nil {
		return idem, err
	}
	if _, err := io.ReadFull(r, idem.Fingerprint[:]); err != nil {
		return idem, err
	}
	if idem.Fingerprint == (membership.Fingerprint{}) {
		return idem, errors.New("a key without a fingerprint")
	}
	return idem, nil
}

// appendStamp appends a stamp: t, in milliseconds since 1970, and actor.
func appendStamp(b []byte, t time.Time, actor membership.UID) []byte {
	b = binary.AppendVarint(b, t.UnixMilli())
	return binary.AppendUvarint(b, uint64(actor))
}

// decodeEntry decodes a record's payload. It refuses what appendEntry
// never writes, so that damage that a checksum missed is not applied.
func decodeEntry(payload []byte) (*entry, error) {
	r := bytes.NewReader(payload)
	c, err := readEntry(r)
	if err != nil {
		return nil, err
	}
	if r.Len() != 0 {
		return nil, errors.New("trailing bytes in record")
	}
	return c, nil
}

// readEntry reads one entry, as appendEntry writes it, from r.
func readEntry(r *bytes.Reader) (*entry, error) {
	op, err := r.ReadByte()
	if err != nil {
		return nil, err
	}
	kind := op &^ (withPrecondition | withStamp | withKey)
	if kind == 0 || int(kind) >= len(entryOps) || entryOps[kind] == "" {
		return nil, fmt.Errorf("unknown op %d", op)
	}
	c := &entry{Op: entryOps[kind]}
	if c.GroupID, err = writecodec.ReadString(r); err != nil {
		return nil, err
	}
	switch kind {
	case opAdd, opReplace:
		c.Users, err = writecodec.ReadUsers(r)
	case opRemove, opRemoveUser:
		c.UIDs, err = writecodec.ReadUIDs(r)
	case opExpire:
		c.UIDs, err = writecodec.ReadUIDs(r)
		if err == nil {
			var ms int64
			ms, err = binary.ReadVarint(r)
			c.AsOf = time.UnixMilli(ms).UTC()
		}
	}
	if err != nil {
		return nil, err
	}
	switch {
	case kind == opRemoveUser && (len(c.UIDs) != 1 || c.GroupID != ""):
		return nil, errors.New("a remove_user names one uid and no group")
	case kind == opExpire && (len(c.UIDs) == 0 || c.GroupID == ""):
		return nil, errors.New("an expire names a group and at least one uid")
	}
	if op&withPrecondition != 0 {
		if c.If, err = writecodec.ReadPrecondition(r); err != nil {
			return nil, err
		}
	}
	if op&withStamp != 0 {
		if err := readStamp(r, &c.Time, &c.Actor); err != nil {
			return nil, err
		}
	}
	if op&withKey != 0 {
		if op&withStamp == 0 {
			return nil, errors.New("a key without a stamp")
		}
		if c.Idem, err = readKey(r); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// readStamp reads a stamp: a time and an actor.
func readStamp(r *bytes.Reader, t *time.Time, actor *membership.UID) error {
	ms, err := binary.ReadVarint(r)
	if err != nil {
		return err
	}
	uid, err := binary.ReadUvarint(r)
	if err != nil {
		return err
	}
	if uid > math.MaxInt64 {
		return fmt.Errorf("actor %d is not a uid", uid)
	}
	*t, *actor = time.UnixMilli(ms).UTC(), membership.UID(uid)
	return nil
}

// LargestEntry bounds the log record of one change that requests of at
// most maxBodyBytes and maxUsers users can ask for, as appendEntry and
// appendBatch lay it out, whatever its op; a batch's writes are at most
// maxBatchWrites (the HTTP layer's limit, membership.DefaultMaxBatchWrites
// by default), and its users in all at most maxUsers. An entry is never
// larger than the body that asked for it (a user costs at least two bytes
// in a body, "1,", and two in an entry) but for the group id, which comes
// in the path, the precondition, which comes in headers: its flags and at
// most MaxPreconditionRevisions revisions, the stamp, a time and a uid,
// the Idempotency-Key, which comes in a header too: at most
// membership.MaxIdempotencyKeyBytes and its fingerprint, and each user's
// expiry, whose time a body may name in fewer bytes than the record's (at
// most binary.MaxVarintLen64); nor than maxUsers users with the longest
// nicknames and expiries. A replace names its users as an add does; a
// delete_group or a remove_user less. A batch is its op byte, stamp, key
// and count, then each write as an entry: a group id and a precondition
// per write (both in its body, but counted as if they were not), and the
// users of all of them, bounded as one entry's. An expire, the service's
// own write, comes from no request: it names at most MaxExpireUIDs uids,
// whatever the limits, and its time.
func LargestEntry(maxBodyBytes int64, maxUsers, maxBatchWrites int) int64 {
	const stamp = 2 * binary.MaxVarintLen64
	const key = membership.MaxIdempotencyKeyBytes + keyBytes
	const perChange = 1 + binary.MaxVarintLen64 + binary.MaxVarintLen16 + membership.MaxGroupIDBytes + stamp
	const precondition = 1 + binary.MaxVarintLen16 + MaxPreconditionRevisions*binary.MaxVarintLen64
	const expiry = binary.MaxVarintLen64 // its flag is in the user's byte of flags
	const perUser = binary.MaxVarintLen64 + 1 + binary.MaxVarintLen16 + membership.MaxNicknameBytes + expiry
	const expire = perChange + precondition + key + MaxExpireUIDs*binary.MaxVarintLen64 + binary.MaxVarintLen64
	users := min(maxBodyBytes+int64(maxUsers)*expiry, int64(maxUsers)*perUser)
	batch := int64(1+binary.MaxVarintLen64+key) + int64(max(maxBatchWrites, 1))*(perChange+precondition)
	return max(batch+users, int64(expire)) // a single write's is perChange + precondition + key + users, no more
}
