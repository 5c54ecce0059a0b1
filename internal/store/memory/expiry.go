package memory

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/memory/expiry"
	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/membership"
)

// Expiries (membership.OpExpire): a group keeps its members' expiries
// (expiry.Members), and the store every one of them in its due set, by
// time (package expiry says how, and why an expired membership's entry may
// stay behind).

// maxExpireUIDs bounds the uids of one OpExpire write: a million
// memberships due at once are that many changes, each holding its group's
// shard only briefly.
const maxExpireUIDs = 10000

// dueSet holds the expiries of the store by time.
type dueSet struct {
	// mu guards set. It is taken after every other lock of the store, and
	// none is taken while it is held.
	mu  sync.Mutex
	set expiry.DueSet
	// live counts the members with an expiry (in the groups' Members).
	live atomic.Int64
	// sooner is told (without waiting: it holds one) when an expiry set
	// comes before every other in set, so that an expirer waiting for the
	// earliest looks again (ExpiryWakeup).
	sooner chan struct{}
}

// insert adds k to the set, and tells sooner when k comes first. The
// caller holds mu.
func (d *dueSet) insert(k expiry.Key) {
	first := d.set.Len() == 0 || expiry.CompareKeys(k, d.set.Min()) < 0
	d.set.Insert(k)
	if first {
		select {
		case d.sooner <- struct{}{}:
		default:
		}
	}
}

// setExpiry gives uid, a member of g, the expiry at (0: none), and reports
// whether that changed it. The caller holds g's shard.
func (m *Store) setExpiry(g *group.Group, uid membership.UID, at int64) bool {
	old := g.Expiries.Put(uid, at)
	if old == at {
		return false
	}
	m.due.mu.Lock()
	defer m.due.mu.Unlock()
	if old != 0 {
		m.due.set.Remove(expiry.Key{At: old, Group: g.Number, UID: uid})
	}
	switch {
	case at == 0:
		m.due.live.Add(-1)
	case old == 0:
		m.due.live.Add(1)
		fallthrough
	default:
		m.due.insert(expiry.Key{At: at, Group: g.Number, UID: uid})
	}
	return true
}

// endExpiry forgets the expiry of uid, which left g. The caller holds g's
// shard.
func (m *Store) endExpiry(g *group.Group, uid membership.UID) {
	at := g.Expiries.Remove(uid)
	if at == 0 {
		return
	}
	m.due.live.Add(-1)
	m.due.mu.Lock()
	m.due.set.Remove(expiry.Key{At: at, Group: g.Number, UID: uid})
	m.due.mu.Unlock()
}

// endExpired forgets the expiries of uids, sorted, which an expire write
// removed from g: the due set's entries of those stay, as they are due.
// The caller holds g's shard.
func (m *Store) endExpired(g *group.Group, uids []membership.UID) {
	m.due.live.Add(-int64(g.Expiries.RemoveAll(uids)))
}

// endExpiries forgets every expiry of g, which was emptied. The caller
// holds g's shard.
func (m *Store) endExpiries(g *group.Group) {
	n := g.Expiries.Len()
	if n == 0 {
		return
	}
	m.due.live.Add(-int64(n))
	m.due.mu.Lock()
	for k := range g.Expiries.Keys(g.Number) {
		m.due.set.Remove(k)
	}
	m.due.mu.Unlock()
	g.Expiries = expiry.Members{}
}

// setExpiries sets the expiries users give (the last of each user's) to
// those of them who are members of g, for a write committed at commit
// (zero: now), and returns those it changed, ascending by uid. The caller
// holds g's shard.
func (m *Store) setExpiries(g *group.Group, users []membership.User, commit time.Time) []membership.MemberExpiry {
	if !expiry.Any(users) {
		return nil
	}
	var changed []membership.MemberExpiry
	for _, e := range expiry.Last(users, commit) {
		if g.Members.Contains(e.UID) && m.setExpiry(g, e.UID, expiry.MillisOrZero(e.At)) {
			changed = append(changed, e)
		}
	}
	return changed
}

// changesExpiries reports whether setExpiries would change any expiry of
// g (nil: no group), reading only: a user who is not a member yet counts
// when the write gives them an expiry. The caller holds g's shard.
func (m *Store) changesExpiries(g *group.Group, users []membership.User, commit time.Time) bool {
	if !expiry.Any(users) {
		return false
	}
	for _, e := range expiry.Last(users, commit) {
		var old int64
		if g != nil {
			old = g.Expiries.Of(e.UID)
		}
		if old != expiry.MillisOrZero(e.At) {
			return true
		}
	}
	return false
}

// expire removes, from the group, each of uids whose expiry is at or
// before asOf, as a remove does, under OpExpire: one whose expiry was
// extended or ended since it was found due stays.
func (m *Store) expire(groupID string, uids []membership.UID, asOf time.Time, st feed.Stamp) membership.Result {
	s := m.shardOf(groupID)
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[groupID]
	if g == nil || g.Expiries.Len() == 0 || len(uids) == 0 {
		return membership.Result{Revision: m.revisionOf(g)}
	}
	return m.removeHeld(s, g, g.Expiries.Due(uids, asOf), membership.OpExpire, st)
}

// DueExpiries returns the expiries due at now, about max memberships (more
// only to end a group's run of the same time), as OpExpire writes (one per
// group, at most maxExpireUIDs uids each) with AsOf now; none when nothing
// is due. They leave the due set: a caller that cannot apply them gives
// them back with RequeueExpiries.
func (m *Store) DueExpiries(now time.Time, max int) []store.Due {
	limit := expiry.Millis(now)
	m.due.mu.Lock()
	due := make([]expiry.Key, 0, min(m.due.set.Len(), max))
	m.due.set.PopWhile(func(k expiry.Key) bool {
		if k.At > limit {
			return false
		}
		if n := len(due); n >= max {
			last := due[n-1]
			if k.At != last.At || k.Group != last.Group || n >= max+maxExpireUIDs {
				return false
			}
		}
		due = append(due, k)
		return true
	})
	m.due.mu.Unlock()
	if len(due) == 0 {
		return nil
	}
	slices.SortFunc(due, func(a, b expiry.Key) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.UID, b.UID), cmp.Compare(a.At, b.At))
	})
	var ws []store.Due
	for i := 0; i < len(due); {
		j := i
		for j < len(due) && due[j].Group == due[i].Group {
			j++
		}
		ws = append(ws, m.stillDue(due[i:j], now)...)
		i = j
	}
	return ws
}

// stillDue returns the writes that expire those of entries, all of one
// group number and sorted by uid and time, that its members still have: an
// entry of another time than its member's expiry is stale, and is dropped,
// not the member.
func (m *Store) stillDue(entries []expiry.Key, now time.Time) []store.Due {
	number := entries[0].Group
	m.groupNumbers.mu.RLock()
	var groupID string
	if int(number) < len(m.groupNumbers.names) {
		groupID = m.groupNumbers.names[number]
	}
	m.groupNumbers.mu.RUnlock()
	if groupID == "" {
		return nil
	}
	s := m.shardOf(groupID)
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.groups[groupID]
	if g == nil || g.Number != number || g.Expiries.Len() == 0 {
		return nil
	}
	var ws []store.Due
	var uids []membership.UID
	var earliest int64
	flush := func() {
		w := membership.Write{Op: membership.OpExpire, GroupID: g.ID, UIDs: uids, AsOf: now}
		ws = append(ws, store.Due{Write: w, Earliest: expiry.Time(earliest)})
		uids = nil
	}
	cur := g.Expiries.Cursor(entries[0].UID)
	for _, e := range entries {
		if cur.Of(e.UID) == e.At {
			if len(uids) == 0 || e.At < earliest {
				earliest = e.At
			}
			uids = append(uids, e.UID)
		}
		if len(uids) == maxExpireUIDs {
			flush()
		}
	}
	if len(uids) > 0 {
		flush()
	}
	return ws
}

// RequeueExpiries gives back the expiries of ws, from DueExpiries, that a
// caller could not apply: those its members still have are due again.
func (m *Store) RequeueExpiries(due []store.Due) {
	for _, d := range due {
		w := d.Write
		s := m.shardOf(w.GroupID)
		s.mu.RLock()
		if g := s.groups[w.GroupID]; g != nil {
			m.due.mu.Lock()
			for _, uid := range w.UIDs {
				if at := g.Expiries.Of(uid); at != 0 {
					m.due.set.Insert(expiry.Key{At: at, Group: g.Number, UID: uid})
				}
			}
			m.due.mu.Unlock()
		}
		s.mu.RUnlock()
	}
}

// NextExpiry returns when the earliest expiry in the due set is due, false
// when none is. It may be one that no longer holds: that costs the expirer
// one round that finds nothing.
func (m *Store) NextExpiry() (time.Time, bool) {
	m.due.mu.Lock()
	defer m.due.mu.Unlock()
	if m.due.set.Len() == 0 {
		return time.Time{}, false
	}
	return expiry.Time(m.due.set.Min().At), true
}

// ExpiryWakeup returns a channel told when an expiry is set that comes
// before every other: an expirer waiting for the earliest (up to
// expiry.Interval) looks again, so that a ttl of a millisecond ends within
// about one.
func (m *Store) ExpiryWakeup() <-chan struct{} { return m.due.sooner }

// ExpiryCount returns how many memberships have an expiry.
func (m *Store) ExpiryCount() int64 { return m.due.live.Load() }

// loadExpiries gives g, loaded from a snapshot, its members' expiries, and
// appends their entries of the due set to due, which the caller sorts and
// fills the due set with. Those past are due at once: the expirer applies
// them, each group's in a change, before the service answers reads.
func (m *Store) loadExpiries(g *group.Group, expiries []membership.MemberExpiry, due []expiry.Key) []expiry.Key {
	due = g.Expiries.Load(g.Number, expiries, g.Members.Contains, due)
	m.due.live.Add(int64(g.Expiries.Len()))
	return due
}
