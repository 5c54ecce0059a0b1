// Package record is what one record of the data directory's log holds:
// a write or a batch as the request gave it, with the stamp (the time of
// its commit, its actor and its principal) and the Idempotency-Key its
// store gave it. It lays them out in bytes and reads them back; package
// wal frames the bytes in the log's files, and the durable store applies
// what is read.
//
// A record holds one write: an op byte, the group id, what the op names,
// when the op byte has withPrecondition set, the precondition, when it has
// withStamp set, the stamp, when it has withPrincipal set, the principal,
// and when it has withKey set, the Idempotency-Key; or a batch (op 6,
// batch.go). All integers are unsigned varints but the times; a string is
// its length and its bytes. The users, uids, subgroups, account, group
// attributes and precondition are laid out by package writecodec, each
// expiry a time, never a TTL (the committer turns one into the time it
// sets before it writes the record, see SetTime).
//
//	op 1 add, 3 replace   the users
//	op 2 remove           the uids
//	op 4 delete_group     nothing
//	op 5 remove_user      the uids (one); the group id is ""
//	op 7 expire           the uids (at least one), then the time their
//	                      expiries were due as of (Write.AsOf), in
//	                      milliseconds since 1970-01-01 UTC (a signed,
//	                      zigzag varint)
//	op 8 add_groups,      the subgroups, then the bounds the write was
//	op 10 replace_groups  checked against, so that a replay refuses what
//	                      the commit refused: a uvarint, the bound on
//	                      depth (Write.MaxDepth, 0 none) plus 2048 times
//	                      the bound on ancestors (Write.MaxAncestors, 0
//	                      none: logs written before it hold none)
//	op 9 remove_groups    the subgroups
//	op 11 expire_groups   the subgroups (at least one), then the time they
//	                      were due as of, as op 7's
//	op 12 set_user        the uids (one), then the account; the group id
//	                      is ""
//	op 13 delete_user     the uids (one); the group id is ""
//	op 14 set_group       the group's attributes
//	stamp                 the time the change was committed, in
//	                      milliseconds since 1970-01-01 UTC (a signed,
//	                      zigzag varint), then the actor's uid (0: none)
//	principal             the principal's name (scope.ValidatePrincipal);
//	                      only after a stamp
//	key                   the Idempotency-Key (1 to 255 printable ASCII
//	                      bytes), then its fingerprint, 16 bytes; only
//	                      after a stamp, whose time is the one the key is
//	                      remembered from
//	op 6 batch            no group id: the stamp, then, when the op byte
//	                      has withPrincipal set, the batch's principal,
//	                      when it has withKey set, the batch's key as a
//	                      write's, then, when it has withDepth set, the
//	                      batch's bounds (Batch.MaxDepth and MaxAncestors)
//	                      as a nesting write lays them out, then the write
//	                      count (at least 1, or 0 with a key), then each
//	                      write as the record of its op (1 to 4, 8 to 10,
//	                      14) holds it, op byte and precondition included,
//	                      but with no stamp (the batch's is its writes'),
//	                      no principal and no key
//
// Every record written has a stamp; one without, which logs of older
// versions hold, has no time, no actor and no principal; one with a stamp
// but no principal (logs of version 8 and before hold only those) has no
// principal. A record is read alike whatever the version of its log
// (docs/design.md says which version brought what).
package record

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

	"example.com/groupmembership/internal/store/writecodec"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
	"example.com/groupmembership/membership/scope"
)

// The flags of the op byte, whose low bits are the op's number in
// writecodec.Ops.
const (
	// withPrecondition is set in the op byte of a write with a
	// precondition.
	withPrecondition byte = 0x80
	// withStamp is set in the op byte of a write with a time and an
	// actor.
	withStamp byte = 0x40
	// withKey is set in the op byte of a write, or a batch, with an
	// Idempotency-Key.
	withKey byte = 0x20
	// withPrincipal is set in the op byte of a write, or a batch, with a
	// principal (version 9 on).
	withPrincipal byte = 0x10
)

// keyBytes is the most bytes a key takes in a record beside its own: its
// length and its fingerprint.
const keyBytes = binary.MaxVarintLen16 + len(membership.Fingerprint{})

// MaxPreconditionRevisions bounds the revisions of a precondition that a
// write may give beyond those the group has already passed, which the log
// leaves out: a store refuses a write with more (CodeInvalidQuery), so
// that Largest bounds every record. The HTTP layer takes at most as many
// entity tags in an If-Match, so its clients never meet the refusal.
const MaxPreconditionRevisions = membership.MaxPreconditionRevisions

// MaxExpireUIDs bounds the uids of an expire write (membership.OpExpire),
// as memory's DueExpiries gives them.
const MaxExpireUIDs = 10000

// MaxExpireGroups bounds the subgroups of an expire_groups write
// (membership.OpExpireGroups), as MaxExpireUIDs bounds an expire's uids.
const MaxExpireGroups = 10000

// Record is what one record of the log holds: a *Write or a *Batch.
type Record interface {
	// Append appends it to b as a record's payload.
	Append(b []byte) []byte
	// SetTime gives it the time of its commit, which its record keeps,
	// and turns every TTL of its users and subgroups into the time it
	// sets as of t (membership.ResolveTTLs, ResolveSubgroupTTLs): a
	// record keeps times only, so that a replay gives every membership
	// and nesting the expiry it had.
	SetTime(t time.Time)
	// Cost returns about how many bytes it holds in memory while it waits
	// to be written, its record included.
	Cost() int64
}

// Decode decodes a record's payload: a write or a batch.
func Decode(payload []byte) (Record, error) {
	if len(payload) > 0 && payload[0]&^(withKey|withDepth|withPrincipal) == opBatch { // no other flag: see appendBatch
		return decodeBatch(payload)
	}
	return decodeWrite(payload)
}

// Write is one write as the log holds it: the request, not its effects,
// with the time its commit gave it. Replayed, it is applied as it was
// applied when it was written, precondition and time included, so it
// gives the same revision and time, or fails the same way.
type Write membership.Write

// Append appends w as a record's payload. w's op must be one of writecodec.Ops but OpBatch,
// and its users' expiries times (see SetTime).
func (w *Write) Append(b []byte) []byte { return appendWrite(b, w) }

// SetTime implements Record.
func (w *Write) SetTime(t time.Time) {
	w.Time = t
	w.Users = membership.ResolveTTLs(w.Users, t)
	w.Subgroups = membership.ResolveSubgroupTTLs(w.Subgroups, t)
}

// Cost returns about how many bytes w holds in memory while it waits to be
// written: its users or uids, their nicknames and expiries, its
// subgroups, its account or group attributes, its revisions, its key and
// its record.
func (w *Write) Cost() int64 {
	const overhead = 256 // the write, its place in a queue and its result, the record's framing
	n := int64(overhead + 2*len(w.GroupID) + (len(w.UIDs)+len(w.If.Revisions))*(8+varintMax))
	for _, u := range w.Users {
		n += int64(unsafe.Sizeof(u)) + varintMax + int64(2*len(u.Nickname))
		if u.Expiry.Set {
			n += varintMax // its time in the record; the user holds it already
		}
	}
	for _, g := range w.Subgroups {
		n += int64(unsafe.Sizeof(g)) + 2*varintMax + int64(2*len(g.GroupID))
	}
	if w.Account != nil {
		n += int64(unsafe.Sizeof(*w.Account)) + writecodec.AccountBytes
	}
	if w.Group != nil {
		n += int64(unsafe.Sizeof(*w.Group)) + writecodec.GroupAttributesBytes
	}
	return n + keyCost(w.Idem)
}

// keyCost returns what idem's key costs in memory: its bytes there and in
// the record.
func keyCost(idem membership.Idempotency) int64 {
	if idem.Key == "" {
		return 0
	}
	return int64(2*len(idem.Key) + keyBytes)
}

// varintMax is the most bytes a uid takes in a record.
const varintMax = binary.MaxVarintLen64

// appendWrite appends w to b as a record's payload.
func appendWrite(b []byte, w *Write) []byte {
	op := byte(slices.Index(writecodec.Ops[:], w.Op))
	if !w.If.IsZero() {
		op |= withPrecondition
	}
	if !w.Time.IsZero() || w.Actor != 0 || w.Idem.Key != "" || w.Principal != "" {
		op |= withStamp
	}
	if w.Principal != "" {
		op |= withPrincipal
	}
	if w.Idem.Key != "" {
		op |= withKey
	}
	b = writecodec.AppendString(append(b, op), w.GroupID)
	switch w.Op { // what the op names
	case membership.OpAdd, membership.OpReplace:
		b = writecodec.AppendUsers(b, w.Users)
	case membership.OpRemove, membership.OpRemoveUser, membership.OpExpire, membership.OpSetUser, membership.OpDeleteUser:
		b = writecodec.AppendUIDs(b, w.UIDs)
	case membership.OpAddGroups, membership.OpRemoveGroups, membership.OpReplaceGroups, membership.OpExpireGroups:
		b = writecodec.AppendSubgroups(b, w.Subgroups)
	}
	switch w.Op { // and what follows it
	case membership.OpExpire, membership.OpExpireGroups:
		b = binary.AppendVarint(b, w.AsOf.UnixMilli())
	case membership.OpAddGroups, membership.OpReplaceGroups:
		b = appendBounds(b, w.MaxDepth, w.MaxAncestors)
	case membership.OpSetUser:
		b = writecodec.AppendAccount(b, *w.Account)
	case membership.OpSetGroup:
		b = writecodec.AppendGroupAttributes(b, *w.Group)
	}
	if op&withPrecondition != 0 {
		b = writecodec.AppendPrecondition(b, w.If)
	}
	if op&withStamp != 0 {
		b = appendStamp(b, w.Time, w.Actor)
	}
	if op&withPrincipal != 0 {
		b = writecodec.AppendString(b, w.Principal)
	}
	if op&withKey != 0 {
		b = appendKey(b, w.Idem)
	}
	return b
}

// readPrincipal reads a principal's name. It refuses what no build
// writes: a name the Service refuses.
func readPrincipal(r *bytes.Reader) (string, error) {
	name, err := writecodec.ReadString(r)
	if err != nil {
		return "", err
	}
	return name, scope.ValidatePrincipal(name)
}

// appendKey appends an Idempotency-Key: the key, then its fingerprint.
func appendKey(b []byte, idem membership.Idempotency) []byte {
	return append(writecodec.AppendString(b, idem.Key), idem.Fingerprint[:]...)
}

// readKey reads an Idempotency-Key. It refuses what no build writes: a key
// that the Service refuses, or a fingerprint of zeros (the Service
// fingerprints every keyed write before a store logs it).
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

// decodeWrite decodes a write's payload. It refuses what appendWrite
// never writes, so that damage that a checksum missed is not applied.
func decodeWrite(payload []byte) (*Write, error) {
	r := bytes.NewReader(payload)
	w, err := readWrite(r)
	if err != nil {
		return nil, err
	}
	if r.Len() != 0 {
		return nil, errors.New("trailing bytes in record")
	}
	return w, nil
}

// readWrite reads one write, as appendWrite writes it, from r.
func readWrite(r *bytes.Reader) (*Write, error) {
	op, err := r.ReadByte()
	if err != nil {
		return nil, err
	}
	kind := op &^ (withPrecondition | withStamp | withKey | withPrincipal)
	if kind == 0 || kind == opBatch || int(kind) >= len(writecodec.Ops) {
		return nil, fmt.Errorf("unknown op %d", op)
	}
	w := &Write{Op: writecodec.Ops[kind]}
	if w.GroupID, err = writecodec.ReadString(r); err != nil {
		return nil, err
	}
	if err := readWhat(r, w); err != nil {
		return nil, err
	}
	if op&withPrecondition != 0 {
		if w.If, err = writecodec.ReadPrecondition(r); err != nil {
			return nil, err
		}
	}
	if op&withStamp != 0 {
		if err := readStamp(r, &w.Time, &w.Actor); err != nil {
			return nil, err
		}
	}
	if op&withPrincipal != 0 {
		if op&withStamp == 0 {
			return nil, errors.New("a principal without a stamp")
		}
		if w.Principal, err = readPrincipal(r); err != nil {
			return nil, err
		}
	}
	if op&withKey != 0 {
		if op&withStamp == 0 {
			return nil, errors.New("a key without a stamp")
		}
		if w.Idem, err = readKey(r); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// readWhat reads into w what a write of its op names: its users, or its
// uids (and, for an expire, its time), and refuses what no write of its op
// names.
func readWhat(r *bytes.Reader, w *Write) error {
	var err error
	switch w.Op { // what the op names, as appendWrite lays it out
	case membership.OpAdd, membership.OpReplace:
		w.Users, err = writecodec.ReadUsers(r)
	case membership.OpRemove, membership.OpRemoveUser, membership.OpExpire, membership.OpSetUser, membership.OpDeleteUser:
		w.UIDs, err = writecodec.ReadUIDs(r)
	case membership.OpAddGroups, membership.OpRemoveGroups, membership.OpReplaceGroups, membership.OpExpireGroups:
		w.Subgroups, err = writecodec.ReadSubgroups(r)
	}
	if err != nil {
		return err
	}
	switch w.Op { // and what follows it
	case membership.OpExpire, membership.OpExpireGroups:
		w.AsOf, err = readAsOf(r)
	case membership.OpAddGroups, membership.OpReplaceGroups:
		w.MaxDepth, w.MaxAncestors, err = readBounds(r)
	case membership.OpSetUser:
		var a account.Account
		a, err = writecodec.ReadAccount(r)
		w.Account = &a
	case membership.OpSetGroup:
		var a account.GroupAttributes
		a, err = writecodec.ReadGroupAttributes(r)
		w.Group = &a
	}
	switch {
	case err != nil:
		return err
	case (w.Op == membership.OpRemoveUser || w.Op == membership.OpSetUser || w.Op == membership.OpDeleteUser) && (len(w.UIDs) != 1 || w.GroupID != ""):
		return fmt.Errorf("a %s names one uid and no group", w.Op)
	case w.Op == membership.OpSetGroup && w.GroupID == "":
		return errors.New("a set_group names no group")
	case w.Op == membership.OpExpire && (len(w.UIDs) == 0 || w.GroupID == ""):
		return errors.New("an expire names a group and at least one uid")
	case w.Op == membership.OpExpireGroups && (len(w.Subgroups) == 0 || w.GroupID == ""):
		return errors.New("an expire_groups names a group and at least one subgroup")
	case membership.IsNestingOp(w.Op) && w.GroupID == "":
		return fmt.Errorf("a %s names no group", w.Op)
	}
	return nil
}

// readAsOf reads the time an expiry was due as of: milliseconds since
// 1970, signed.
func readAsOf(r *bytes.Reader) (time.Time, error) {
	ms, err := binary.ReadVarint(r)
	return time.UnixMilli(ms).UTC(), err
}

// boundsShift is where the bound on ancestors starts in the uvarint of a
// nesting write's bounds: the bound on depth, at most MaxMaxDepth, is
// below it.
const boundsShift = 11

// appendBounds appends a nesting write's bounds on depth and ancestors.
func appendBounds(b []byte, depth, ancestors int) []byte {
	return binary.AppendUvarint(b, uint64(depth)|uint64(ancestors)<<boundsShift)
}

// readBounds reads a nesting write's bounds on the depth of nestings, at
// most membership.MaxMaxDepth, and on a group's ancestors, at most
// membership.MaxMaxAncestors; 0 for none.
func readBounds(r *bytes.Reader) (depth, ancestors int, err error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, 0, err
	}
	d, a := n&(1<<boundsShift-1), n>>boundsShift
	switch {
	case d > membership.MaxMaxDepth:
		return 0, 0, fmt.Errorf("a bound on depth of %d, past %d", d, membership.MaxMaxDepth)
	case a > membership.MaxMaxAncestors:
		return 0, 0, fmt.Errorf("a bound on ancestors of %d, past %d", a, membership.MaxMaxAncestors)
	}
	return int(d), int(a), nil
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

// Largest bounds the record of one change that requests of at most
// maxBodyBytes and maxUsers users can ask for, as appendWrite and
// appendBatch lay it out, whatever its op; a batch's writes are at most
// maxBatchWrites (the HTTP layer's limit, membership.DefaultMaxBatchWrites
// by default), and its users in all at most maxUsers. A write's record is
// never larger than the body that asked for it (a user costs at least two
// bytes in a body, "1,", and two in a record) but for the group id, which
// comes in the path, the precondition, which comes in headers: its flags
// and at most MaxPreconditionRevisions revisions, the stamp, a time, a
// uid and a principal (at most scope.MaxPrincipalBytes, which the
// service gives), the Idempotency-Key, which comes in a header too: at
// most membership.MaxIdempotencyKeyBytes and its fingerprint, and each user's
// expiry, whose time a body may name in fewer bytes than the record's (at
// most binary.MaxVarintLen64); nor than maxUsers users with the longest
// nicknames and expiries. A replace names its users as an add does; a
// delete_group or a remove_user less. A batch is its op byte, stamp, key
// and count, then each write: a group id and a precondition per write
// (both in its body, but counted as if they were not), and the users of
// all of them, bounded as one write's. An expire, the service's own
// write, comes from no request: it names at most MaxExpireUIDs uids,
// whatever the limits, and its time.
//
// A nesting write's subgroups count as users (the Service bounds the
// users and subgroups of a request together by maxUsers): a subgroup
// costs no more in its record than in a body ("g", is three bytes beside
// the id; its record's length, flags and id at most as many) but for its
// expiry, nor than a user with the longest nickname; each write counts
// room for its bound on depth, and a batch for its own. An
// expire_groups, the service's own too, names at most MaxExpireGroups
// subgroups and its time.
//
// A set_user holds one uid and an account (writecodec.AccountBytes); a
// set_group its attributes (writecodec.GroupAttributesBytes), which a
// batch counts for each of its writes, since any may be one.
func Largest(maxBodyBytes int64, maxUsers, maxBatchWrites int) int64 {
	const stamp = 2*binary.MaxVarintLen64 + 1 + scope.MaxPrincipalBytes // its principal's length takes one byte
	const key = membership.MaxIdempotencyKeyBytes + keyBytes
	const depth = binary.MaxVarintLen64
	const perChange = 1 + binary.MaxVarintLen64 + binary.MaxVarintLen16 + membership.MaxGroupIDBytes + stamp + depth
	const precondition = 1 + binary.MaxVarintLen16 + MaxPreconditionRevisions*binary.MaxVarintLen64
	const expiry = binary.MaxVarintLen64 // its flag is in the user's byte of flags
	const perUser = binary.MaxVarintLen64 + 1 + binary.MaxVarintLen16 + membership.MaxNicknameBytes + expiry
	const perGroup = binary.MaxVarintLen16 + membership.MaxGroupIDBytes + 1 + expiry
	const expire = perChange + precondition + key + MaxExpireUIDs*binary.MaxVarintLen64 + binary.MaxVarintLen64
	const expireGroups = perChange + precondition + key + MaxExpireGroups*perGroup + binary.MaxVarintLen64
	const setUser = perChange + precondition + key + 2*binary.MaxVarintLen64 + writecodec.AccountBytes
	users := min(maxBodyBytes+int64(maxUsers)*expiry, int64(maxUsers)*max(perUser, perGroup))
	batch := int64(1+binary.MaxVarintLen64+key+depth) + int64(max(maxBatchWrites, 1))*(perChange+precondition+writecodec.GroupAttributesBytes)
	return max(batch+users, int64(expire), int64(expireGroups), int64(setUser)) // a single write's is perChange + precondition + key + users, no more
}
