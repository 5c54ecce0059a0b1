package memory

import (
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/nesting"
	"example.com/groupmembership/internal/store/memory/nicknames"
	"example.com/groupmembership/internal/store/memory/shards"
	"example.com/groupmembership/internal/store/memory/transitive"
	"example.com/groupmembership/membership"
)

// transitiveStore is what package transitive reads a Store through (its
// Store): the seam between the store and its transitive reads. Each method
// takes the locks it names in the order doc.go gives.
type transitiveStore struct{ m *Store }

var _ transitive.Store = transitiveStore{}

func (t transitiveStore) RLockNesting() (*nesting.Graph, membership.Revision) {
	t.m.nestMu.RLock()
	return t.m.nest, t.m.nestRev
}

func (t transitiveStore) RUnlockNesting() { t.m.nestMu.RUnlock() }

func (t transitiveStore) Shards() int { return len(t.m.shards) }

func (t transitiveStore) ShardOf(groupID string) int { return t.m.shardIndex(groupID) }

func (t transitiveStore) RLockShards(set shards.Set) { set.Lock(t.m.shardMu, true) }

func (t transitiveStore) RUnlockShards(set shards.Set) { set.Unlock(t.m.shardMu, true) }

func (t transitiveStore) RLockShard(i int) { t.m.shards[i].mu.RLock() }

func (t transitiveStore) RUnlockShard(i int) { t.m.shards[i].mu.RUnlock() }

func (t transitiveStore) ShardWrites(i int) uint64 { return t.m.shards[i].mu.Writes() }

func (t transitiveStore) Group(i int, groupID string) *group.Group {
	return t.m.shards[i].groups.Get(groupID)
}

func (t transitiveStore) Unnested(g *group.Group) membership.Revision {
	t.m.groupNumbers.RLock()
	defer t.m.groupNumbers.RUnlock()
	return t.m.groupNumbers.UnnestedOf(g.Number)
}

func (t transitiveStore) GroupsOfUsers(n int, uidOf func(i int) membership.UID, fn func(i int, groupID string)) membership.Revision {
	m := t.m
	var buf [4]uint64
	locked := m.reverse.RLockAll(n, uidOf, buf[:])
	defer m.reverse.RUnlockAll(locked)
	m.groupNumbers.RLock()
	defer m.groupNumbers.RUnlock()
	for i := range n {
		m.reverse.GroupsOf(uidOf(i), func(number uint32) { fn(i, m.groups.At(number).ID) })
	}
	return m.LatestRevision()
}

func (t transitiveStore) UserGroups(uid membership.UID, fn func(groupID string, unnested membership.Revision)) membership.Revision {
	m := t.m
	m.reverse.RLock(uid)
	defer m.reverse.RUnlock(uid)
	m.groupNumbers.RLock()
	defer m.groupNumbers.RUnlock()
	m.reverse.GroupsOf(uid, func(n uint32) { fn(m.groups.At(n).ID, m.groupNumbers.UnnestedOf(n)) })
	return m.reverse.GroupsRevision(uid)
}

func (t transitiveStore) HoldUser(uid membership.UID) ([]string, membership.Revision) {
	m := t.m
	m.reverse.RLock(uid)
	m.groupNumbers.RLock()
	defer m.groupNumbers.RUnlock()
	var ids []string
	m.reverse.GroupsOf(uid, func(n uint32) { ids = append(ids, m.groups.At(n).ID) })
	return ids, m.reverse.UserRevision(uid)
}

func (t transitiveStore) ReleaseUser(uid membership.UID) { t.m.reverse.RUnlock(uid) }

func (t transitiveStore) Nicknames() *nicknames.Directory { return &t.m.nicknames }
