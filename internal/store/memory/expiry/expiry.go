// Package expiry keeps when the memberships of an in-memory store end
// (membership.OpExpire): each group's expiries by member (Members), and
// the store's due set of every expiry by time (Due), so that finding what
// is due costs O(log n) per expiry, never a scan. Both are delta-encoded
// sorted sets (package sortedset), as members are: an expiry costs a few
// bytes in each, not a map entry and a heap entry; a membership without an
// expiry costs nothing more.
//
// An expiry changed or ended leaves the due set with it, but for those an
// expire write ends: the expirer has taken them from the due set already,
// and those that another instance, or a log being replayed, expires are
// due, so they leave it at the expirer's next round, which drops each whose
// member does not have that expiry any more.
//
// A group's Members are guarded by its shard's lock; the due set has a
// lock of its own, whose place in the store's lock order package memory's
// doc gives.
package expiry

import (
	"cmp"
	"encoding/binary"
	"iter"
	"slices"
	"time"

	"example.com/groupmembership/internal/store/memory/sortedset"
	"example.com/groupmembership/membership"
)

// chunkBytes is the most bytes of encodings one chunk of a set of
// expiries holds: as many as a chunk of the reverse index's pairs, since
// their inserts too land anywhere.
const chunkBytes = 256

// Member is an expiry in a group's Members: the member UID ends at At
// (milliseconds since 1970).
type Member struct {
	UID membership.UID
	At  int64
}

// MemberSet is the set of a group's Members.
type MemberSet = sortedset.Set[Member, memberCodec]

// memberCodec encodes an expiry after the one before it: the distance
// between their uids, then the difference of their times (a zigzag
// varint), 0 when a request gave them the same expiry.
type memberCodec struct{}

func (memberCodec) Compare(a, b Member) int { return cmp.Compare(a.UID, b.UID) }
func (memberCodec) MaxBytes() int           { return chunkBytes }

func (memberCodec) Put(buf []byte, prev, v Member) []byte {
	buf = binary.AppendUvarint(buf, uint64(v.UID-prev.UID))
	return binary.AppendVarint(buf, v.At-prev.At)
}

func (memberCodec) Next(rest []byte, off int, prev Member) (Member, int) {
	d, off := sortedset.Uvarint(rest, off)
	z, off := sortedset.Uvarint(rest, off)
	return Member{UID: prev.UID + membership.UID(d), At: prev.At + unzigzag(z)}, off
}

// unzigzag decodes what binary.AppendVarint encoded.
func unzigzag(z uint64) int64 {
	x := int64(z >> 1)
	if z&1 != 0 {
		x = ^x
	}
	return x
}

// Key is an expiry in the due set: the member UID of the group numbered
// Group ends at At (milliseconds since 1970).
type Key struct {
	At    int64
	Group uint32
	UID   membership.UID
}

// CompareKeys orders keys by time, then group number, then uid: the due
// set's order.
func CompareKeys(a, b Key) int {
	return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.Group, b.Group), cmp.Compare(a.UID, b.UID))
}

// keyCodec encodes a Key after the one before it: the distance between
// their times; then, for the same time, the distance between their group
// numbers, else the number; then, for the same group too, the distance
// between their uids, else the uid.
type keyCodec struct{}

func (keyCodec) Compare(a, b Key) int { return CompareKeys(a, b) }
func (keyCodec) MaxBytes() int        { return chunkBytes }

func (keyCodec) Put(buf []byte, prev, v Key) []byte {
	dt := uint64(v.At - prev.At)
	buf = binary.AppendUvarint(buf, dt)
	if dt != 0 {
		buf = binary.AppendUvarint(buf, uint64(v.Group))
		return binary.AppendUvarint(buf, uint64(v.UID))
	}
	dg := uint64(v.Group - prev.Group)
	buf = binary.AppendUvarint(buf, dg)
	if dg != 0 {
		return binary.AppendUvarint(buf, uint64(v.UID))
	}
	return binary.AppendUvarint(buf, uint64(v.UID-prev.UID))
}

func (keyCodec) Next(rest []byte, off int, prev Key) (Key, int) {
	dt, off := sortedset.Uvarint(rest, off)
	g, off := sortedset.Uvarint(rest, off)
	u, off := sortedset.Uvarint(rest, off)
	switch {
	case dt != 0:
		return Key{At: prev.At + int64(dt), Group: uint32(g), UID: membership.UID(u)}, off
	case g != 0:
		return Key{At: prev.At, Group: prev.Group + uint32(g), UID: membership.UID(u)}, off
	}
	return Key{At: prev.At, Group: prev.Group, UID: prev.UID + membership.UID(u)}, off
}

// Members are a group's expiries, by uid: a pointer to their set, nil
// while no member has one.
type Members struct {
	set *MemberSet
}

// Of returns the expiry of uid, 0 when it has none.
func (e Members) Of(uid membership.UID) int64 {
	x, _ := e.set.Get(Member{UID: uid})
	return x.At
}

// Len returns how many members have an expiry.
func (e Members) Len() int {
	if e.set == nil {
		return 0
	}
	return e.set.Len()
}

// A Cursor finds the expiries of members in ascending uid order, in one
// walk of a group's set.
type Cursor struct {
	c sortedset.Cursor[Member, memberCodec]
}

// Cursor returns a Cursor from uid from on.
func (e Members) Cursor(from membership.UID) Cursor {
	return Cursor{c: e.set.Cursor(Member{UID: from})}
}

// Done reports whether the cursor has passed every expiry.
func (c *Cursor) Done() bool { return !c.c.Ok() }

// Of returns the expiry of uid, 0 when it has none: uid must not be below
// the uid asked before.
func (c *Cursor) Of(uid membership.UID) int64 {
	c.c.SeekTo(Member{UID: uid})
	if c.c.Ok() && c.c.Value().UID == uid {
		return c.c.Value().At
	}
	return 0
}

// Due returns those of uids, not empty, whose expiry is at or before
// asOf, ascending and once each, in a new slice. e must not be empty.
func (e Members) Due(uids []membership.UID, asOf time.Time) []membership.UID {
	// Sorted and compacted, the uids are found in one walk of the group's
	// expiries, and a uid named twice is removed once.
	sorted := slices.Clone(uids)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	limit := Millis(asOf)
	due := sorted[:0]
	cur := e.Cursor(sorted[0])
	for _, uid := range sorted {
		if at := cur.Of(uid); at != 0 && at <= limit {
			due = append(due, uid)
		}
	}
	return due
}

// Changes reports whether Due.SetAll would change any expiry of e,
// reading only: a user who is not a member yet counts when the write gives
// them an expiry.
func (e Members) Changes(users []membership.User, commit time.Time) bool {
	if !Any(users) {
		return false
	}
	for _, x := range Last(users, commit) {
		if e.Of(x.UID) != millisOrZero(x.At) {
			return true
		}
	}
	return false
}

// Export returns the expiries, ascending by uid, for a snapshot.
func (e Members) Export() []membership.MemberExpiry {
	if e.set == nil {
		return nil
	}
	out := make([]membership.MemberExpiry, 0, e.set.Len())
	for x := range e.set.All {
		out = append(out, membership.MemberExpiry{UID: x.UID, At: Time(x.At)})
	}
	return out
}

// put gives uid the expiry at, or none when at is 0, and returns the one
// it had (0: none).
func (e *Members) put(uid membership.UID, at int64) (old int64) {
	old = e.Of(uid)
	if old == at {
		return old
	}
	if e.set == nil {
		e.set = new(MemberSet)
	}
	if old != 0 {
		e.set.Remove(Member{UID: uid})
	}
	if at != 0 {
		e.set.Insert(Member{UID: uid, At: at})
	}
	if e.set.Len() == 0 {
		e.set = nil
	}
	return old
}

// remove forgets the expiry of uid, and returns it (0: none).
func (e *Members) remove(uid membership.UID) int64 {
	if e.set == nil {
		return 0
	}
	x, _ := e.set.Remove(Member{UID: uid})
	if e.set.Len() == 0 {
		e.set = nil
	}
	return x.At
}

// removeAll forgets the expiries of uids, sorted, and returns how many it
// forgot.
func (e *Members) removeAll(uids []membership.UID) int {
	if e.set == nil || len(uids) == 0 {
		return 0
	}
	before := e.set.Len()
	if len(uids) < before/4 {
		for _, uid := range uids {
			e.set.Remove(Member{UID: uid})
		}
	} else {
		// Many of them: one pass over the set, not a search for each.
		kept := make([]Member, 0, before-min(before, len(uids)))
		i := 0
		for x := range e.set.All {
			for i < len(uids) && uids[i] < x.UID {
				i++
			}
			if i == len(uids) || uids[i] != x.UID {
				kept = append(kept, x)
			}
		}
		e.set = new(MemberSet)
		e.set.Fill(kept)
	}
	removed := before - e.set.Len()
	if e.set.Len() == 0 {
		e.set = nil
	}
	return removed
}

// keys yields the keys in the due set of the expiries, which are the group
// numbered group's.
func (e Members) keys(group uint32) iter.Seq[Key] {
	return func(yield func(Key) bool) {
		if e.set == nil {
			return
		}
		for x := range e.set.All {
			if !yield(Key{At: x.At, Group: group, UID: x.UID}) {
				return
			}
		}
	}
}

// load gives e, empty, the expiries of a group numbered group loaded from
// a snapshot, those of expiries whose uid isMember, and appends their keys
// of the due set to due.
func (e *Members) load(group uint32, expiries []membership.MemberExpiry, isMember func(membership.UID) bool, due []Key) []Key {
	var set []Member
	for _, x := range expiries {
		if x.At.IsZero() || !isMember(x.UID) {
			continue
		}
		set = append(set, Member{UID: x.UID, At: Millis(x.At)})
	}
	if len(set) == 0 {
		return due
	}
	// A snapshot holds them ascending by uid; one written otherwise is
	// sorted, not trusted.
	slices.SortStableFunc(set, func(a, b Member) int { return cmp.Compare(a.UID, b.UID) })
	set = slices.CompactFunc(set, func(a, b Member) bool { return a.UID == b.UID })
	e.set = new(MemberSet)
	e.set.Fill(set)
	for _, x := range set {
		due = append(due, Key{At: x.At, Group: group, UID: x.UID})
	}
	return due
}

// DueSet is the due set of a store: the expiries of every group, by time.
type DueSet = sortedset.Set[Key, keyCodec]

// Millis returns t in milliseconds since 1970.
func Millis(t time.Time) int64 { return t.UnixMilli() }

// millisOrZero returns t in milliseconds since 1970, 0 for the zero time.
func millisOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return Millis(t)
}

// Time returns the expiry at, 0 for none, as a member carries it.
func Time(at int64) time.Time {
	if at == 0 {
		return time.Time{}
	}
	return time.UnixMilli(at).UTC()
}

// Last returns the expiries users set, the last of each user's, for a
// write committed at commit (zero: now, read only when a TTL needs it),
// ascending by uid. It costs O(n log n) for n users with an expiry.
func Last(users []membership.User, commit time.Time) []membership.MemberExpiry {
	var out []membership.MemberExpiry
	for _, u := range users {
		if !u.Expiry.Set {
			continue
		}
		if u.Expiry.TTL != 0 && commit.IsZero() {
			commit = time.Now()
		}
		out = append(out, membership.MemberExpiry{UID: u.UID, At: membership.ExpiryTime(u.Expiry, commit)})
	}
	// Stable: of a user named twice, the later expiry ends its run.
	slices.SortStableFunc(out, func(a, b membership.MemberExpiry) int { return cmp.Compare(a.UID, b.UID) })
	last := out[:0]
	for i, e := range out {
		if i+1 < len(out) && out[i+1].UID == e.UID {
			continue
		}
		last = append(last, e)
	}
	return last
}

// Any reports whether any of users sets an expiry.
func Any(users []membership.User) bool {
	return slices.ContainsFunc(users, func(u membership.User) bool { return u.Expiry.Set })
}
