package wal

// The frame of the log's files. A log file starts with a header:
//
//	magic          "GMWL"
//	version        uint32, little endian: 8
//	startRevision  uint64, little endian: the revision of the state the
//	               log follows, so that a log cannot be replayed after a
//	               state of another history
//	dirID          uint64, little endian: the id of the data directory the
//	               log belongs to, so that a log copied in from another
//	               directory is not taken for one of its own
//
// then records, each framed as
//
//	length     uint32, little endian: the payload's length, 1 to MaxPayload
//	crc        uint32, little endian: CRC-32C (Castagnoli) of the payload
//	headerCRC  uint32, little endian: CRC-32C of the 8 bytes before it
//	payload    what package record lays out
//
// The frame header's own checksum is what lets a reader tell the two
// failures apart in one pass, without guessing: a crash can only leave the
// last frame short (the file ends inside it) or, on some filesystems,
// followed by zeros; every other frame that does not check out is damage.
//
// Every version from 1 to 10 is read. Versions 2 to 9 are headed and
// framed as 10; each is a version of its own because of what its payloads may
// hold (docs/design.md). Version 1 has no header after its version, and
// no header checksum in its frames: there a length that runs past the end
// of the file counts as torn.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"example.com/groupmembership/internal/fileheader"
)

// The header.
const (
	Magic      = "GMWL"
	Version    = 10
	HeaderSize = fileheader.Size + 16 // of versions 2 to 10
)

// kind is the log's kind of file, for its header's first 8 bytes.
var kind = fileheader.Kind{Magic: Magic, Name: "log", Version: Version}

// MaxPayload bounds a record's payload: a writer refuses a larger one, so
// that every record written can be read back, and a reader takes a larger
// length for damage, so that a bad length cannot make it allocate gigabytes.
const MaxPayload = 64 << 20

// Frame header sizes: of version 1, and of versions 2 to 10.
const (
	frameHeaderV1 = 8
	frameHeaderV2 = 12
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header returns the header of a new log of the directory dirID that
// follows the state at startRevision.
func Header(startRevision, dirID uint64) []byte {
	h := kind.Append(make([]byte, 0, HeaderSize))
	h = binary.LittleEndian.AppendUint64(h, startRevision)
	return binary.LittleEndian.AppendUint64(h, dirID)
}

// LogHeader is what a log's header says.
type LogHeader struct {
	Version int
	// StartRevision is the revision of the state the log follows, and
	// DirID the id of its directory; 0 for version 1, which did not say.
	StartRevision uint64
	DirID         uint64
	Size          int
}

// ReadHeader reads the header of the log that b starts with.
func ReadHeader(b []byte) (LogHeader, error) {
	v, err := kind.Read(b)
	switch {
	case err != nil:
		return LogHeader{}, err
	case v == 1:
		return LogHeader{Version: 1, Size: fileheader.Size}, nil
	case len(b) < HeaderSize:
		return LogHeader{}, errors.New("the log's header is cut short")
	}
	f := b[fileheader.Size:]
	return LogHeader{Version: int(v), StartRevision: binary.LittleEndian.Uint64(f), DirID: binary.LittleEndian.Uint64(f[8:]), Size: HeaderSize}, nil
}

// ErrTooLarge is returned by Append for a payload over MaxPayload.
var ErrTooLarge = fmt.Errorf("a log record holds at most %d bytes", MaxPayload)

// Append appends payload to b as a record of the current version. fill writes the
// payload after the frame header: it lets a caller encode in place.
func Append(b []byte, fill func([]byte) []byte) ([]byte, error) {
	start := len(b)
	b = append(b, make([]byte, frameHeaderV2)...)
	b = fill(b)
	n := len(b) - start - frameHeaderV2
	if n == 0 || n > MaxPayload {
		return b[:start], ErrTooLarge
	}
	h := b[start : start+frameHeaderV2]
	binary.LittleEndian.PutUint32(h, uint32(n))
	binary.LittleEndian.PutUint32(h[4:], crc32.Checksum(b[start+frameHeaderV2:], castagnoli))
	binary.LittleEndian.PutUint32(h[8:], crc32.Checksum(h[:8], castagnoli))
	return b, nil
}

// Damage describes a record that does not check out and is not a torn
// write: the log is damaged at Offset.
type Damage struct {
	Offset int64
	Reason string
}

func (d *Damage) Error() string {
	return fmt.Sprintf("damaged record at offset %d: %s", d.Offset, d.Reason)
}

// Result is what Read found.
type Result struct {
	LogHeader
	// Records is how many records were read whole.
	Records int
	// End is the offset after the last whole record: the valid size.
	End int64
	// Torn is the size of the incomplete frame after End, 0 when none: the
	// tail a crash left while appending.
	Torn int64
}

// Read reads the log in data, header included, calling each with the payload
// of every record in order, in one pass. It stops at the first record that
// does not check out: when that is a torn write at the end, Result.Torn says
// how many bytes it has; otherwise it returns a *Damage, with the Result up
// to it. An error from each stops the reading and is returned as it is. A
// payload is valid only during its call.
func Read(data []byte, each func(payload []byte) error) (Result, error) {
	h, err := ReadHeader(data)
	if err != nil {
		return Result{}, err
	}
	v := h.Version
	res := Result{LogHeader: h, End: int64(h.Size)}
	frame := frameHeaderV2
	if v == 1 {
		frame = frameHeaderV1
	}
	for off := h.Size; off < len(data); {
		rest := data[off:]
		torn := func() (Result, error) {
			res.Torn = int64(len(rest))
			return res, nil
		}
		damage := func(format string, args ...any) (Result, error) {
			return res, &Damage{Offset: int64(off), Reason: fmt.Sprintf(format, args...)}
		}
		if len(rest) < frame {
			return torn()
		}
		n := int(binary.LittleEndian.Uint32(rest))
		if v >= 2 && crc32.Checksum(rest[:8], castagnoli) != binary.LittleEndian.Uint32(rest[8:]) {
			if allZero(rest) {
				return torn() // a filesystem may zero what a crash did not write
			}
			return damage("the frame header's checksum does not match")
		}
		switch {
		case n == 0 || n > MaxPayload:
			if v == 1 && allZero(rest) {
				return torn()
			}
			return damage("length %d is not from 1 to %d", n, MaxPayload)
		case n > len(rest)-frame:
			return torn() // the frame runs past the end: its write was cut
		}
		payload := rest[frame : frame+n]
		if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(rest[4:]) {
			return damage("the payload's checksum does not match")
		}
		if err := each(payload); err != nil {
			return res, err
		}
		off += frame + n
		res.Records++
		res.End = int64(off)
	}
	return res, nil
}

func allZero(b []byte) bool { return len(bytes.TrimLeft(b, "\x00")) == 0 }
