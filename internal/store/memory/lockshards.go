package memory

import (
	"example.com/groupmembership/internal/store/memory/shards"
)

// heldShards are the shards of the groups a call reads or changes, each
// locked once, in ascending index order (doc.go): for reading when read.
type heldShards struct {
	set  shards.Set
	read bool
}

// lockShards locks the shards of the groups n calls name (idOf(0) to
// idOf(n-1)), each once, in ascending index order, for reading when read,
// and returns them for unlockShards; buf is room for the set.
func (m *Store) lockShards(n int, idOf func(i int) string, read bool, buf []uint64) heldShards {
	set := shards.NewSet(len(m.shards), buf)
	for i := range n {
		set.Add(m.shardIndex(idOf(i)))
	}
	for i := range set.All {
		if read {
			m.shards[i].mu.RLock()
		} else {
			m.shards[i].mu.Lock()
		}
	}
	return heldShards{set: set, read: read}
}

// unlockShards unlocks the shards lockShards locked.
func (m *Store) unlockShards(held heldShards) {
	for i := range held.set.All {
		if held.read {
			m.shards[i].mu.RUnlock()
		} else {
			m.shards[i].mu.Unlock()
		}
	}
}

// lockAll locks every shard, in index order, for reading when read, and
// returns the func that unlocks them.
func (m *Store) lockAll(read bool) func() {
	held := heldShards{set: shards.NewSet(len(m.shards), nil), read: read}
	for i := range m.shards {
		held.set.Add(i)
		if read {
			m.shards[i].mu.RLock()
		} else {
			m.shards[i].mu.Lock()
		}
	}
	return func() { m.unlockShards(held) }
}
