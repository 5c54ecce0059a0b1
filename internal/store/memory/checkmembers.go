package memory

import (
	"context"
	"math/bits"

	"example.com/groupmembership/membership"
)

// CheckMembers implements membership.Store. It holds the shards of the
// groups checked, each once, for reading, taken in ascending index order
// as doc.go's lock order says, reads every answer, and takes the latest
// revision while it holds them.
//
// That is a state at one revision, R: every change holds its group's shard
// (OpRemoveUser every shard) from before it alters the group until after
// the feed has recorded its revision. So while the shards are held, every
// change to these groups recorded at or before R has let go of its shard,
// and is all there; none after R can have begun, and those to come take
// revisions after R, which was given out already. What the checks read of
// these groups is what they were at R, whatever other groups do meanwhile.
func (m *Store) CheckMembers(_ context.Context, checks []membership.Check) ([]bool, membership.Revision, error) {
	found := make([]bool, len(checks))
	var buf [4]uint64
	held := m.rlockShardsOf(checks, buf[:])
	defer m.runlockShards(held)
	rev := m.LatestRevision()
	for i, c := range checks {
		g := m.shards[m.shardIndex(c.GroupID)].groups[c.GroupID]
		found[i] = g != nil && g.members.Contains(c.UID)
	}
	return found, rev, nil
}

// rlockShardsOf locks for reading the shards of the groups checks name,
// each once, in ascending index order, and returns the set it locked, for
// runlockShards; buf is room for the set.
func (m *Store) rlockShardsOf(checks []membership.Check, buf []uint64) []uint64 {
	set := m.shardSet(buf)
	for _, c := range checks {
		k := m.shardIndex(c.GroupID)
		set[k/64] |= 1 << (k % 64)
	}
	for w, word := range set {
		for ; word != 0; word &= word - 1 {
			m.shards[w*64+bits.TrailingZeros64(word)].mu.RLock()
		}
	}
	return set
}

// runlockShards unlocks the shards rlockShardsOf locked.
func (m *Store) runlockShards(set []uint64) {
	for w, word := range set {
		for ; word != 0; word &= word - 1 {
			m.shards[w*64+bits.TrailingZeros64(word)].mu.RUnlock()
		}
	}
}

// CheckMembers implements membership.Store.
func (r ReadOnly) CheckMembers(ctx context.Context, checks []membership.Check) ([]bool, membership.Revision, error) {
	return r.mem.CheckMembers(ctx, checks)
}
