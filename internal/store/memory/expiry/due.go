package expiry

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/membership"
)

// Due is the due set of a store: every expiry of its groups' members, by
// time, with the count of them. A group's Members are changed through it,
// so that both hold every expiry.
type Due struct {
	// mu guards set. It is taken after every other lock of the store, and
	// none is taken while it is held.
	mu  sync.Mutex
	set DueSet
	// live counts the members with an expiry (in the groups' Members).
	live atomic.Int64
	// sooner is told (without waiting: it holds one) when an expiry set
	// comes before every other in set, so that an expirer waiting for the
	// earliest looks again (Wakeup).
	sooner chan struct{}
}

// NewDue returns an empty due set.
func NewDue() Due { return Due{sooner: make(chan struct{}, 1)} }

// Wake tells the expirer waiting on Wakeup to look again: an end that
// comes before every other was set elsewhere (a nesting's).
func (d *Due) Wake() {
	select {
	case d.sooner <- struct{}{}:
	default:
	}
}

// insert adds k to the set, and tells sooner when k comes first. The
// caller holds mu.
func (d *Due) insert(k Key) {
	first := d.set.Len() == 0 || CompareKeys(k, d.set.Min()) < 0
	d.set.Insert(k)
	if first {
		select {
		case d.sooner <- struct{}{}:
		default:
		}
	}
}

// Set gives uid, a member of the group numbered group whose expiries are
// e, the expiry at (0: none), and reports whether that changed it. The
// caller holds the group's shard.
func (d *Due) Set(e *Members, group uint32, uid membership.UID, at int64) bool {
	old := e.put(uid, at)
	if old == at {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if old != 0 {
		d.set.Remove(Key{At: old, Group: group, UID: uid})
	}
	switch {
	case at == 0:
		d.live.Add(-1)
	case old == 0:
		d.live.Add(1)
		fallthrough
	default:
		d.insert(Key{At: at, Group: group, UID: uid})
	}
	return true
}

// SetAll sets the expiries users give (the last of each user's) to those
// of them that isMember, in the group numbered group whose expiries are e,
// for a write committed at commit (zero: now), and returns those it
// changed, ascending by uid. The caller holds the group's shard.
func (d *Due) SetAll(e *Members, group uint32, users []membership.User, commit time.Time, isMember func(membership.UID) bool) []membership.MemberExpiry {
	if !Any(users) {
		return nil
	}
	var changed []membership.MemberExpiry
	for _, x := range Last(users, commit) {
		if isMember(x.UID) && d.Set(e, group, x.UID, millisOrZero(x.At)) {
			changed = append(changed, x)
		}
	}
	return changed
}

// End forgets the expiry of uid, which left the group numbered group,
// whose expiries are e. The caller holds the group's shard.
func (d *Due) End(e *Members, group uint32, uid membership.UID) {
	at := e.remove(uid)
	if at == 0 {
		return
	}
	d.live.Add(-1)
	d.mu.Lock()
	d.set.Remove(Key{At: at, Group: group, UID: uid})
	d.mu.Unlock()
}

// EndExpired forgets the expiries of uids, sorted, which an expire write
// removed from the group whose expiries are e: the due set's entries of
// those stay, as they are due (see the package's doc). The caller holds
// the group's shard.
func (d *Due) EndExpired(e *Members, uids []membership.UID) {
	d.live.Add(-int64(e.removeAll(uids)))
}

// EndAll forgets every expiry of the group numbered group, whose expiries
// are e, which was emptied. The caller holds the group's shard.
func (d *Due) EndAll(e *Members, group uint32) {
	n := e.Len()
	if n == 0 {
		return
	}
	d.live.Add(-int64(n))
	d.mu.Lock()
	for k := range e.keys(group) {
		d.set.Remove(k)
	}
	d.mu.Unlock()
	*e = Members{}
}

// Load gives e, the empty expiries of a group numbered group loaded from a
// snapshot, those of expiries whose uid isMember, and appends their keys
// to keys, which the caller gives to Fill once every group is loaded.
func (d *Due) Load(e *Members, group uint32, expiries []membership.MemberExpiry, isMember func(membership.UID) bool, keys []Key) []Key {
	keys = e.load(group, expiries, isMember, keys)
	d.live.Add(int64(e.Len()))
	return keys
}

// Fill fills the due set, which must be empty and not yet shared, with
// keys, which Load gave.
func (d *Due) Fill(keys []Key) {
	slices.SortFunc(keys, CompareKeys)
	d.set.Fill(keys)
}

// Pop takes from the due set the expiries due at now, about max of them:
// more only to end a group's run of the same time, up to max+maxRun. It
// returns them sorted by group number, uid and time.
func (d *Due) Pop(now time.Time, max, maxRun int) []Key {
	limit := Millis(now)
	d.mu.Lock()
	due := make([]Key, 0, min(d.set.Len(), max))
	d.set.PopWhile(func(k Key) bool {
		if k.At > limit {
			return false
		}
		if n := len(due); n >= max {
			last := due[n-1]
			if k.At != last.At || k.Group != last.Group || n >= max+maxRun {
				return false
			}
		}
		due = append(due, k)
		return true
	})
	d.mu.Unlock()
	slices.SortFunc(due, func(a, b Key) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.UID, b.UID), cmp.Compare(a.At, b.At))
	})
	return due
}

// StillDue returns the writes that expire those of entries, of the group
// groupID whose expiries are e and sorted by uid and time, that its
// members still have, at most maxUIDs a write: an entry of another time
// than its member's expiry is stale, and is dropped, not the member. The
// caller holds the group's shard.
func (e Members) StillDue(groupID string, entries []Key, now time.Time, maxUIDs int) []store.Due {
	var ws []store.Due
	var uids []membership.UID
	var earliest int64
	flush := func() {
		w := membership.Write{Op: membership.OpExpire, GroupID: groupID, UIDs: uids, AsOf: now}
		ws = append(ws, store.Due{Write: w, Earliest: Time(earliest)})
		uids = nil
	}
	cur := e.Cursor(entries[0].UID)
	for _, x := range entries {
		if cur.Of(x.UID) == x.At {
			if len(uids) == 0 || x.At < earliest {
				earliest = x.At
			}
			uids = append(uids, x.UID)
		}
		if len(uids) == maxUIDs {
			flush()
		}
	}
	if len(uids) > 0 {
		flush()
	}
	return ws
}

// Requeue puts back in the due set the expiries, which members still
// have, of uids in the group numbered group whose expiries are e. The
// caller holds the group's shard for reading.
func (d *Due) Requeue(e Members, group uint32, uids []membership.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, uid := range uids {
		if at := e.Of(uid); at != 0 {
			d.set.Insert(Key{At: at, Group: group, UID: uid})
		}
	}
}

// Next returns when the earliest expiry in the due set is due, false when
// none is. It may be one that no longer holds (see the package's doc):
// that costs the expirer one round that finds nothing.
func (d *Due) Next() (time.Time, bool) {
	for k := range d.All {
		return Time(k.At), true
	}
	return time.Time{}, false
}

// All yields the keys of the due set in order, holding its lock.
func (d *Due) All(yield func(Key) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.set.All(yield)
}

// Wakeup returns a channel told when an expiry is set that comes before
// every other.
func (d *Due) Wakeup() <-chan struct{} { return d.sooner }

// Live returns how many memberships have an expiry.
func (d *Due) Live() int64 { return d.live.Load() }
