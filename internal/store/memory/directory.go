package memory

import (
	"fmt"
	"slices"
	"time"

	"example.com/groupmembership/internal/store/memory/directory"
	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/membership"
)

// The directory's writes (membership.Directory). Accounts live in the
// nickname directory, under its lock; a group's attributes in the group,
// under its shard's, and their index in the nickname directory.

// setUser applies an OpSetUser. Setting an account inactive removes the
// user from every group, and so holds every shard, as removeUser does; any
// other holds the user's reverse shard, so that no add of the user comes
// between its check of the uid (free, for Precondition.Empty) and its
// change.
func (m *Store) setUser(w membership.Write, st feed.Stamp) (membership.Result, error) {
	if len(w.UIDs) != 1 || w.Account == nil {
		return membership.Result{}, fmt.Errorf("set_user names %d uids, account %v", len(w.UIDs), w.Account != nil)
	}
	uid, a := w.UIDs[0], *w.Account
	if !a.Active {
		m.lockAllShards()
		defer m.unlockAllShards()
	}
	var buf [1]uint64
	locked := m.reverse.Lock(one(uid), buf[:])
	var groups []*group.Group
	if !a.Active {
		groups = m.groupsOf(uid) // before the nicknames, in lock order
	}
	nicks := m.nicknames.Write()
	defer nicks.Release()
	accounts := nicks.Accounts()
	e := accounts.Get(uid)
	inGroup := m.reverse.HasUser(uid)
	if err := checkUser(w.If, e != nil, inGroup, revisionOfEntry(e)); err != nil {
		m.reverse.Unlock(locked)
		return membership.Result{}, err
	}
	if owner, ok := accounts.OwnerOf(a.UserName); ok && owner != uid {
		m.reverse.Unlock(locked)
		return membership.Result{}, userNameTaken(a.UserName)
	}
	leaving := !a.Active && inGroup
	if e != nil && !leaving && sameAccount(e.Account, a) && m.nicknames.Of(uid) == a.DisplayName {
		m.reverse.Unlock(locked)
		return membership.Result{Revision: e.Revision}, nil
	}
	var left []*group.Group
	if leaving {
		left = m.leave(uid, groups)
	}
	nicks.SetAccount(uid, a)
	rev := nicks.Record(&m.feed, membership.Change{Op: membership.OpSetUser, UIDs: []membership.UID{uid}, Account: &a}, st)
	m.reverse.Unlock(locked)
	m.afterLeaving(left, rev)
	return membership.Result{Count: len(left), Revision: rev}, nil
}

// deleteUser applies an OpDeleteUser: the user leaves every group, as
// with removeUser, and its account and nickname are forgotten.
func (m *Store) deleteUser(w membership.Write, st feed.Stamp) (membership.Result, error) {
	if len(w.UIDs) != 1 {
		return membership.Result{}, fmt.Errorf("delete_user names %d uids, not one", len(w.UIDs))
	}
	uid := w.UIDs[0]
	m.lockAllShards()
	defer m.unlockAllShards()
	var buf [1]uint64
	locked := m.reverse.Lock(one(uid), buf[:])
	groups := m.groupsOf(uid)
	nicks := m.nicknames.Write()
	defer nicks.Release()
	e := nicks.Accounts().Get(uid)
	if err := checkUser(w.If, e != nil, len(groups) > 0, revisionOfEntry(e)); err != nil {
		m.reverse.Unlock(locked)
		return membership.Result{}, err
	}
	if e == nil && len(groups) == 0 {
		m.reverse.Unlock(locked)
		return membership.Result{Revision: m.LatestRevision()}, nil
	}
	left := m.leave(uid, groups)
	nicks.DeleteAccount(uid, true)
	rev := nicks.Record(&m.feed, membership.Change{Op: membership.OpDeleteUser, UIDs: []membership.UID{uid}}, st)
	m.reverse.Unlock(locked)
	m.afterLeaving(left, rev)
	return membership.Result{Count: len(left), Revision: rev}, nil
}

// setGroup applies an OpSetGroup.
func (m *Store) setGroup(w membership.Write, st feed.Stamp) (membership.Result, error) {
	if w.Group == nil {
		return membership.Result{}, fmt.Errorf("set_group without attributes")
	}
	s := m.shardOf(w.GroupID)
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[w.GroupID]
	if err := m.check(g, w.If); err != nil {
		return membership.Result{}, err
	}
	if g != nil && g.Attrs != nil && g.Attrs.GroupAttributes == *w.Group {
		return membership.Result{Revision: m.revisionOf(g)}, nil
	}
	if g == nil {
		g = m.newGroup(s, w.GroupID)
	}
	nicks := m.nicknames.Write()
	defer nicks.Release()
	c := setAttrs(g, *w.Group, &nicks)
	rev := nicks.Record(&m.feed, c, st)
	g.Revision = rev
	return membership.Result{Revision: rev}, nil
}

// setAttrs gives g the attributes a, indexed in nicks, with the times of
// the change nicks records, and returns the change.
func setAttrs(g *group.Group, a membership.GroupAttributes, nicks interface {
	IndexGroup(id string, old, new *membership.GroupAttributes)
	Also(fn func(membership.Revision, time.Time))
},
) membership.Change {
	old := g.Attrs
	attrs := &group.Attrs{GroupAttributes: a}
	if old != nil {
		nicks.IndexGroup(g.ID, &old.GroupAttributes, &a)
		attrs.Created, attrs.Modified = old.Created, old.Modified
	} else {
		nicks.IndexGroup(g.ID, nil, &a)
	}
	g.Attrs = attrs
	// The attributes take the change's time as it is recorded: g's shard
	// is held until then, so no reader sees them before.
	nicks.Also(func(_ membership.Revision, at time.Time) {
		if at.IsZero() {
			return
		}
		attrs.Modified = at.UnixMilli()
		if attrs.Created == 0 {
			attrs.Created = attrs.Modified
		}
	})
	return membership.Change{Op: membership.OpSetGroup, GroupID: g.ID, GroupAttributes: &a}
}

// applySetGroup applies w, a set_group of a batch, to g, which the batch
// made when it had no attributes, and returns its change, whose Op is ""
// when it changed nothing.
func applySetGroup(g *group.Group, w membership.Write, nicks interface {
	IndexGroup(id string, old, new *membership.GroupAttributes)
	Also(fn func(membership.Revision, time.Time))
},
) membership.Change {
	if g.Attrs != nil && g.Attrs.GroupAttributes == *w.Group {
		return membership.Change{}
	}
	return setAttrs(g, *w.Group, nicks)
}

// dropAttrs takes g's attributes away, and out of the index in nicks.
func dropAttrs(g *group.Group, nicks interface {
	IndexGroup(id string, old, new *membership.GroupAttributes)
},
) {
	if g.Attrs != nil {
		nicks.IndexGroup(g.ID, &g.Attrs.GroupAttributes, nil)
		g.Attrs = nil
	}
}

// userNameTaken returns the CodeUserNameTaken error of name.
func userNameTaken(name string) *membership.Error {
	return membership.Errorf(membership.CodeUserNameTaken, "another user has the userName %q (compared case-insensitively): nothing was changed", name)
}

// sameAccount reports whether a and b are the same account but for the
// display name, which the nickname holds.
func sameAccount(a, b membership.Account) bool {
	a.DisplayName, b.DisplayName = "", ""
	return a == b
}

// checkUser returns the error of a write to a user's account whose
// precondition does not hold: the user has an account (has), is in a
// group (inGroup), at revision rev (0 without an account).
func checkUser(p membership.Precondition, has, inGroup bool, rev membership.Revision) error {
	switch {
	case p.Exists && !has, p.Empty && (has || inGroup):
	case len(p.Revisions) > 0 && !slices.Contains(p.Revisions, rev):
	default:
		return nil
	}
	return membership.PreconditionFailed(rev)
}

// revisionOfEntry returns the revision of an account, 0 for none.
func revisionOfEntry(e *directory.Entry) membership.Revision {
	if e == nil {
		return 0
	}
	return e.Revision
}

// refuseInactive returns the CodeInactiveUser error of the first of users
// whose account is inactive. The caller holds the shard of the group they
// are added to: an account is set inactive holding every shard.
func (m *Store) refuseInactive(users []membership.User) error {
	if m.nicknames.InactiveAccounts() == 0 || len(users) == 0 {
		return nil
	}
	m.nicknames.RLock()
	defer m.nicknames.RUnlock()
	accounts := m.nicknames.Accounts()
	for _, u := range users {
		if accounts.IsInactive(u.UID) {
			return inactiveUser(u.UID)
		}
	}
	return nil
}

// inactiveUser returns the CodeInactiveUser error of uid.
func inactiveUser(uid membership.UID) *membership.Error {
	return membership.Errorf(membership.CodeInactiveUser,
		"user %d's account is inactive (active false), and an inactive user is in no group: nothing was changed; activate it first", uid)
}

// lockAllShards locks every shard, in index order.
func (m *Store) lockAllShards() {
	for i := range m.shards {
		m.shards[i].mu.Lock()
	}
}

// unlockAllShards unlocks what lockAllShards locked.
func (m *Store) unlockAllShards() {
	for i := range m.shards {
		m.shards[i].mu.Unlock()
	}
}

// groupsOf returns the groups uid is in. The caller holds every shard
// and uid's reverse shard, and no later lock.
func (m *Store) groupsOf(uid membership.UID) []*group.Group {
	var groups []*group.Group
	m.groupNumbers.mu.RLock() // no writer can take it: every shard is held
	m.reverse.GroupsOf(uid, func(n uint32) {
		id := m.groupNumbers.names[n]
		groups = append(groups, m.shardOf(id).groups[id])
	})
	m.groupNumbers.mu.RUnlock()
	return groups
}

// leave removes uid from groups, every group it is in (groupsOf), and
// returns them. The caller holds every shard and uid's reverse shard, and
// records the change, then calls afterLeaving.
func (m *Store) leave(uid membership.UID, groups []*group.Group) []*group.Group {
	for _, g := range groups {
		g.Members.Remove(uid)
		m.due.End(&g.Expiries, g.Number, uid)
		m.reverse.Remove(uid, g.Number)
	}
	m.counts.members.Add(-int64(len(groups)))
	return groups
}

// afterLeaving gives the groups a user left the revision rev of the
// change, or drops them when they are vacant. The caller holds every
// shard, and no later lock.
func (m *Store) afterLeaving(groups []*group.Group, rev membership.Revision) {
	for _, g := range groups {
		if g.Vacant() {
			m.dropGroup(m.shardOf(g.ID), g, rev)
		} else {
			g.Revision = rev
		}
	}
}

// one yields uid.
func one(uid membership.UID) func(yield func(membership.UID) bool) {
	return func(yield func(membership.UID) bool) { yield(uid) }
}
