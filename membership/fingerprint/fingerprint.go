// Package fingerprint hashes a request's fields into 16 bytes: each field
// length-prefixed, so that no two sequences of fields encode alike, and
// through a small buffer, so that a request of a million users is hashed in
// bounded memory. Package membership says which fields make a request's
// fingerprint.
package fingerprint

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"io"
)

// bufferBytes is how many encoded bytes a Hasher holds before it hashes
// them.
const bufferBytes = 4096

// Hasher takes fields in order and gives their fingerprint.
type Hasher struct {
	h hash.Hash
	b []byte
}

// New returns a Hasher whose fingerprints are of kind: two kinds never
// share one.
func New(kind byte) *Hasher {
	return &Hasher{h: sha256.New(), b: append(make([]byte, 0, bufferBytes+binary.MaxVarintLen64), kind)}
}

// Uvarint adds v.
func (f *Hasher) Uvarint(v uint64) {
	f.b = binary.AppendUvarint(f.b, v)
	if len(f.b) >= bufferBytes {
		f.h.Write(f.b)
		f.b = f.b[:0]
	}
}

// String adds s, after its length.
func (f *Hasher) String(s string) {
	f.Uvarint(uint64(len(s)))
	f.h.Write(f.b)
	f.b = f.b[:0]
	io.WriteString(f.h, s)
}

// Sum returns the fingerprint of the fields added: the first 16 bytes of
// their SHA-256.
func (f *Hasher) Sum() [16]byte {
	f.h.Write(f.b)
	var fp [16]byte
	copy(fp[:], f.h.Sum(nil))
	return fp
}
