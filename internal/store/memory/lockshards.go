package memory

import (
	"iter"

	"example.com/groupmembership/internal/store/memory/shards"
	"example.com/groupmembership/membership"
)

// heldShards are the shards of the groups a call reads or changes, each
// locked once, in ascending index order (doc.go): for reading when read.
type heldShards struct {
	set  shards.Set
	read bool
}

// lockShards locks the shards of the groups ids names, each once, in
// ascending index order, for reading when read, and returns them for
// unlockShards; buf is room for the set.
func (m *Store) lockShards(ids iter.Seq[string], read bool, buf []uint64) heldShards {
	set := shards.NewSet(len(m.shards), buf)
	for id := range ids {
		set.Add(m.shardIndex(id))
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

// groupsOf yields the group of each of ws.
func groupsOf(ws []membership.Write) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, w := range ws {
			if !yield(w.GroupID) {
				return
			}
		}
	}
}
