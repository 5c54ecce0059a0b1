package memory

import (
	"cmp"
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/membership"
)

// Expiries (membership.OpExpire). A group keeps the expiries of its
// members that have one in a set of its own (expirySet, by uid), nil while
// none has: a membership without an expiry costs nothing more. Every
// expiry set is also in the due set of the store, ordered by time, so that
// finding what is due costs O(log n) per expiry, never a scan. Both are
// delta-encoded in chunks, as members are: an expiry costs a few bytes in
// each, not a map entry and a heap entry.
//
// An expiry changed or ended leaves the due set with it, but for those an
// expire write ends (membership.OpExpire): the expirer has taken them from
// the due set already, and those that another instance, or a log being
// replayed, expires are due, so they leave it at the expirer's next round,
// which drops each whose member does not have that expiry any more.

// maxExpireUIDs bounds the uids of one OpExpire write: a million
// memberships due at once are that many changes, each holding its group's
// shard only briefly.
const maxExpireUIDs = 10000

// memberExpiry is an expiry in a group's expirySet: the member uid ends at
// at (milliseconds since 1970).
type memberExpiry struct {
	uid membership.UID
	at  int64
}

// expirySet holds a group's expiries, by uid.
type expirySet = sortedSet[memberExpiry, expiryCodec]

// expiryCodec encodes an expiry after the one before it: the distance
// between their uids, then the difference of their times (a zigzag
// varint), 0 when a request gave them the same expiry.
type expiryCodec struct{}

func (expiryCodec) compare(a, b memberExpiry) int { return cmp.Compare(a.uid, b.uid) }
func (expiryCodec) maxBytes() int                 { return maxPairChunkBytes }

func (expiryCodec) put(buf []byte, prev, v memberExpiry) []byte {
	buf = binary.AppendUvarint(buf, uint64(v.uid-prev.uid))
	return binary.AppendVarint(buf, v.at-prev.at)
}

func (expiryCodec) next(rest []byte, off int, prev memberExpiry) (memberExpiry, int) {
	d, off := uvarint(rest, off)
	z, off := uvarint(rest, off)
	return memberExpiry{uid: prev.uid + membership.UID(d), at: prev.at + unzigzag(z)}, off
}

// unzigzag decodes what binary.AppendVarint encoded.
func unzigzag(z uint64) int64 {
	x := int64(z >> 1)
	if z&1 != 0 {
		x = ^x
	}
	return x
}

// dueKey is an expiry in the store's due set: the member uid of the group
// numbered group ends at at.
type dueKey struct {
	at    int64
	group uint32
	uid   membership.UID
}

// dueCodec encodes a dueKey after the one before it: the distance between
// their times; then, for the same time, the distance between their group
// numbers, else the number; then, for the same group too, the distance
// between their uids, else the uid.
type dueCodec struct{}

func (dueCodec) compare(a, b dueKey) int {
	return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.group, b.group), cmp.Compare(a.uid, b.uid))
}
func (dueCodec) maxBytes() int { return maxPairChunkBytes }

func (dueCodec) put(buf []byte, prev, v dueKey) []byte {
	dt := uint64(v.at - prev.at)
	buf = binary.AppendUvarint(buf, dt)
	if dt != 0 {
		buf = binary.AppendUvarint(buf, uint64(v.group))
		return binary.AppendUvarint(buf, uint64(v.uid))
	}
	dg := uint64(v.group - prev.group)
	buf = binary.AppendUvarint(buf, dg)
	if dg != 0 {
		return binary.AppendUvarint(buf, uint64(v.uid))
	}
	return binary.AppendUvarint(buf, uint64(v.uid-prev.uid))
}

func (dueCodec) next(rest []byte, off int, prev dueKey) (dueKey, int) {
	dt, off := uvarint(rest, off)
	g, off := uvarint(rest, off)
	u, off := uvarint(rest, off)
	switch {
	case dt != 0:
		return dueKey{at: prev.at + int64(dt), group: uint32(g), uid: membership.UID(u)}, off
	case g != 0:
		return dueKey{at: prev.at, group: prev.group + uint32(g), uid: membership.UID(u)}, off
	}
	return dueKey{at: prev.at, group: prev.group, uid: prev.uid + membership.UID(u)}, off
}

// dueSet holds the expiries of the store by time. Its mu is taken after every other lock
// of the store, and none is taken while it is held.
type dueSet struct {
	mu  sync.Mutex
	set sortedSet[dueKey, dueCodec]
	// live counts the members with an expiry (in the groups' sets).
	live atomic.Int64
	// sooner is told (without waiting: it holds one) when an expiry set
	// comes before every other in set, so that an expirer waiting for the
	// earliest looks again (ExpiryWakeup).
	sooner chan struct{}
}

// insert adds k to the set, and tells sooner when k comes first. The
// caller holds mu.
func (d *dueSet) insert(k dueKey) {
	first := d.set.size == 0 || dueCodec{}.compare(k, d.set.chunks[0].first) < 0
	d.set.insert(k)
	if first {
		select {
		case d.sooner <- struct{}{}:
		default:
		}
	}
}

// expiryMillis returns t in milliseconds since 1970.
func expiryMillis(t time.Time) int64 { return t.UnixMilli() }

// expiryOf returns the expiry of uid in g, 0 when it has none.
func expiryOf(g *group, uid membership.UID) int64 {
	e, _ := g.expiries.get(memberExpiry{uid: uid})
	return e.at
}

// setExpiry gives uid, a member of g, the expiry at (0: none), and reports
// whether that changed it. The caller holds g's shard.
func (m *Store) setExpiry(g *group, uid membership.UID, at int64) bool {
	old := expiryOf(g, uid)
	if old == at {
		return false
	}
	if g.expiries == nil {
		g.expiries = new(expirySet)
	}
	m.due.mu.Lock()
	defer m.due.mu.Unlock()
	if old != 0 {
		g.expiries.remove(memberExpiry{uid: uid})
		m.due.set.remove(dueKey{at: old, group: g.number, uid: uid})
	}
	switch {
	case at == 0:
		m.due.live.Add(-1)
	case old == 0:
		m.due.live.Add(1)
		fallthrough
	default:
		g.expiries.insert(memberExpiry{uid: uid, at: at})
		m.due.insert(dueKey{at: at, group: g.number, uid: uid})
	}
	if g.expiries.size == 0 {
		g.expiries = nil
	}
	return true
}

// endExpiry forgets the expiry of uid, which left g. The caller holds g's
// shard.
func (m *Store) endExpiry(g *group, uid membership.UID) {
	if g.expiries == nil {
		return
	}
	e, had := g.expiries.remove(memberExpiry{uid: uid})
	if !had {
		return
	}
	m.due.live.Add(-1)
	m.due.mu.Lock()
	m.due.set.remove(dueKey{at: e.at, group: g.number, uid: uid})
	m.due.mu.Unlock()
	if g.expiries.size == 0 {
		g.expiries = nil
	}
}

// endExpired forgets the expiries of uids, sorted, which an expire write
// removed from g: the due set's entries of those stay, as they are due
// (see above). The caller holds g's shard.
func (m *Store) endExpired(g *group, uids []membership.UID) {
	if g.expiries == nil || len(uids) == 0 {
		return
	}
	before := g.expiries.size
	if len(uids) < before/4 {
		for _, uid := range uids {
			g.expiries.remove(memberExpiry{uid: uid})
		}
	} else {
		// Many of them: one pass over the set, not a search for each.
		kept := make([]memberExpiry, 0, before-min(before, len(uids)))
		i := 0
		for e := range g.expiries.all {
			for i < len(uids) && uids[i] < e.uid {
				i++
			}
			if i == len(uids) || uids[i] != e.uid {
				kept = append(kept, e)
			}
		}
		g.expiries = new(expirySet)
		g.expiries.fill(kept)
	}
	m.due.live.Add(-int64(before - g.expiries.size))
	if g.expiries.size == 0 {
		g.expiries = nil
	}
}

// endExpiries forgets every expiry of g, which was emptied. The caller
// holds g's shard.
func (m *Store) endExpiries(g *group) {
	if g.expiries == nil {
		return
	}
	m.due.live.Add(-int64(g.expiries.size))
	m.due.mu.Lock()
	for e := range g.expiries.all {
		m.due.set.remove(dueKey{at: e.at, group: g.number, uid: e.uid})
	}
	m.due.mu.Unlock()
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
			old = expiryOf(g, e.UID)
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

// expiresOf returns the expiry at, 0 for none, as a member carries it.
func expiresOf(at int64) time.Time {
	if at == 0 {
		return time.Time{}
	}
	return time.UnixMilli(at).UTC()
}

// expire removes, from the group, each of uids whose expiry is at or
// before asOf, as a remove does, under OpExpire: one whose expiry was
// extended or ended since it was found due stays.
func (m *Store) expire(groupID string, uids []membership.UID, asOf time.Time, st feed.Stamp) membership.Result {
	s := m.shardOf(groupID)
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[groupID]
	if g == nil || g.expiries == nil || len(uids) == 0 {
		return membership.Result{Revision: m.revisionOf(g)}
	}
	return m.removeHeld(s, g, dueMembers(g, uids, asOf), membership.OpExpire, st)
}

// dueMembers returns those of uids, not empty, whose expiry in g is at or
// before asOf, ascending and once each, in a new slice. The caller holds
// g's shard, and g has expiries.
func dueMembers(g *group, uids []membership.UID, asOf time.Time) []membership.UID {
	// Sorted and compacted, the uids are found in one walk of the group's
	// expiries, and a uid named twice is removed once.
	sorted := slices.Clone(uids)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	limit := expiryMillis(asOf)
	due := sorted[:0]
	cur := g.expiries.cursor(memberExpiry{uid: sorted[0]})
	for _, uid := range sorted {
		cur.seekTo(memberExpiry{uid: uid})
		if cur.ok && cur.v.uid == uid && cur.v.at <= limit {
			due = append(due, uid)
		}
	}
	return due
}

// DueExpiries returns the expiries due at now, about max memberships (more
// only to end a group's run of the same time), as OpExpire writes (one per
// group, at most maxExpireUIDs uids each) with AsOf now; none when nothing
// is due. They leave the due set: a caller that cannot apply them gives
// them back with RequeueExpiries.
func (m *Store) DueExpiries(now time.Time, max int) []store.Due {
	limit := expiryMillis(now)
	m.due.mu.Lock()
	due := make([]dueKey, 0, min(m.due.set.size, max))
	m.due.set.popWhile(func(k dueKey) bool {
		if k.at > limit {
			return false
		}
		if n := len(due); n >= max {
			last := due[n-1]
			if k.at != last.at || k.group != last.group || n >= max+maxExpireUIDs {
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
	slices.SortFunc(due, func(a, b dueKey) int {
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
// group number and sorted by uid and time, that its members still have: an
// entry of another time than its member's expiry is stale, and is dropped,
// not the member.
func (m *Store) stillDue(entries []dueKey, now time.Time) []store.Due {
	number := entries[0].group
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
	if g == nil || g.number != number || g.expiries == nil {
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
	cur := g.expiries.cursor(memberExpiry{uid: entries[0].uid})
	for _, e := range entries {
		cur.seekTo(memberExpiry{uid: e.uid})
		if cur.ok && cur.v.uid == e.uid && cur.v.at == e.at {
			if len(uids) == 0 || e.at < earliest {
				earliest = e.at
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
			m.due.mu.Lock()
			for _, uid := range w.UIDs {
				if at := expiryOf(g, uid); at != 0 {
					m.due.set.insert(dueKey{at: at, group: g.number, uid: uid})
				}
			}
			m.due.mu.Unlock()
		}
		s.mu.RUnlock()
	}
}

// NextExpiry returns when the earliest expiry in the due set is due, false
// when none is. It may be one that no longer holds (see above): that costs
// the expirer one round that finds nothing.
func (m *Store) NextExpiry() (time.Time, bool) {
	m.due.mu.Lock()
	defer m.due.mu.Unlock()
	if m.due.set.size == 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(m.due.set.chunks[0].first.at).UTC(), true
}

// ExpiryWakeup returns a channel told when an expiry is set that comes
// before every other: an expirer waiting for the earliest (up to
// expiry.Interval) looks again, so that a ttl of a millisecond ends within
// about one.
func (m *Store) ExpiryWakeup() <-chan struct{} { return m.due.sooner }

// ExpiryCount returns how many memberships have an expiry.
func (m *Store) ExpiryCount() int64 { return m.due.live.Load() }

// exportExpiries returns the expiries of set, a group's, ascending by uid,
// for a snapshot.
func exportExpiries(set *expirySet) []membership.MemberExpiry {
	if set == nil {
		return nil
	}
	out := make([]membership.MemberExpiry, 0, set.size)
	for e := range set.all {
		out = append(out, membership.MemberExpiry{UID: e.uid, At: time.UnixMilli(e.at).UTC()})
	}
	return out
}

// importExpiries gives g, loaded from a snapshot, its members' expiries,
// and appends their entries of the due set to due, which the caller sorts
// and fills the due set with. Those past are due at once: the expirer
// applies them, each group's in a change, before the service answers
// reads.
func (m *Store) importExpiries(g *group, expiries []membership.MemberExpiry, due []dueKey) []dueKey {
	var set []memberExpiry
	for _, e := range expiries {
		if e.At.IsZero() || !g.members.contains(e.UID) {
			continue
		}
		set = append(set, memberExpiry{uid: e.UID, at: expiryMillis(e.At)})
	}
	if len(set) == 0 {
		return due
	}
	// A snapshot holds them ascending by uid; one written otherwise is
	// sorted, not trusted.
	slices.SortStableFunc(set, func(a, b memberExpiry) int { return cmp.Compare(a.uid, b.uid) })
	set = slices.CompactFunc(set, func(a, b memberExpiry) bool { return a.uid == b.uid })
	g.expiries = new(expirySet)
	g.expiries.fill(set)
	m.due.live.Add(int64(len(set)))
	for _, e := range set {
		due = append(due, dueKey{at: e.at, group: g.number, uid: e.uid})
	}
	return due
}
