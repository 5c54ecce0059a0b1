package durable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unsafe"

	"example.com/groupmembership/membership"
)

// A record of the log (see package wal) holds one entry: an op byte, the
// group id, and the users. All integers are unsigned varints; a string is its
// length and its bytes.

const (
	opAdd    byte = 1
	opRemove byte = 2
)

// entry is one change as the log holds it: users to add to, or uids to
// remove from, a group. What it changed, with its revision, is a
// membership.Change.
type entry struct {
	groupID string
	remove  bool
	users   []membership.User // for an add
	uids    []membership.UID  // for a remove
}

// cost returns about how many bytes c holds in memory while it waits to be
// written: its users or uids, their nicknames, and its record.
func (c *entry) cost() int64 {
	const overhead = 256 // the entry, its pending and result, the record's framing
	n := int64(overhead + 2*len(c.groupID) + len(c.uids)*(8+varintMax))
	for _, u := range c.users {
		n += int64(unsafe.Sizeof(u)) + varintMax + int64(2*len(u.Nickname))
	}
	return n
}

// varintMax is the most bytes a uid takes in a record.
const varintMax = binary.MaxVarintLen64

// appendEntry appends c to b as a record's payload.
func appendEntry(b []byte, c *entry) []byte {
	op := opAdd
	if c.remove {
		op = opRemove
	}
	b = append(b, op)
	b = binary.AppendUvarint(b, uint64(len(c.groupID)))
	b = append(b, c.groupID...)
	if c.remove {
		b = binary.AppendUvarint(b, uint64(len(c.uids)))
		for _, uid := range c.uids {
			b = binary.AppendUvarint(b, uint64(uid))
		}
		return b
	}
	b = binary.AppendUvarint(b, uint64(len(c.users)))
	for _, u := range c.users {
		b = binary.AppendUvarint(b, uint64(u.UID))
		if u.HasNickname {
			b = append(b, 1)
			b = binary.AppendUvarint(b, uint64(len(u.Nickname)))
			b = append(b, u.Nickname...)
		} else {
			b = append(b, 0)
		}
	}
	return b
}

// decodeEntry decodes a record's payload.
func decodeEntry(payload []byte) (*entry, error) {
	r := bytes.NewReader(payload)
	op, err := r.ReadByte()
	if err != nil {
		return nil, err
	}
	if op != opAdd && op != opRemove {
		return nil, fmt.Errorf("unknown op %d", op)
	}
	c := &entry{remove: op == opRemove}
	if c.groupID, err = readString(r); err != nil {
		return nil, err
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > uint64(len(payload)) {
		return nil, errors.New("count larger than the record")
	}
	for range n {
		uid, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, err
		}
		if c.remove {
			c.uids = append(c.uids, membership.UID(uid))
			continue
		}
		u := membership.User{UID: membership.UID(uid)}
		flag, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		if flag == 1 {
			u.HasNickname = true
			if u.Nickname, err = readString(r); err != nil {
				return nil, err
			}
		}
		c.users = append(c.users, u)
	}
	if r.Len() != 0 {
		return nil, errors.New("trailing bytes in record")
	}
	return c, nil
}

func readString(r *bytes.Reader) (string, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return "", err
	}
	if n > uint64(r.Len()) {
		return "", io.ErrUnexpectedEOF
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return string(b), err
}

// LargestEntry bounds the log entry of one change that requests of at most
// maxBodyBytes and maxUsers users can ask for, as appendEntry lays it out.
// An entry is never larger than the body that asked for it (a user costs at
// least two bytes in a body, "1,", and two in an entry) but for the group
// id, which comes in the path; nor than maxUsers users with the longest
// nicknames.
func LargestEntry(maxBodyBytes int64, maxUsers int) int64 {
	const perChange = 1 + binary.MaxVarintLen64 + binary.MaxVarintLen16 + membership.MaxGroupIDBytes
	const perUser = binary.MaxVarintLen64 + 1 + binary.MaxVarintLen16 + membership.MaxNicknameBytes
	return perChange + min(maxBodyBytes, int64(maxUsers)*perUser)
}
