package memory

import (
	"context"
	"fmt"
	"slices"
	"time"

	"example.com/groupmembership/internal/store/memory/directory"
	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/packed"
	"example.com/groupmembership/internal/store/memory/shards"
	"example.com/groupmembership/membership"
)

// Write implements membership.Store. Its change carries w's Actor and
// Principal, and w's Time or, when it has none, the time the change is
// recorded.
//
// A write with an Idempotency key is applied once for its key (keys.go).
func (m *Store) Write(ctx context.Context, w membership.Write) (membership.Result, error) {
	st := feed.StampOf(w, true)
	if w.Idem.Key != "" {
		return m.keyedWrite(ctx, w, nowOr(w.Time), st)
	}
	return m.write(w, st)
}

// Apply applies w as a store that keeps its own log of writes replays
// one: its change carries w's Actor, Principal and Time as they are, a zero
// Time included (a write logged before changes had times keeps none), so
// that replaying the log gives every change the time it had. A store
// that takes new writes stamps their time before it logs them.
//
// A write with an Idempotency key is applied once for its key, as of its
// Time: a repeat of a write applied before gets its Result, Replayed, and
// changes nothing (keys.go).
func (m *Store) Apply(w membership.Write) (membership.Result, error) {
	st := feed.StampOf(w, false)
	if w.Idem.Key != "" {
		return m.keyedWrite(context.Background(), w, w.Time, st)
	}
	return m.write(w, st)
}

// nowOr returns t, or the time now when t is zero.
func nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

func (m *Store) write(w membership.Write, st feed.Stamp) (membership.Result, error) {
	switch w.Op {
	case membership.OpExpire:
		return m.expire(w.GroupID, w.UIDs, w.AsOf, st), nil
	case membership.OpAdd:
		return m.add(w.GroupID, w.Users, w.If, st)
	case membership.OpRemove:
		return m.remove(w.GroupID, w.UIDs, w.If, st)
	case membership.OpReplace:
		return m.replace(w.GroupID, w.Users, w.If, st)
	case membership.OpDeleteGroup:
		return m.deleteGroup(w.GroupID, w.If, st)
	case membership.OpRemoveUser:
		if len(w.UIDs) != 1 {
			return membership.Result{}, fmt.Errorf("remove_user names %d uids, not one", len(w.UIDs))
		}
		return m.Directory.RemoveUser(w.UIDs[0], st), nil
	case membership.OpAddGroups, membership.OpRemoveGroups, membership.OpReplaceGroups, membership.OpExpireGroups:
		return m.nestWrite(w, st)
	case membership.OpSetUser, membership.OpDeleteUser, membership.OpSetGroup:
		return m.Directory.Write(w, st)
	}
	return membership.Result{}, fmt.Errorf("unknown op %q", w.Op)
}

// replace makes the group exactly users, when cond holds. The group is
// rebuilt from the users given, and its old members are walked once beside
// them: what it holds besides the two sets is the uids it added, so a
// replace of a million members by none holds no list of them.
func (m *Store) replace(groupID string, users []membership.User, cond membership.Precondition, st feed.Stamp) (membership.Result, error) {
	s := m.shardOf(groupID)
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups.Get(groupID)
	if err := m.check(g, cond); err != nil {
		return membership.Result{}, err
	}
	if err := m.Directory.RefuseInactive(users); err != nil {
		return membership.Result{}, err
	}
	uids := group.SortedUIDs(users)
	var old *packed.Members
	if g != nil {
		old = &g.Members
	}
	added, removed := packed.Diff(old, uids)
	st = st.WithTimeFor(users)
	commit := st.At
	if removed == 0 && len(added) == 0 && !m.nicknames.Changes(users) && !changesExpiries(g, users, commit) {
		return membership.Result{Revision: m.revisionOf(g)}, nil
	}
	if g == nil {
		g = m.newGroup(s, groupID)
		old = &g.Members
	}
	var buf [4]uint64
	locked := m.reverse.Lock(func(yield func(membership.UID) bool) {
		packed.EachDifferent(old, uids, func(uid membership.UID, _ bool) bool { return yield(uid) })
	}, buf[:])
	g.SetMembers(&m.reverse, &m.due, uids, m.nicknames.Forget)
	expiries := m.setExpiries(g, users, commit)
	nicks := m.nicknames.Write()
	_, reported := nicks.Set(users, added)
	m.counts.members.Add(int64(len(added) - removed))
	rev := nicks.Record(&m.feed, membership.Change{Op: membership.OpReplace, GroupID: g.ID, UIDs: uids, Nicknames: reported, Expiries: expiries}, st)
	m.reverse.Unlock(locked)
	if g.Vacant() {
		m.dropGroup(s, g, rev)
	} else {
		g.Revision = rev
	}
	return membership.Result{Count: len(added), Removed: removed, Revision: rev}, nil
}

// deleteGroup removes every member of the group, when cond holds, walking
// its members once: it holds no list of them. It removes the group's
// subgroups from it, and it from its parents, whose shards it holds too,
// and its attributes.
func (m *Store) deleteGroup(groupID string, cond membership.Precondition, st feed.Stamp) (membership.Result, error) {
	m.nestMu.Lock()
	defer m.nestMu.Unlock()
	parents := m.nest.Node(groupID).ParentIDs()
	var sbuf [1]uint64
	held := m.lockShards(len(parents)+1, func(i int) string {
		if i == len(parents) {
			return groupID
		}
		return parents[i]
	}, false, sbuf[:])
	defer m.unlockShards(held)
	s := m.shardOf(groupID)
	g := s.groups.Get(groupID)
	if err := m.check(g, cond); err != nil {
		return membership.Result{}, err
	}
	nested := m.nest.Node(groupID) != nil
	if g == nil && !nested {
		return membership.Result{Revision: m.revisionOf(nil)}, nil
	}
	next := m.nest.Next()
	m.nest.Unnest(groupID)
	removed := 0
	var buf [4]uint64
	var locked shards.Set
	if g != nil {
		locked = m.reverse.Lock(g.Members.All, buf[:])
		removed = g.Empty(&m.reverse, &m.due, m.nicknames.Forget)
		g.SetSubgroups(0)
		m.counts.members.Add(-int64(removed))
	}
	nicks := m.nicknames.Write()
	defer nicks.Release()
	if g != nil {
		directory.DropAttributes(m.groups, g, &nicks)
	}
	rev := nicks.Record(&m.feed, membership.Change{Op: membership.OpDeleteGroup, GroupID: groupID}, st)
	if g != nil {
		m.reverse.Unlock(locked)
		m.dropGroup(s, g, rev)
	}
	if nested {
		m.nestChanged(rev, next)
		m.touchParents(parents, rev)
	}
	return membership.Result{Count: removed, Revision: rev}, nil
}

// Groups implements membership.Store. It holds every shard for reading
// while it copies the page, so that the page, the sizes and the total are of
// one revision, and lets go before list encodes it: a page is at most
// MaxPageSize+1 ids (which the groups keep) and sizes.
func (m *Store) Groups(_ context.Context, opts membership.GroupsOptions, list membership.GroupsFunc) (membership.Revision, error) {
	rev, total, page := m.groupsPage(opts)
	list(total, slices.Values(page))
	return rev, nil
}

// groupsPage returns the latest revision, the total of the groups opts's
// prefix selects, and the page opts asks for.
func (m *Store) groupsPage(opts membership.GroupsOptions) (membership.Revision, int, []membership.GroupSize) {
	defer m.lockAll(true)()
	m.indexMu.RLock()
	defer m.indexMu.RUnlock()
	rev := m.LatestRevision()
	total, page := m.index.Page(opts)
	return rev, total, page
}
