package memory

import (
	"fmt"
	"slices"

	"example.com/groupmembership/internal/store/memory/expiry"
	"example.com/groupmembership/membership"
)

// Check tells, reading only, what Write would do with w now: the error it
// would return (PreconditionFailed when w's precondition does not hold, or
// w itself is not one Write takes), or whether it would change anything,
// with the revision it reports when it changes nothing. The durable store
// asks before it logs a write, so that one that would change nothing, or
// fail, costs no record and no fsync. Write may still decide otherwise, if
// another change comes between.
func (m *Store) Check(w membership.Write) (rev membership.Revision, changes bool, err error) {
	switch w.Op {
	case membership.OpAdd, membership.OpRemove, membership.OpReplace, membership.OpDeleteGroup, membership.OpExpire:
		return m.checkGroup(w)
	case membership.OpRemoveUser:
		if len(w.UIDs) != 1 {
			return 0, false, fmt.Errorf("remove_user names %d uids, not one", len(w.UIDs))
		}
		return m.checkUser(w.UIDs[0])
	case membership.OpAddGroups, membership.OpRemoveGroups, membership.OpReplaceGroups, membership.OpExpireGroups:
		return m.checkNesting(w)
	case membership.OpSetUser, membership.OpDeleteUser, membership.OpSetGroup:
		return m.Directory.Check(w)
	}
	return 0, false, fmt.Errorf("unknown op %q", w.Op)
}

// checkGroup is Check of a write to one group. It holds the group's shard
// for reading, so that the precondition and the answer are of one state.
func (m *Store) checkGroup(w membership.Write) (membership.Revision, bool, error) {
	nested := false
	if w.Op == membership.OpDeleteGroup {
		m.nestMu.RLock()
		defer m.nestMu.RUnlock()
		nested = m.nest.Node(w.GroupID) != nil
	}
	s := m.shardOf(w.GroupID)
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.groups.Get(w.GroupID)
	if err := m.check(g, w.If); err != nil {
		return 0, false, err
	}
	if w.Op == membership.OpAdd || w.Op == membership.OpReplace {
		if err := m.Directory.RefuseInactive(w.Users); err != nil {
			return 0, false, err
		}
	}
	rev := m.revisionOf(g)
	switch w.Op {
	case membership.OpAdd:
		return rev, len(w.Users) > 0 && !g.HoldsAll(w.Users, &m.nicknames), nil
	case membership.OpExpire:
		return rev, g != nil && slices.ContainsFunc(w.UIDs, func(uid membership.UID) bool {
			at := g.Expiries.Of(uid)
			return at != 0 && at <= expiry.Millis(w.AsOf)
		}), nil
	case membership.OpRemove:
		return rev, g != nil && slices.ContainsFunc(w.UIDs, g.Members.Contains), nil
	case membership.OpReplace:
		return rev, !g.IsExactly(w.Users, &m.nicknames), nil
	}
	return rev, g != nil || nested, nil // OpDeleteGroup
}

// checkNesting is Check of a nesting write: it applies the write to the
// nesting and undoes it, holding the nesting exclusively, so that a cycle
// or a chain too deep is found as Write would find it.
func (m *Store) checkNesting(w membership.Write) (membership.Revision, bool, error) {
	m.nestMu.Lock()
	defer m.nestMu.Unlock()
	s := m.shardOf(w.GroupID)
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.groups.Get(w.GroupID)
	if err := m.check(g, w.If); err != nil {
		return 0, false, err
	}
	m.nest.Begin()
	_, c, err := m.nest.Apply(w, w.MaxDepth, w.MaxAncestors, nowOr(w.Time))
	m.nest.Rollback()
	m.nestNext.Store(m.nest.Next())
	if err != nil {
		return 0, false, err
	}
	return m.revisionOf(g), c.Op != "", nil
}

// checkUser is Check of OpRemoveUser: it changes something when uid is in a
// group, and reports the latest revision when it does not, as Write does.
func (m *Store) checkUser(uid membership.UID) (membership.Revision, bool, error) {
	m.reverse.RLock(uid)
	defer m.reverse.RUnlock(uid)
	return m.LatestRevision(), m.reverse.HasUser(uid), nil
}
