package membership

import (
	"time"

	"example.com/groupmembership/membership/fingerprint"
)

// Idempotency names a write, or a batch, for safe retries: the client's key
// (an Idempotency-Key header), and a fingerprint of the request it came
// with. A store applies a keyed write once: a repeat with the same key and
// the same fingerprint gets the first Result again (Replayed), applying
// nothing; the same key with another fingerprint is a
// CodeIdempotencyKeyReused error. Only a write that was applied, or found
// nothing to change, is remembered: one refused (a precondition that did
// not hold, say) changed nothing, and its key stays free.
//
// A key is its principal's (Write.Principal, Batch.Principal): a store
// remembers it for that principal only, and the same key from another
// principal names another request, applied as a new one.
//
// A store remembers a key for a retention time after the write's commit,
// and keeps at most a byte budget of keys, the oldest dropped first; past
// either it is forgotten, and a repeat is applied as a new write. The
// stores that keep a log decide, when they apply a keyed write from the
// log, whether it repeats one they remember, with the write's own commit
// time as now: a replay of the log, or another instance, decides alike.
type Idempotency struct {
	Key string
	// Fingerprint is the Service's (FingerprintWrite, FingerprintBatch),
	// whatever the caller gave. A store trusts it and computes none: a
	// caller that skips the Service sets it itself.
	Fingerprint Fingerprint
}

// Fingerprint identifies a request by what it asks: two requests with the
// same fingerprint ask for the same change on behalf of the same actor.
type Fingerprint [16]byte

// MaxIdempotencyKeyBytes is the longest key accepted.
const MaxIdempotencyKeyBytes = 255

// Defaults of the stores' retention and byte budget of keys.
const (
	DefaultIdempotencyRetention = 24 * time.Hour
	DefaultIdempotencyBytes     = 64 << 20
)

// ValidateIdempotencyKey returns a CodeInvalidIdempotencyKey error unless key
// is 1 to MaxIdempotencyKeyBytes printable ASCII characters (space to '~').
func ValidateIdempotencyKey(key string) error {
	if key == "" {
		return Errorf(CodeInvalidIdempotencyKey, "the Idempotency-Key is empty: it must be 1 to %d printable ASCII characters, not all spaces", MaxIdempotencyKeyBytes)
	}
	if len(key) > MaxIdempotencyKeyBytes {
		return Errorf(CodeInvalidIdempotencyKey, "the Idempotency-Key is %d bytes: it must be 1 to %d printable ASCII characters", len(key), MaxIdempotencyKeyBytes)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < ' ' || c > '~' {
			return Errorf(CodeInvalidIdempotencyKey, "the Idempotency-Key has byte 0x%02x at %d: it must be 1 to %d printable ASCII characters", c, i, MaxIdempotencyKeyBytes)
		}
	}
	return nil
}

// IdempotencyKeyReused returns the error of a key used before for another
// request.
func IdempotencyKeyReused() *Error {
	return Errorf(CodeIdempotencyKeyReused, "the Idempotency-Key was used for another request (another route, group, users or nicknames, condition or acting uid): "+
		"nothing was changed; send a new key for a new request")
}

// IdempotencyKeyInFlight returns the error of a repeat that waited too long
// for the request with its key to finish.
func IdempotencyKeyInFlight() *Error {
	return Errorf(CodeIdempotencyKeyInFlight, "a request with this Idempotency-Key is still being applied: "+
		"nothing was changed by this one; send it again to get the first request's reply")
}

// FingerprintWrite returns w's fingerprint: of its op, group, users (uid
// and nickname, as given), uids, precondition and actor, not of its time.
func FingerprintWrite(w Write) Fingerprint {
	f := newFingerprinter('w')
	f.write(w)
	f.Uvarint(uint64(w.Actor))
	return f.Sum()
}

// FingerprintBatch returns b's fingerprint: of its writes, in order, and its
// actor.
func FingerprintBatch(b Batch) Fingerprint {
	f := newFingerprinter('b')
	f.Uvarint(uint64(len(b.Writes)))
	for _, w := range b.Writes {
		f.write(w)
	}
	f.Uvarint(uint64(b.Actor))
	return f.Sum()
}

// fingerprinter adds a request's fields to a fingerprint.Hasher.
type fingerprinter struct{ *fingerprint.Hasher }

func newFingerprinter(kind byte) fingerprinter { return fingerprinter{fingerprint.New(kind)} }

func (f fingerprinter) write(w Write) {
	f.String(string(w.Op))
	f.String(w.GroupID)
	f.Uvarint(uint64(len(w.Users)))
	for _, u := range w.Users {
		f.Uvarint(uint64(u.UID))
		if u.HasNickname {
			f.Uvarint(1)
			f.String(u.Nickname)
		} else {
			f.Uvarint(0)
		}
		if u.Expiry.Set {
			f.Uvarint(1)
			f.Uvarint(uint64(u.Expiry.At.UnixMilli()))
			f.Uvarint(uint64(u.Expiry.TTL))
		} else {
			f.Uvarint(0)
		}
	}
	f.Uvarint(uint64(len(w.UIDs)))
	for _, uid := range w.UIDs {
		f.Uvarint(uint64(uid))
	}
	if IsNestingOp(w.Op) { // only then, so that no other write's fingerprint changed with nesting
		f.subgroups(w.Subgroups)
	}
	for _, s := range append(w.Account.Fields(), w.Group.Fields()...) { // none but a directory op's
		f.String(s)
	}
	if w.Conditions != "" {
		f.Uvarint(1)
		f.String(w.Conditions)
		return
	}
	f.Uvarint(0)
	f.Uvarint(uint64(len(w.If.Revisions)))
	for _, r := range w.If.Revisions {
		f.Uvarint(uint64(r))
	}
	var flags uint64
	if w.If.Exists {
		flags |= 1
	}
	if w.If.Empty {
		flags |= 2
	}
	f.Uvarint(flags)
}

func (f fingerprinter) subgroups(groups []Subgroup) {
	f.Uvarint(uint64(len(groups)))
	for _, g := range groups {
		f.String(g.GroupID)
		if g.Expiry.Set {
			f.Uvarint(1)
			f.Uvarint(uint64(g.Expiry.At.UnixMilli()))
			f.Uvarint(uint64(g.Expiry.TTL))
		} else {
			f.Uvarint(0)
		}
	}
}
