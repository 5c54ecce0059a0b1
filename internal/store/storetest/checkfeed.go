package storetest

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// Replayed is the memberships a feed makes, change after change: for each
// group, its members. Apply changes to it in revision order.
type Replayed map[string]map[membership.UID]bool

// Apply applies c, as a follower of the feed does.
func (st Replayed) Apply(c membership.Change) {
	group := func(id string) map[membership.UID]bool {
		if st[id] == nil {
			st[id] = map[membership.UID]bool{}
		}
		return st[id]
	}
	switch c.Op {
	case membership.OpAdd:
		for _, uid := range c.UIDs {
			group(c.GroupID)[uid] = true
		}
	case membership.OpRemove:
		for _, uid := range c.UIDs {
			delete(group(c.GroupID), uid)
		}
	case membership.OpReplace:
		st[c.GroupID] = map[membership.UID]bool{}
		for _, uid := range c.UIDs {
			group(c.GroupID)[uid] = true
		}
	case membership.OpDeleteGroup:
		delete(st, c.GroupID)
	case membership.OpRemoveUser:
		for _, members := range st {
			delete(members, c.UIDs[0])
		}
	}
}

// CheckObservation is what one CheckMembers answered: the checks asked,
// the answers and their revision.
type CheckObservation struct {
	Checks   []membership.Check
	Found    []bool
	Revision membership.Revision
}

// CheckAgainstFeed checks that each observation answered what the feed,
// replayed up to its revision, says: that its answers are all of that one
// revision. The changes must start at revision 1 and include every
// observation's revision.
func CheckAgainstFeed(t *testing.T, changes []membership.Change, observations []CheckObservation) {
	t.Helper()
	obs := slices.Clone(observations)
	slices.SortStableFunc(obs, func(a, b CheckObservation) int { return int(a.Revision) - int(b.Revision) })
	st := Replayed{}
	next := 0 // the next change to apply
	for _, o := range obs {
		for next < len(changes) && changes[next].Revision <= o.Revision {
			st.Apply(changes[next])
			next++
		}
		require.Len(t, o.Found, len(o.Checks))
		for i, c := range o.Checks {
			if !assert.Equal(t, st[c.GroupID][c.UID], o.Found[i], "check %d, user %d in %q, at revision %d", i, c.UID, c.GroupID, o.Revision) {
				return // one is enough to tell
			}
		}
	}
}
