// Package expiring is the in-memory store's side of the expirer
// (store.Expiring): which memberships and nestings are due to end, taken
// out of the due sets and given back, and a round of them applied, each
// write a change of its own. It reads and changes the store through
// Store, which takes the store's locks in its one order (package memory's
// doc), and the parts it names.
package expiring

import (
	"cmp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/memory/expiry"
	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/nesting"
	"example.com/groupmembership/internal/store/memory/nicknames"
	"example.com/groupmembership/internal/store/memory/reverse"
	"example.com/groupmembership/membership"
)

// Store is what the expirer's side needs of the in-memory store, beside
// the parts Queue is given.
type Store interface {
	// RGroup holds groupID's shard for reading and returns its group (nil:
	// it has neither members nor subgroups), and the func that lets go.
	RGroup(groupID string) (*group.Group, func())
	// LockGroups locks the shards of the groups idOf(0) to idOf(n-1), in
	// index order, and returns each one's group (nil: none), and the func
	// that lets go.
	LockGroups(n int, idOf func(i int) string) ([]*group.Group, func())
	// GroupName returns the id of the group numbered n, "" when none is.
	GroupName(n uint32) string
	// RevisionOf returns the revision of g (nil: a group with neither
	// members nor subgroups), as the store's Revision gives it. The caller
	// holds its shard.
	RevisionOf(g *group.Group) membership.Revision
	// Record gives the change c the next revision and keeps it in the
	// feed, and Drop deletes g, which the change rev left vacant: the
	// caller holds g's shard, and nothing after it.
	Record(c membership.Change, st feed.Stamp) membership.Revision
	Drop(g *group.Group, rev membership.Revision)

	// NextNesting returns when the earliest nesting ends, in Unix
	// milliseconds, 0 when none does, without the nesting's lock.
	NextNesting() int64
	// PopNestings takes the nestings that end at or before now, at most
	// max, out of the nesting's due set; RequeueNestings gives back those
	// each calls requeue with, which still end.
	PopNestings(now int64, max int) []nesting.Due
	RequeueNestings(each func(requeue func(parent, child string)))
	// WriteNesting applies an OpExpireGroups write, as the store's Write
	// does, with the stamp st.
	WriteNesting(w membership.Write, st feed.Stamp) (membership.Result, error)
}

// Queue is the expirer's side of one store: its due set and its
// nestings', and the rounds of expiries applied to it. It implements
// store.Expiring's methods, and the rounds the expirer and a replay apply
// (WriteExpiries, ApplyExpiries).
type Queue struct {
	s         Store
	due       *expiry.Due
	reverse   *reverse.Index
	nicknames *nicknames.Directory
	// members counts the store's memberships.
	members *atomic.Int64
}

// New returns the Queue of s, whose due set, reverse index, nicknames and
// count of memberships these are.
func New(s Store, due *expiry.Due, reverse *reverse.Index, nicknames *nicknames.Directory, members *atomic.Int64) *Queue {
	return &Queue{s: s, due: due, reverse: reverse, nicknames: nicknames, members: members}
}

// maxExpireUIDs bounds the uids of one OpExpire write: a million
// memberships due at once are that many changes, each holding its group's
// shard only briefly.
const maxExpireUIDs = 10000

// DueExpiries returns the expiries due at now, about max memberships (more
// only to end a group's run of the same time), as OpExpire writes (one per
// group, at most maxExpireUIDs uids each) with AsOf now, after the
// nestings due, as OpExpireGroups writes (one per parent); none when
// nothing is due. The memberships' writes come in the order of their
// earliest expiry, then of their groups' ids. They leave the due set: a
// caller that cannot apply them gives them back with RequeueExpiries.
func (q *Queue) DueExpiries(now time.Time, max int) []store.Due {
	ws := q.dueNestings(now, max)
	due := q.due.Pop(now, max, maxExpireUIDs)
	if len(due) == 0 {
		return ws
	}
	start := len(ws)
	for i := 0; i < len(due); {
		j := i
		for j < len(due) && due[j].Group == due[i].Group {
			j++
		}
		ws = append(ws, q.stillDue(due[i:j], now)...)
		i = j
	}
	// Due at one time, the groups' expiries come in the order of their
	// ids, not of their numbers (their slots, which depend on the shards'
	// hash): the same order on every instance and every run.
	slices.SortStableFunc(ws[start:], func(a, b store.Due) int {
		return cmp.Or(a.Earliest.Compare(b.Earliest), strings.Compare(a.Write.GroupID, b.Write.GroupID))
	})
	return ws
}

// stillDue returns the writes that expire those of entries, all of one
// group number and sorted by uid and time, that its members still have.
func (q *Queue) stillDue(entries []expiry.Key, now time.Time) []store.Due {
	number := entries[0].Group
	groupID := q.s.GroupName(number)
	if groupID == "" {
		return nil
	}
	g, unlock := q.s.RGroup(groupID)
	defer unlock()
	if g == nil || g.Number != number || g.Expiries.Len() == 0 {
		return nil
	}
	return g.Expiries.StillDue(g.ID, entries, now, maxExpireUIDs)
}

// RequeueExpiries gives back the expiries of ws, from DueExpiries, that a
// caller could not apply: those its members still have are due again.
func (q *Queue) RequeueExpiries(due []store.Due) {
	if slices.ContainsFunc(due, func(d store.Due) bool { return d.Write.Op == membership.OpExpireGroups }) {
		q.s.RequeueNestings(func(requeue func(parent, child string)) {
			for _, d := range due {
				if d.Write.Op == membership.OpExpireGroups {
					for _, sg := range d.Write.Subgroups {
						requeue(d.Write.GroupID, sg.GroupID)
					}
				}
			}
		})
	}
	for _, d := range due {
		w := d.Write
		if w.Op != membership.OpExpire {
			continue
		}
		g, unlock := q.s.RGroup(w.GroupID)
		if g != nil {
			q.due.Requeue(g.Expiries, g.Number, w.UIDs)
		}
		unlock()
	}
}

// NextExpiry returns when the earliest expiry in the due set, or the
// earliest end of a nesting, is due, false when none is. It may be one that no longer holds: that costs the expirer
// one round that finds nothing.
func (q *Queue) NextExpiry() (time.Time, bool) {
	next, ok := q.due.Next()
	if at := q.s.NextNesting(); at != 0 && (!ok || at < next.UnixMilli()) {
		return time.UnixMilli(at).UTC(), true
	}
	return next, ok
}

// ExpiryWakeup returns a channel told when an expiry is set that comes
// before every other: an expirer waiting for the earliest (up to
// expiry.Interval) looks again, so that a ttl of a millisecond ends within
// about one.
func (q *Queue) ExpiryWakeup() <-chan struct{} { return q.due.Wakeup() }

// ExpiryCount returns how many memberships have an expiry.
func (q *Queue) ExpiryCount() int64 { return q.due.Live() }

// dueNestings takes the nestings that end at or before now, at most max,
// out of the graph's due set, as OpExpireGroups writes with AsOf now, one
// per parent. It takes the nesting's lock only when one is due.
func (q *Queue) dueNestings(now time.Time, max int) []store.Due {
	if at := q.s.NextNesting(); at == 0 || at > now.UnixMilli() {
		return nil
	}
	ends := q.s.PopNestings(now.UnixMilli(), max)
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
