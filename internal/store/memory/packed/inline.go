package packed

import (
	"math/bits"

	"example.com/groupmembership/membership"
)

// A group of a few members keeps them inline, in its Members, with no
// allocation: a group of three costs its struct and nothing more, where a
// chunk costs a chunk array and its deltas (72 bytes a group of three).
// The inline form is three words: the count in the low byte of the first,
// the bits each uid takes (those of the largest) in its next byte, then
// the uids, ascending, each in that many bits from bit 16 on. Ten uids
// below 131,072 fit, five below 2^32, two of any size.

// inlineBits is the bits of an inline form the uids may take.
const inlineBits = 3*64 - 16

// maxInline is the most members kept inline, whatever their size: a
// lookup scans them, as it scans a chunk.
const maxInline = 16

// inline is a set of uids kept inline.
type inline [3]uint64

func (in *inline) len() int { return int(in[0] & 0xff) }

// width returns the bits each uid takes.
func (in *inline) width() uint { return uint(in[0]>>8) & 0xff }

// at returns the uid at index i.
func (in *inline) at(i int) membership.UID {
	b := in.width()
	off := 16 + uint(i)*b
	w, s := off/64, off%64
	v := in[w] >> s
	if s+b > 64 {
		v |= in[w+1] << (64 - s)
	}
	if b < 64 {
		v &= 1<<b - 1
	}
	return membership.UID(v)
}

// uids appends the uids to buf.
func (in *inline) uids(buf []membership.UID) []membership.UID {
	for i := range in.len() {
		buf = append(buf, in.at(i))
	}
	return buf
}

// search returns the index of the first uid >= uid, and whether it is uid.
func (in *inline) search(uid membership.UID) (int, bool) {
	n := in.len()
	for i := range n {
		if v := in.at(i); v >= uid {
			return i, v == uid
		}
	}
	return n, false
}

// packInline returns uids, sorted and distinct, packed inline, and false
// when they do not fit.
func packInline(uids []membership.UID) (inline, bool) {
	var in inline
	if len(uids) == 0 {
		return in, true
	}
	b := uint(max(1, bits.Len64(uint64(uids[len(uids)-1]))))
	if len(uids) > maxInline || uint(len(uids))*b > inlineBits {
		return in, false
	}
	in[0] = uint64(len(uids)) | uint64(b)<<8
	for i, uid := range uids {
		off := 16 + uint(i)*b
		w, s := off/64, off%64
		in[w] |= uint64(uid) << s
		if s+b > 64 {
			in[w+1] |= uint64(uid) >> (64 - s)
		}
	}
	return in, true
}
