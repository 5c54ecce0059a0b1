// Package writecodec lays out the parts of a membership.Write in bytes, as
// both logs keep them: the records of the data directory's log (package
// durable) and the batch column of the PostgreSQL log (package postgres).
// All integers are unsigned varints; a string is its length and its bytes.
//
//	users         the user count, then each user's uid, a byte of flags
//	              (1: a nickname follows, 2: an expiry follows), the
//	              nickname, and the expiry: milliseconds since 1970, 0
//	              for a membership made permanent (logs older than
//	              expiries have flags 0 and 1 only)
//	uids          the uid count, then each uid
//	subgroups     the subgroup count, then each subgroup's group id, a
//	              byte of flags (1: an expiry follows), and the expiry
//	              as a user's
//	precondition  a byte of flags (1 Exists, 2 Empty), the revision count,
//	              then each revision
//	account       a byte of flags (1 active), then the user name, the
//	              external id, the display name, the given name, the
//	              family name and the email, each a string
//	group         the display name, then the external id, each a string
//	attributes
//
// The readers refuse what the appenders never write (a uid out of range,
// a count larger than what is left, a precondition that requires
// nothing), so that damage a checksum missed is not applied.
package writecodec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
)

// Ops maps the numbers that the logs and the snapshots give the ops to
// the ops: the op byte of a data directory's record and of a snapshot's
// change, the op of a row of the PostgreSQL log.
var Ops = [...]membership.Op{
	1:  membership.OpAdd,
	2:  membership.OpRemove,
	3:  membership.OpReplace,
	4:  membership.OpDeleteGroup,
	5:  membership.OpRemoveUser,
	6:  membership.OpBatch,
	7:  membership.OpExpire,
	8:  membership.OpAddGroups,
	9:  membership.OpRemoveGroups,
	10: membership.OpReplaceGroups,
	11: membership.OpExpireGroups,
	12: membership.OpSetUser,
	13: membership.OpDeleteUser,
	14: membership.OpSetGroup,
}

// BatchTakes reports whether a batch takes writes of op: add, remove,
// replace, delete_group, add_groups, remove_groups, replace_groups or
// set_group.
func BatchTakes(op membership.Op) bool {
	switch op {
	case membership.OpAdd, membership.OpRemove, membership.OpReplace, membership.OpDeleteGroup,
		membership.OpAddGroups, membership.OpRemoveGroups, membership.OpReplaceGroups, membership.OpSetGroup:
		return true
	}
	return false
}

// The flags of a precondition.
const (
	condExists byte = 1
	condEmpty  byte = 2
)

// AppendString appends s: its length, then its bytes.
func AppendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// ReadString reads a string AppendString wrote.
func ReadString(r *bytes.Reader) (string, error) {
	n, err := ReadCount(r)
	if err != nil {
		return "", err
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return string(b), err
}

// ReadCount reads a count of items that take at least a byte each: one
// larger than what is left of r is refused.
func ReadCount(r *bytes.Reader) (uint64, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, err
	}
	if n > uint64(r.Len()) {
		return 0, errors.New("a count larger than what follows it")
	}
	return n, nil
}

// ReadFlags reads a byte of flags. One with a flag not in known is refused,
// with the error that format says of the byte.
func ReadFlags(r io.ByteReader, known byte, format string) (byte, error) {
	flags, err := r.ReadByte()
	if err == nil && flags&^known != 0 {
		return 0, fmt.Errorf(format, flags)
	}
	return flags, err
}

// The flags of a user.
const (
	userNickname byte = 1
	userExpiry   byte = 2
)

// AppendUsers appends users, nicknames and expiries as given. An expiry
// must be a time or permanent: a log keeps no TTL, which its writer turns
// into a time as it commits the write (membership.ResolveTTLs).
func AppendUsers(b []byte, users []membership.User) []byte {
	b = binary.AppendUvarint(b, uint64(len(users)))
	for _, u := range users {
		b = binary.AppendUvarint(b, uint64(u.UID))
		var flags byte
		if u.HasNickname {
			flags |= userNickname
		}
		if u.Expiry.Set {
			flags |= userExpiry
		}
		b = append(b, flags)
		if u.HasNickname {
			b = AppendString(b, u.Nickname)
		}
		if u.Expiry.Set {
			b = appendExpiry(b, u.Expiry)
		}
	}
	return b
}

// Millis returns t in milliseconds since 1970, 0 for the zero time: an
// expiry as the logs and the snapshots keep it, 0 for none or permanent.
func Millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// TimeOfMillis returns the time ms milliseconds after 1970, in UTC, and
// the zero time for 0: the time Millis gave ms for.
func TimeOfMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// appendExpiry appends a set expiry: its time in Unix milliseconds, 0 for
// permanent. A TTL, which no log keeps, is a bug of its caller.
func appendExpiry(b []byte, e membership.Expiry) []byte {
	if e.TTL != 0 {
		panic("writecodec: a TTL not turned into a time before the write was logged")
	}
	return binary.AppendUvarint(b, uint64(Millis(e.At)))
}

// readExpiry reads what appendExpiry wrote.
func readExpiry(r *bytes.Reader) (membership.Expiry, error) {
	ms, err := binary.ReadUvarint(r)
	switch {
	case err != nil:
		return membership.Expiry{}, err
	case ms > math.MaxInt64:
		return membership.Expiry{}, fmt.Errorf("expiry %d is not a time", ms)
	}
	return membership.Expiry{Set: true, At: TimeOfMillis(int64(ms))}, nil
}

// readList reads a count (ReadCount), then as many items with read, each
// of at least size bytes: nil for none.
func readList[T any](r *bytes.Reader, size int, read func(*bytes.Reader) (T, error)) ([]T, error) {
	n, err := ReadCount(r)
	if err != nil || n == 0 {
		return nil, err
	}
	items := make([]T, 0, min(n, uint64(r.Len()/size)))
	for range n {
		item, err := read(r)
		if err != nil {
			return nil, err
		}
		items = append(items, item)
	}
	return items, nil
}

// ReadUsers reads what AppendUsers wrote; none is nil.
func ReadUsers(r *bytes.Reader) ([]membership.User, error) { return readList(r, 1, readUser) }

// readUser reads one user as AppendUsers wrote it.
func readUser(r *bytes.Reader) (membership.User, error) {
	var u membership.User
	var err error
	if u.UID, err = readUID(r); err != nil {
		return u, err
	}
	flags, err := ReadFlags(r, userNickname|userExpiry, "user flags %#x")
	if err != nil {
		return u, err
	}
	if flags&userNickname != 0 {
		u.HasNickname = true
		if u.Nickname, err = ReadString(r); err != nil {
			return u, err
		}
	}
	if flags&userExpiry != 0 {
		u.Expiry, err = readExpiry(r)
	}
	return u, err
}

// The flags of a subgroup.
const subgroupExpiry byte = 1

// AppendSubgroups appends the subgroups of a nesting write, with their
// expiries as given. An expiry must be a time or permanent, as a user's.
func AppendSubgroups(b []byte, groups []membership.Subgroup) []byte {
	b = binary.AppendUvarint(b, uint64(len(groups)))
	for _, g := range groups {
		b = AppendString(b, g.GroupID)
		if !g.Expiry.Set {
			b = append(b, 0)
			continue
		}
		b = appendExpiry(append(b, subgroupExpiry), g.Expiry)
	}
	return b
}

// ReadSubgroups reads what AppendSubgroups wrote; none is nil. A group id
// that is not valid is refused.
func ReadSubgroups(r *bytes.Reader) ([]membership.Subgroup, error) {
	return readList(r, 2, readSubgroup)
}

// readSubgroup reads one subgroup as AppendSubgroups wrote it.
func readSubgroup(r *bytes.Reader) (membership.Subgroup, error) {
	var g membership.Subgroup
	var err error
	if g.GroupID, err = ReadString(r); err != nil {
		return g, err
	}
	if err := membership.ValidateGroupID(g.GroupID); err != nil {
		return g, err
	}
	flags, err := ReadFlags(r, subgroupExpiry, "subgroup flags %#x")
	if err != nil {
		return g, err
	}
	if flags&subgroupExpiry != 0 {
		g.Expiry, err = readExpiry(r)
	}
	return g, err
}

// AppendUIDs appends uids.
func AppendUIDs(b []byte, uids []membership.UID) []byte {
	b = binary.AppendUvarint(b, uint64(len(uids)))
	for _, uid := range uids {
		b = binary.AppendUvarint(b, uint64(uid))
	}
	return b
}

// ReadUIDs reads what AppendUIDs wrote; none is nil.
func ReadUIDs(r *bytes.Reader) ([]membership.UID, error) { return readList(r, 1, readUID) }

// readUID reads a uid, which must be valid.
func readUID(r *bytes.Reader) (membership.UID, error) {
	n, err := binary.ReadUvarint(r)
	if err == nil && (n == 0 || n > math.MaxInt64) {
		err = fmt.Errorf("uid %d is not one", n)
	}
	return membership.UID(n), err
}

// readRevision reads a revision.
func readRevision(r *bytes.Reader) (membership.Revision, error) {
	n, err := binary.ReadUvarint(r)
	return membership.Revision(n), err
}

// AppendPrecondition appends cond.
func AppendPrecondition(b []byte, cond membership.Precondition) []byte {
	var flags byte
	if cond.Exists {
		flags |= condExists
	}
	if cond.Empty {
		flags |= condEmpty
	}
	b = binary.AppendUvarint(append(b, flags), uint64(len(cond.Revisions)))
	for _, rev := range cond.Revisions {
		b = binary.AppendUvarint(b, uint64(rev))
	}
	return b
}

// ReadPrecondition reads what AppendPrecondition wrote. A precondition
// that requires nothing is refused: the logs write none then.
func ReadPrecondition(r *bytes.Reader) (membership.Precondition, error) {
	var cond membership.Precondition
	flags, err := ReadFlags(r, condExists|condEmpty, "unknown precondition flags %#x")
	if err != nil {
		return cond, err
	}
	cond.Exists, cond.Empty = flags&condExists != 0, flags&condEmpty != 0
	if cond.Revisions, err = readList(r, 1, readRevision); err != nil {
		return cond, err
	}
	if cond.IsZero() {
		return cond, errors.New("a precondition that requires nothing")
	}
	return cond, nil
}

// The flags of an account.
const accountActive byte = 1

// AppendAccount appends a.
func AppendAccount(b []byte, a account.Account) []byte {
	var flags byte
	if a.Active {
		flags |= accountActive
	}
	b = append(b, flags)
	for _, s := range []string{a.UserName, a.ExternalID, a.DisplayName, a.GivenName, a.FamilyName, a.Email} {
		b = AppendString(b, s)
	}
	return b
}

// AccountBytes bounds what AppendAccount appends of a valid account.
const AccountBytes = 1 + 6*(binary.MaxVarintLen16+max(account.MaxAttributeBytes, membership.MaxNicknameBytes))

// ReadAccount reads what AppendAccount wrote. An account that is not valid
// is refused.
func ReadAccount(r *bytes.Reader) (account.Account, error) {
	var a account.Account
	flags, err := ReadFlags(r, accountActive, "account flags %#x")
	if err != nil {
		return a, err
	}
	a.Active = flags&accountActive != 0
	for _, s := range []*string{&a.UserName, &a.ExternalID, &a.DisplayName, &a.GivenName, &a.FamilyName, &a.Email} {
		if *s, err = ReadString(r); err != nil {
			return a, err
		}
	}
	return a, account.Check(a)
}

// AppendGroupAttributes appends a.
func AppendGroupAttributes(b []byte, a account.GroupAttributes) []byte {
	return AppendString(AppendString(b, a.DisplayName), a.ExternalID)
}

// GroupAttributesBytes bounds what AppendGroupAttributes appends of valid
// attributes.
const GroupAttributesBytes = 2 * (binary.MaxVarintLen16 + account.MaxAttributeBytes)

// ReadGroupAttributes reads what AppendGroupAttributes wrote. Attributes
// that are not valid are refused.
func ReadGroupAttributes(r *bytes.Reader) (account.GroupAttributes, error) {
	var a account.GroupAttributes
	var err error
	if a.DisplayName, err = ReadString(r); err != nil {
		return a, err
	}
	if a.ExternalID, err = ReadString(r); err != nil {
		return a, err
	}
	return a, account.CheckGroup(a)
}
