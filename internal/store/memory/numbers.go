package memory

import (
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/membership"
)

// groupNumbers are the store's group.Numbers: the lock of the ids of the
// groups' slots, and the groups' unnested revisions.
type groupNumbers struct{ group.Numbers }

// setUnnested notes that the change rev left the group numbered n in no
// nesting (group.Numbers.SetUnnested). The caller holds the group's shard.
func (g *groupNumbers) setUnnested(n uint32, rev membership.Revision) { g.SetUnnested(n, rev) }
