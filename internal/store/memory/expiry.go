package memory

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/memory/expiry"
	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/nesting"
	"example.com/groupmembership/membership"
)

// Expiries (membership.OpExpire): a group keeps its members' expiries
// (expiry.Members), and the store every one of them in its due set, by
// time (expiry.Due; package expiry says how, and why an expired
// membership's entry may stay behind).

// maxExpireUIDs bounds the uids of one OpExpire write: a million
// memberships due at once are that many changes, each holding its group's
// shard only briefly.
const maxExpireUIDs = 10000

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
// group, at most maxExpireUIDs uids each) with AsOf now, after the
// nestings due, as OpExpireGroups writes (one per parent); none when
// nothing is due. They leave the due set: a caller that cannot apply them gives
// them back with RequeueExpiries.
func (m *Store) DueExpiries(now time.Time, max int) []store.Due {
	ws := m.dueNestings(now, max)
	due := m.due.Pop(now, max, maxExpireUIDs)
	if len(due) == 0 {
		return ws
	}
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
// group number and sorted by uid and time, that its members still have.
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
	return g.Expiries.StillDue(g.ID, entries, now, maxExpireUIDs)
}

// RequeueExpiries gives back the expiries of ws, from DueExpiries, that a
// caller could not apply: those its members still have are due again.
func (m *Store) RequeueExpiries(due []store.Due) {
	m.requeueNestings(due)
	for _, d := range due {
		w := d.Write
		if w.Op != membership.OpExpire {
			continue
		}
		s := m.shardOf(w.GroupID)
		s.mu.RLock()
		if g := s.groups[w.GroupID]; g != nil {
			m.due.Requeue(g.Expiries, g.Number, w.UIDs)
		}
		s.mu.RUnlock()
	}
}

// NextExpiry returns when the earliest expiry in the due set, or the
// earliest end of a nesting, is due, false when none is. It may be one that no longer holds: that costs the expirer
// one round that finds nothing.
func (m *Store) NextExpiry() (time.Time, bool) {
	next, ok := m.due.Next()
	if at := m.nestNext.Load(); at != 0 && (!ok || at < next.UnixMilli()) {
		return time.UnixMilli(at).UTC(), true
	}
	return next, ok
}

// ExpiryWakeup returns a channel told when an expiry is set that comes
// before every other: an expirer waiting for the earliest (up to
// expiry.Interval) looks again, so that a ttl of a millisecond ends within
// about one.
func (m *Store) ExpiryWakeup() <-chan struct{} { return m.due.Wakeup() }

// ExpiryCount returns how many memberships have an expiry.
func (m *Store) ExpiryCount() int64 { return m.due.Live() }

// setExpiries sets the expiries users give (the last of each user's) to
// those of them who are members of g, for a write committed at commit
// (zero: now), and returns those it changed, ascending by uid. The caller
// holds g's shard.
func (m *Store) setExpiries(g *group.Group, users []membership.User, commit time.Time) []membership.MemberExpiry {
	return m.due.SetAll(&g.Expiries, g.Number, users, commit, g.Members.Contains)
}

// changesExpiries reports whether setExpiries would change any expiry of
// g (nil: no group), reading only: a user who is not a member yet counts
// when the write gives them an expiry. The caller holds g's shard.
func changesExpiries(g *group.Group, users []membership.User, commit time.Time) bool {
	var e expiry.Members
	if g != nil {
		e = g.Expiries
	}
	return e.Changes(users, commit)
}

// dueNestings takes the nestings that end at or before now, at most max,
// out of the graph's due set, as OpExpireGroups writes with AsOf now, one
// per parent. It takes the nesting's lock only when one is due.
func (m *Store) dueNestings(now time.Time, max int) []store.Due {
	if at := m.nestNext.Load(); at == 0 || at > now.UnixMilli() {
		return nil
	}
	m.nestMu.Lock()
	ends := m.nest.Pop(now.UnixMilli(), max)
	m.nestNext.Store(m.nest.Next())
	m.nestMu.Unlock()
	slices.SortFunc(ends, func(a, b nesting.Due) int {
		return cmp.Or(strings.Compare(a.Parent, b.Parent), strings.Compare(a.Child, b.Child))
	})
	var ws []store.Due
	for i := 0; i < len(ends); {
		d := store.Due{Write: membership.Write{Op: membership.OpExpireGroups, GroupID: ends[i].Parent, AsOf: now}, Earliest: time.UnixMilli(ends[i].At).UTC()}
		for ; i < len(ends) && ends[i].Parent == d.Write.GroupID; i++ {
			if n := len(d.Write.Subgroups); n > 0 && d.Write.Subgroups[n-1].GroupID == ends[i].Child {
				continue // the same end twice
			}
			d.Write.Subgroups = append(d.Write.Subgroups, membership.Subgroup{GroupID: ends[i].Child})
			if at := time.UnixMilli(ends[i].At).UTC(); at.Before(d.Earliest) {
				d.Earliest = at
			}
		}
		ws = append(ws, d)
	}
	return ws
}

// requeueNestings gives back the nestings of the OpExpireGroups writes of
// due that still have an end.
func (m *Store) requeueNestings(due []store.Due) {
	if !slices.ContainsFunc(due, func(d store.Due) bool { return d.Write.Op == membership.OpExpireGroups }) {
		return
	}
	m.nestMu.Lock()
	defer m.nestMu.Unlock()
	next := m.nest.Next()
	for _, d := range due {
		if d.Write.Op == membership.OpExpireGroups {
			for _, sg := range d.Write.Subgroups {
				m.nest.Requeue(d.Write.GroupID, sg.GroupID)
			}
		}
	}
	m.nestDue(next)
}
