package membership

import (
	"slices"
	"time"
)

// Memberships that end by themselves. A membership may carry an expiry,
// the time it ends: the store removes it then, in a change of its own
// (OpExpire), with its own revision, so that every list, count and check
// after it agrees, and a follower of the feed learns of it as of any other
// change. The store's wall clock decides when an expiry is due: a clock
// stepped backwards delays expiries, and never revives one.

// OpExpire is the change of memberships that ended by themselves: the
// users of its UIDs left its group at its Time, their expiry. It has no
// actor. As a Write, it removes each of its UIDs whose expiry is still at
// or before its Time: one whose expiry was extended, or made permanent,
// since it was found due, stays.
const OpExpire Op = "expire"

// Expiry is what a request says of a membership's end.
type Expiry struct {
	// Set says the request names one: At, TTL, or neither (null: the
	// membership is made permanent). A user without one keeps the expiry
	// their membership has (none for a new member), as a user without a
	// nickname keeps theirs.
	Set bool
	// At is the time the membership ends, in UTC, to the millisecond.
	At time.Time
	// TTL, when not zero, is how long after the write's commit the
	// membership ends: the store sets At from the commit's time.
	TTL time.Duration
}

// Permanent reports whether e makes the membership permanent.
func (e Expiry) Permanent() bool { return e.Set && e.At.IsZero() && e.TTL == 0 }

// MaxExpiryAhead bounds how far ahead an expiry may be: an expiry later
// than that after the request, or a TTL longer, is refused.
const MaxExpiryAhead = 10 * 366 * 24 * time.Hour

// MaxExpiryAheadText says MaxExpiryAhead in messages.
const MaxExpiryAheadText = "3660 days (87840h)"

// ExpiryLayout is how messages, lists and the change feed write an
// expiry: RFC 3339 in UTC, to the millisecond, always with three digits,
// as the feed writes a change's time.
const ExpiryLayout = "2006-01-02T15:04:05.000Z07:00"

// ValidateExpiry returns a CodeInvalidUsers error unless e is an expiry a
// write may set as of now: after now, and at most MaxExpiryAhead after it
// (a TTL: positive, at most MaxExpiryAhead, whole milliseconds or more).
func ValidateExpiry(e Expiry, now time.Time) error {
	switch {
	case !e.Set, e.Permanent():
		return nil
	case e.TTL != 0 && !e.At.IsZero():
		return Errorf(CodeInvalidUsers, "an expiry is a time or a ttl, not both")
	case e.TTL != 0 && e.TTL < time.Millisecond:
		return Errorf(CodeInvalidUsers, "the ttl %s is not at least 1ms", e.TTL)
	case e.TTL > MaxExpiryAhead:
		return Errorf(CodeInvalidUsers, "the ttl %s is longer than %s", e.TTL, MaxExpiryAheadText)
	case e.TTL != 0:
		return nil
	case !e.At.After(now):
		return Errorf(CodeInvalidUsers, "the expiry %s is not in the future", e.At.UTC().Format(ExpiryLayout))
	case e.At.Sub(now) > MaxExpiryAhead:
		return Errorf(CodeInvalidUsers, "the expiry %s is more than %s ahead", e.At.UTC().Format(ExpiryLayout), MaxExpiryAheadText)
	}
	return nil
}

// ExpiryTime returns the time e sets for a write committed at commit:
// At, or commit plus TTL, in UTC to the millisecond; zero for a permanent
// membership. e must be Set.
func ExpiryTime(e Expiry, commit time.Time) time.Time {
	t := e.At
	if e.TTL != 0 {
		t = commit.Add(e.TTL)
	}
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Millisecond)
}

// ResolveTTLs returns users with every TTL turned into the time it sets
// for a write committed at commit, so that a log keeps times only. users
// is not changed; it is returned as it is when it has no TTL.
func ResolveTTLs(users []User, commit time.Time) []User {
	if !slices.ContainsFunc(users, func(u User) bool { return u.Expiry.TTL != 0 }) {
		return users
	}
	out := slices.Clone(users)
	for i, u := range out {
		if u.Expiry.TTL != 0 {
			out[i].Expiry = Expiry{Set: true, At: ExpiryTime(u.Expiry, commit)}
		}
	}
	return out
}

// MemberExpiry is an expiry as a change reports it: the membership of UID
// ends at At, or, when At is zero, is now permanent.
type MemberExpiry struct {
	UID UID
	At  time.Time
}
