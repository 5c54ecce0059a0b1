package memory

import (
	"example.com/groupmembership/internal/store/memory/expiring"
	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/nesting"
	"example.com/groupmembership/membership"
)

// expiringStore is what package expiring reads and changes a Store
// through (its Store): the seam between the store and the expirer's side
// of it. Each method takes the locks it names in the order doc.go gives.
type expiringStore struct{ m *Store }

var _ expiring.Store = expiringStore{}

func (e expiringStore) RGroup(groupID string) (*group.Group, func()) {
	s := e.m.shardOf(groupID)
	s.mu.RLock()
	return s.groups.Get(groupID), s.mu.RUnlock
}

func (e expiringStore) LockGroups(n int, idOf func(i int) string) ([]*group.Group, func()) {
	held := e.m.lockShards(n, idOf, false, nil)
	groups := make([]*group.Group, n)
	for i := range n {
		id := idOf(i)
		groups[i] = e.m.shardOf(id).groups.Get(id)
	}
	return groups, func() { e.m.unlockShards(held) }
}

func (e expiringStore) GroupName(n uint32) string {
	m := e.m
	m.groupNumbers.RLock()
	defer m.groupNumbers.RUnlock()
	if g := m.groups.At(n); g != nil {
		return g.ID // "" for a free slot
	}
	return ""
}

func (e expiringStore) RevisionOf(g *group.Group) membership.Revision { return e.m.revisionOf(g) }

func (e expiringStore) Record(c membership.Change, st feed.Stamp) membership.Revision {
	return e.m.feed.Record(c, st, nil)
}

func (e expiringStore) Drop(g *group.Group, rev membership.Revision) {
	e.m.dropGroup(e.m.shardOf(g.ID), g, rev)
}

func (e expiringStore) NextNesting() int64 { return e.m.nestNext.Load() }

func (e expiringStore) PopNestings(now int64, max int) []nesting.Due {
	m := e.m
	m.nestMu.Lock()
	defer m.nestMu.Unlock()
	ends := m.nest.Pop(now, max)
	m.nestNext.Store(m.nest.Next())
	return ends
}

func (e expiringStore) RequeueNestings(each func(requeue func(parent, child string))) {
	m := e.m
	m.nestMu.Lock()
	defer m.nestMu.Unlock()
	next := m.nest.Next()
	each(m.nest.Requeue)
	m.nestDue(next)
}

func (e expiringStore) WriteNesting(w membership.Write, st feed.Stamp) (membership.Result, error) {
	return e.m.nestWrite(w, st)
}
