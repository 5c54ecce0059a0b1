package packed

import (
	"math/bits"

	"example.com/groupmembership/membership"
)

// A group of a few members keeps them bit-packed, with no chunk: in the
// two words of its Members when they fit those (no allocation: a group of
// three costs its struct), else in those and two words of its heap set
// while they fit the four (an allocation of 24 bytes: a group of ten). A
// packed set of words holds the count in the low byte of the first word,
// the bits each uid takes (those of the largest) in its next byte, then
// the uids, ascending, each in that many bits from bit 16 on. Two words
// hold seven uids below 65,536, three of any size below 2^37; four words
// hold ten below 2^24, five below 2^48, three of any size.

// smallWords and mediumWords are the words of the two packed forms.
const (
	smallWords  = 2
	mediumWords = 4
)

// maxPacked is the most uids a packed form holds, whatever their size: a
// lookup scans them, as it scans a chunk.
const maxPacked = 32

// packed is a set of uids bit-packed in words.
type packed []uint64

func (p packed) len() int { return int(p[0] & 0xff) }

// width returns the bits each uid takes.
func (p packed) width() uint { return uint(p[0]>>8) & 0xff }

// at returns the uid at index i.
func (p packed) at(i int) membership.UID {
	b := p.width()
	off := 16 + uint(i)*b
	w, s := off/64, off%64
	v := p[w] >> s
	if s+b > 64 {
		v |= p[w+1] << (64 - s)
	}
	if b < 64 {
		v &= 1<<b - 1
	}
	return membership.UID(v)
}

// each calls yield with the uids from index from on, in order, until it
// returns false, and reports whether it did not.
func (p packed) each(from int, yield func(i int, uid membership.UID) bool) bool {
	b := p.width()
	mask := ^uint64(0) >> (64 - b) // b is 1 to 64, or 0 for no uids
	off := 16 + uint(from)*b
	for i := from; i < p.len(); i++ {
		w, s := off/64, off%64
		v := p[w] >> s
		if s+b > 64 {
			v |= p[w+1] << (64 - s)
		}
		if !yield(i, membership.UID(v&mask)) {
			return false
		}
		off += b
	}
	return true
}

// uids appends the uids to buf.
func (p packed) uids(buf []membership.UID) []membership.UID {
	p.each(0, func(_ int, uid membership.UID) bool {
		buf = append(buf, uid)
		return true
	})
	return buf
}

// search returns the index of the first uid >= uid, and whether it is uid.
func (p packed) search(uid membership.UID) (at int, found bool) {
	at = p.len()
	p.each(0, func(i int, v membership.UID) bool {
		if v < uid {
			return true
		}
		at, found = i, v == uid
		return false
	})
	return at, found
}

// fits reports whether uids, sorted and distinct, fit words words.
func fits(uids []membership.UID, words int) bool {
	if len(uids) == 0 {
		return true
	}
	b := max(1, bits.Len64(uint64(uids[len(uids)-1])))
	return len(uids) <= maxPacked && len(uids)*b <= 64*words-16
}

// pack packs uids, sorted and distinct, which must fit, into p.
func (p packed) pack(uids []membership.UID) {
	clear(p)
	if len(uids) == 0 {
		return
	}
	b := uint(max(1, bits.Len64(uint64(uids[len(uids)-1]))))
	p[0] = uint64(len(uids)) | uint64(b)<<8
	for i, uid := range uids {
		off := 16 + uint(i)*b
		w, s := off/64, off%64
		p[w] |= uint64(uid) << s
		if s+b > 64 {
			p[w+1] |= uint64(uid) >> (64 - s)
		}
	}
}
