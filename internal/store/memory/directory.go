package memory

import (
	"example.com/groupmembership/internal/store/memory/directory"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/membership"
)

// directoryStore is what package directory reads and changes a Store
// through (its Store): the seam between the store and its directory, and
// the removal of a user from every group. Each method takes the locks it
// names in the order doc.go gives; those of expiringStore are shared.
type directoryStore struct{ expiringStore }

var _ directory.Store = directoryStore{}

func (d directoryStore) LockAll() func() { return d.m.lockAll(false) }

func (d directoryStore) GroupsOf(uid membership.UID) []*group.Group {
	m := d.m
	var groups []*group.Group
	// Every shard is held: no slot is given out or freed meanwhile.
	m.reverse.GroupsOf(uid, func(n uint32) { groups = append(groups, m.groups.At(n)) })
	return groups
}

func (d directoryStore) LockGroup(groupID string) (*group.Group, func() *group.Group, func()) {
	s := d.m.shardOf(groupID)
	s.mu.Lock()
	return s.groups.Get(groupID), func() *group.Group { return d.m.newGroup(s, groupID) }, s.mu.Unlock
}

func (d directoryStore) RLockAll() (*group.Index, func()) {
	unlock := d.m.lockAll(true)
	d.m.indexMu.RLock()
	return &d.m.index, func() { d.m.indexMu.RUnlock(); unlock() }
}

func (d directoryStore) Check(g *group.Group, cond membership.Precondition) error {
	return d.m.check(g, cond)
}

func (d directoryStore) Latest() membership.Revision { return d.m.LatestRevision() }
