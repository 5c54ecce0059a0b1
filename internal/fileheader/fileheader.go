// Package fileheader is the start that the data directory's binary files
// share, logs and snapshots (and so backups): a 4-byte magic word that
// names the kind of file, then its format version, a little-endian uint32.
// What follows depends on the kind and the version.
package fileheader

import (
	"encoding/binary"
	"fmt"
)

// Size is the header's length in bytes.
const Size = 8

// Kind is a kind of file: its magic word, its name in messages, and the
// newest format version this build writes. Every version from 1 to Version
// is read.
type Kind struct {
	Magic   string // 4 bytes
	Name    string // "log", "snapshot"
	Version uint32
}

// Append appends the header of a file of kind k, at its newest version.
func (k Kind) Append(b []byte) []byte {
	b = append(b, k.Magic...)
	return binary.LittleEndian.AppendUint32(b, k.Version)
}

// Read returns the format version of the file of kind k that b starts
// with, and an error that says what b is not: a file of kind k, or of a
// version this build reads.
func (k Kind) Read(b []byte) (uint32, error) {
	if len(b) < Size || string(b[:len(k.Magic)]) != k.Magic {
		return 0, fmt.Errorf("not a membership %s: bad magic word", k.Name)
	}
	v := binary.LittleEndian.Uint32(b[len(k.Magic):])
	if v < 1 || v > k.Version {
		return 0, fmt.Errorf("%s format version %d, this build reads versions 1 to %d", k.Name, v, k.Version)
	}
	return v, nil
}
