package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"unsafe"

	"example.com/groupmembership/membership"
)

// The write-ahead log is a file that starts with a header (a magic word and a
// format version) followed by records. Each record is framed as
//
//	length  uint32, little endian: the payload's length
//	crc     uint32, little endian: CRC-32C (Castagnoli) of the payload
//	payload
//
// and its payload is one change: an op byte, the group id, and the users.
// All integers in payloads are unsigned varints.
const (
	walMagic        = "GMWL"
	walVersion      = 1
	walHeaderSize   = 8
	frameHeaderSize = 8
	// maxRecordSize bounds a record's length field, so that a corrupt length
	// cannot make recovery allocate gigabytes.
	maxRecordSize = 64 << 20
)

const (
	opAdd    byte = 1
	opRemove byte = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func walHeader() []byte {
	h := make([]byte, walHeaderSize)
	copy(h, walMagic)
	binary.LittleEndian.PutUint32(h[4:], walVersion)
	return h
}

// checkWALHeader says whether h is the header of a log this version reads.
func checkWALHeader(h []byte) error {
	if len(h) < walHeaderSize || string(h[:4]) != walMagic {
		return errors.New("not a membership log: bad magic word")
	}
	if v := binary.LittleEndian.Uint32(h[4:]); v != walVersion {
		return fmt.Errorf("log format version %d, this build reads version %d", v, walVersion)
	}
	return nil
}

// change is one logged change: users added to, or uids removed from, a group.
type change struct {
	groupID string
	remove  bool
	users   []membership.User // for an add
	uids    []membership.UID  // for a remove
}

// cost returns about how many bytes c holds in memory while it waits to be
// written: its users or uids, their nicknames, and its record.
func (c *change) cost() int64 {
	const overhead = 256 // the change, its pending and result, the record's framing
	n := int64(overhead + 2*len(c.groupID) + len(c.uids)*(8+varintMax))
	for _, u := range c.users {
		n += int64(unsafe.Sizeof(u)) + varintMax + int64(2*len(u.Nickname))
	}
	return n
}

// varintMax is the most bytes a uid takes in a record.
const varintMax = binary.MaxVarintLen64

// appendRecord appends c to b as a framed record.
func appendRecord(b []byte, c *change) []byte {
	start := len(b)
	b = append(b, make([]byte, frameHeaderSize)...)
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
	} else {
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
	}
	payload := b[start+frameHeaderSize:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(payload, castagnoli))
	return b
}

// readFrame reads the record framed at the start of b. ok is false when b
// does not start with a whole record whose checksum matches.
func readFrame(b []byte) (payload []byte, size int, ok bool) {
	if len(b) < frameHeaderSize {
		return nil, 0, false
	}
	n := binary.LittleEndian.Uint32(b)
	if n == 0 || n > maxRecordSize || int(n) > len(b)-frameHeaderSize {
		return nil, 0, false
	}
	payload = b[frameHeaderSize : frameHeaderSize+int(n)]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, 0, false
	}
	return payload, frameHeaderSize + int(n), true
}

// decodeChange decodes a record's payload.
func decodeChange(payload []byte) (*change, error) {
	r := bytes.NewReader(payload)
	op, err := r.ReadByte()
	if err != nil {
		return nil, err
	}
	if op != opAdd && op != opRemove {
		return nil, fmt.Errorf("unknown op %d", op)
	}
	c := &change{remove: op == opRemove}
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
