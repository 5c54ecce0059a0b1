package memory

import (
	"cmp"
	"container/heap"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/membership"
)

// Expiries (membership.OpExpire). A group keeps the expiries of its
// members that have one in a map of its own, nil while none has: a
// membership without an expiry costs nothing more. Every expiry set is
// also pushed on the due queue, a min-heap by time, so that finding what
// is due costs O(log n) per expiry, never a scan. An expiry changed or
// ended leaves its old entry in the queue: an entry is checked against the
// group when it comes due, and dropped unless the member still has that
// expiry (the queue is rebuilt when more than half of it is such).

// maxExpireUIDs bounds the uids of one OpExpire write: a million
// memberships due at once are that many changes, each holding its group's
// shard only briefly.
const maxExpireUIDs = 10000

// dueEntry is an expiry in the due queue: the member uid of group ends at
// at (milliseconds since 1970).
type dueEntry struct {
	at    int64
	uid   membership.UID
	group string
}

// dueQueue is the min-heap of the expiries set, by time. Its mu is taken
// after every other lock of the store, and none is taken while it is held.
type dueQueue struct {
	mu      sync.Mutex
	entries dueHeap
	// live counts the members with an expiry (in the groups' maps): the
	// queue is rebuilt from the groups when it holds more than twice as
	// many entries.
	live atomic.Int64
}

type dueHeap []dueEntry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueEntry)) }
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func (q *dueQueue) push(e dueEntry) {
	q.mu.Lock()
	heap.Push(&q.entries, e)
	q.mu.Unlock()
}

// popDue pops the entries due at now, at most max.
func (q *dueQueue) popDue(now int64, max int) []dueEntry {
	q.mu.Lock()
	defer q.mu.Unlock()
	var due []dueEntry
	for len(q.entries) > 0 && q.entries[0].at <= now && len(due) < max {
		due = append(due, heap.Pop(&q.entries).(dueEntry))
	}
	return due
}

// next returns the time of the earliest entry, false when there is none.
func (q *dueQueue) next() (int64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.entries) == 0 {
		return 0, false
	}
	return q.entries[0].at, true
}

// expiryMillis returns t in milliseconds since 1970.
func expiryMillis(t time.Time) int64 { return t.UnixMilli() }

// setExpiry gives uid, a member of g, the expiry at (0: none), and reports
// whether that changed it. The caller holds g's shard.
func (m *Store) setExpiry(g *group, uid membership.UID, at int64) bool {
	old, had := g.expiries[uid]
	switch {
	case at == 0 && !had, had && old == at:
		return false
	case at == 0:
		delete(g.expiries, uid)
		m.due.live.Add(-1)
		return true
	}
	if g.expiries == nil {
		g.expiries = make(map[membership.UID]int64)
	}
	g.expiries[uid] = at
	if !had {
		m.due.live.Add(1)
	}
	m.due.push(dueEntry{at: at, uid: uid, group: g.id})
	return true
}

// endExpiry forgets the expiry of uid, which left g. The caller holds g's
// shard.
func (m *Store) endExpiry(g *group, uid membership.UID) {
	if _, had := g.expiries[uid]; had {
		delete(g.expiries, uid)
		m.due.live.Add(-1)
	}
}

// endExpiries forgets every expiry of g, which was emptied. The caller
// holds g's shard.
func (m *Store) endExpiries(g *group) {
	m.due.live.Add(-int64(len(g.expiries)))
	g.expiries = nil
}

// lastExpiries returns the expiries users set, the last of each user's,
// for a write committed at commit (zero: now, read only when a TTL needs
// it), ascending by uid. It costs O(n log n) for n users with an expiry.
func lastExpiries(users []membership.User, commit time.Time) []membership.MemberExpiry {
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

// setExpiries sets the expiries users give (the last of each user's) to
// those of them who are members of g, for a write committed at commit
// (zero: now), and returns those it changed, ascending by uid. The caller holds g's
// shard.
func (m *Store) setExpiries(g *group, users []membership.User, commit time.Time) []membership.MemberExpiry {
	if !hasExpiries(users) {
		return nil
	}
	var changed []membership.MemberExpiry
	for _, e := range lastExpiries(users, commit) {
		if g.members.contains(e.UID) && m.setExpiry(g, e.UID, millisOrZero(e.At)) {
			changed = append(changed, e)
		}
	}
	return changed
}

// changesExpiries reports whether setExpiries would change any expiry of
// g (nil: no group), reading only: a user who is not a member yet counts
// when the write gives them an expiry. The caller holds g's shard.
func (m *Store) changesExpiries(g *group, users []membership.User, commit time.Time) bool {
	if !hasExpiries(users) {
		return false
	}
	for _, e := range lastExpiries(users, commit) {
		var old int64
		if g != nil {
			old = g.expiries[e.UID]
		}
		if old != millisOrZero(e.At) {
			return true
		}
	}
	return false
}

func hasExpiries(users []membership.User) bool {
	return slices.ContainsFunc(users, func(u membership.User) bool { return u.Expiry.Set })
}

func millisOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return expiryMillis(t)
}

// expiresOf returns the expiry of uid in g, as a member carries it.
func expiresOf(expiries map[membership.UID]int64, uid membership.UID) time.Time {
	if at, ok := expiries[uid]; ok {
		return time.UnixMilli(at).UTC()
	}
	return time.Time{}
}

// expire removes, from the group, each of uids whose expiry is at or
// before asOf, as a remove does, under OpExpire: one whose expiry was
// extended or ended since it was found due stays.
func (m *Store) expire(groupID string, uids []membership.UID, asOf time.Time, st stamp) membership.Result {
	s := m.shardOf(groupID)
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[groupID]
	if g == nil {
		return membership.Result{Revision: m.revisionOf(nil)}
	}
	limit := expiryMillis(asOf)
	due := make([]membership.UID, 0, len(uids))
	for _, uid := range uids {
		if at, ok := g.expiries[uid]; ok && at <= limit {
			due = append(due, uid)
		}
	}
	// A uid named twice is removed once: sorted and compacted, not
	// searched for each, which made a write of 10,000 uids quadratic.
	slices.Sort(due)
	due = slices.Compact(due)
	return m.removeHeld(s, g, due, membership.OpExpire, st)
}

// DueExpiries returns the expiries due at now, at most max memberships, as
// OpExpire writes (one per group, at most maxExpireUIDs uids each) with
// AsOf now; none when nothing is due. They leave the due queue: a caller
// that cannot apply them gives them back with RequeueExpiries.
func (m *Store) DueExpiries(now time.Time, max int) []store.Due {
	m.compactDue()
	due := m.due.popDue(expiryMillis(now), max)
	if len(due) == 0 {
		return nil
	}
	slices.SortFunc(due, func(a, b dueEntry) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.uid, b.uid), cmp.Compare(a.at, b.at))
	})
	var ws []store.Due
	for i := 0; i < len(due); {
		j := i
		for j < len(due) && due[j].group == due[i].group {
			j++
		}
		ws = append(ws, m.stillDue(due[i:j], now)...)
		i = j
	}
	return ws
}

// stillDue returns the writes that expire those of entries, all of one
// group, sorted by uid and time, that its members still have: a member's
// entries of another time than its expiry's are stale, and are dropped,
// not the member.
func (m *Store) stillDue(entries []dueEntry, now time.Time) []store.Due {
	groupID := entries[0].group
	s := m.shardOf(groupID)
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.groups[groupID]
	if g == nil {
		return nil
	}
	var ws []store.Due
	var uids []membership.UID
	var earliest int64
	flush := func() {
		w := membership.Write{Op: membership.OpExpire, GroupID: g.id, UIDs: uids, AsOf: now}
		ws = append(ws, store.Due{Write: w, Earliest: time.UnixMilli(earliest).UTC()})
		uids = nil
	}
	for k, e := range entries {
		if k > 0 && e == entries[k-1] {
			continue
		}
		if at, ok := g.expiries[e.uid]; ok && at == e.at {
			if len(uids) == 0 || at < earliest {
				earliest = at
			}
			uids = append(uids, e.uid)
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
			for _, uid := range w.UIDs {
				if at, ok := g.expiries[uid]; ok {
					m.due.push(dueEntry{at: at, uid: uid, group: g.id})
				}
			}
		}
		s.mu.RUnlock()
	}
}

// NextExpiry returns when the earliest expiry queued is due, false when
// none is. It may be one that no longer holds.
//
// The expirer asks every tick: it is also when the queue is compacted, so
// that expiries changed again and again, far ahead, do not grow it.
func (m *Store) NextExpiry() (time.Time, bool) {
	m.compactDue()
	at, ok := m.due.next()
	if !ok {
		return time.Time{}, false
	}
	return time.UnixMilli(at).UTC(), true
}

// compactDue rebuilds the due queue from the groups when it holds more
// than twice the expiries there are (and more than a few), so that
// expiries changed again and again do not grow it.
func (m *Store) compactDue() {
	m.due.mu.Lock()
	stale := len(m.due.entries) > 1024 && int64(len(m.due.entries)) > 2*m.due.live.Load()
	m.due.mu.Unlock()
	if !stale {
		return
	}
	for i := range m.shards {
		m.shards[i].mu.RLock()
	}
	var entries dueHeap
	for i := range m.shards {
		for _, g := range m.shards[i].groups {
			for uid, at := range g.expiries {
				entries = append(entries, dueEntry{at: at, uid: uid, group: g.id})
			}
		}
	}
	heap.Init(&entries)
	m.due.mu.Lock()
	m.due.entries = entries
	m.due.mu.Unlock()
	for i := range m.shards {
		m.shards[i].mu.RUnlock()
	}
}

// ExpiryCount returns how many memberships have an expiry.
func (m *Store) ExpiryCount() int64 { return m.due.live.Load() }

// exportExpiries returns expiries, a group's, ascending by uid, for a
// snapshot.
func exportExpiries(expiries map[membership.UID]int64) []membership.MemberExpiry {
	if len(expiries) == 0 {
		return nil
	}
	out := make([]membership.MemberExpiry, 0, len(expiries))
	for uid, at := range expiries {
		out = append(out, membership.MemberExpiry{UID: uid, At: time.UnixMilli(at).UTC()})
	}
	slices.SortFunc(out, func(a, b membership.MemberExpiry) int { return cmp.Compare(a.UID, b.UID) })
	return out
}

// importExpiries gives g, loaded from a snapshot, its members' expiries.
// Those past are due at once: the expirer applies them, each group's in a
// change, before the service answers reads.
func (m *Store) importExpiries(g *group, expiries []membership.MemberExpiry) {
	for _, e := range expiries {
		if !e.At.IsZero() && g.members.contains(e.UID) {
			m.setExpiry(g, e.UID, expiryMillis(e.At))
		}
	}
}
