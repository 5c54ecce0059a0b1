package memory

import (
	"context"

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
	held := m.lockShards(len(checks), func(i int) string { return checks[i].GroupID }, true, buf[:])
	defer m.unlockShards(held)
	rev := m.LatestRevision()
	for i, c := range checks {
		g := m.shards[m.shardIndex(c.GroupID)].groups.Get(c.GroupID)
		found[i] = g != nil && g.Members.Contains(c.UID)
	}
	return found, rev, nil
}
