package directory

import (
	"fmt"
	"slices"
	"time"

	"example.com/groupmembership/internal/store/memory/accounts"
	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/nicknames"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
)

// Write applies w, a write of a directory op (OpSetUser, OpDeleteUser,
// OpSetGroup), stamped st, as the store's Write does.
func (d *Directory) Write(w membership.Write, st feed.Stamp) (membership.Result, error) {
	switch {
	case w.Op == membership.OpSetGroup && w.Group != nil:
		return d.setGroup(w, st)
	case len(w.UIDs) != 1 || (w.Op == membership.OpSetUser) != (w.Account != nil):
	case w.Op == membership.OpSetUser:
		return d.setUser(w.UIDs[0], *w.Account, w.If, st)
	case w.Op == membership.OpDeleteUser:
		return d.deleteUser(w.UIDs[0], w.If, st)
	}
	return membership.Result{}, fmt.Errorf("a %s write of %d uids, account %v, attributes %v", w.Op, len(w.UIDs), w.Account != nil, w.Group != nil)
}

// setUser applies an OpSetUser of uid's account a. Setting an account
// inactive removes the user from every group, and so holds every shard, as
// RemoveUser does; any other holds the user's reverse shard, so that no
// add of the user comes between its check of the uid (free, for
// Precondition.Empty) and its change.
func (d *Directory) setUser(uid membership.UID, a account.Account, cond membership.Precondition, st feed.Stamp) (membership.Result, error) {
	if !a.Active {
		defer d.s.LockAll()()
	}
	var buf [1]uint64
	locked := d.reverse.Lock(one(uid), buf[:])
	var groups []*group.Group
	if !a.Active {
		groups = d.s.GroupsOf(uid) // before the nicknames, in lock order
	}
	nicks := d.nicknames.Write()
	defer nicks.Release()
	table := nicks.Accounts()
	e := table.Get(uid)
	inGroup := d.reverse.HasUser(uid)
	err := checkUser(cond, e != nil, inGroup, revisionOfEntry(e))
	if owner, ok := table.OwnerOf(a.UserName); err == nil && ok && owner != uid {
		err = userNameTaken(a.UserName)
	}
	if err != nil {
		d.reverse.Unlock(locked)
		return membership.Result{}, err
	}
	leaving := !a.Active && inGroup
	if e != nil && !leaving && sameAccount(e.Account, a) && d.nicknames.Of(uid) == a.DisplayName {
		d.reverse.Unlock(locked)
		return membership.Result{Revision: e.Revision}, nil
	}
	var left []*group.Group
	if leaving {
		left = d.leave(uid, groups)
	}
	nicks.SetAccount(uid, a)
	rev := nicks.Record(d.feed, membership.Change{Op: membership.OpSetUser, UIDs: []membership.UID{uid}, Account: &a}, st)
	d.reverse.Unlock(locked)
	d.afterLeaving(left, rev)
	return membership.Result{Count: len(left), Revision: rev}, nil
}

// deleteUser applies an OpDeleteUser: the user leaves every group, as
// with RemoveUser, and its account and nickname are forgotten.
func (d *Directory) deleteUser(uid membership.UID, cond membership.Precondition, st feed.Stamp) (membership.Result, error) {
	defer d.s.LockAll()()
	var buf [1]uint64
	locked := d.reverse.Lock(one(uid), buf[:])
	groups := d.s.GroupsOf(uid)
	nicks := d.nicknames.Write()
	defer nicks.Release()
	e := nicks.Accounts().Get(uid)
	if err := checkUser(cond, e != nil, len(groups) > 0, revisionOfEntry(e)); err != nil {
		d.reverse.Unlock(locked)
		return membership.Result{}, err
	}
	if e == nil && len(groups) == 0 {
		d.reverse.Unlock(locked)
		return membership.Result{Revision: d.s.Latest()}, nil
	}
	left := d.leave(uid, groups)
	nicks.DeleteAccount(uid, true)
	rev := nicks.Record(d.feed, membership.Change{Op: membership.OpDeleteUser, UIDs: []membership.UID{uid}}, st)
	d.reverse.Unlock(locked)
	d.afterLeaving(left, rev)
	return membership.Result{Count: len(left), Revision: rev}, nil
}

// RemoveUser applies an OpRemoveUser: uid leaves every group it is in,
// and is forgotten (but its account, if it has one). It holds every shard
// while it does: the user's groups are found in the reverse index, which
// is locked after the shards.
func (d *Directory) RemoveUser(uid membership.UID, st feed.Stamp) membership.Result {
	defer d.s.LockAll()()
	var buf [1]uint64
	locked := d.reverse.Lock(one(uid), buf[:])
	groups := d.leave(uid, d.s.GroupsOf(uid))
	if len(groups) == 0 {
		d.reverse.Unlock(locked)
		return membership.Result{Revision: d.s.Latest()}
	}
	d.nicknames.Forget(uid)
	rev := d.feed.Record(membership.Change{Op: membership.OpRemoveUser, UIDs: []membership.UID{uid}}, st, nil)
	d.reverse.Unlock(locked)
	d.afterLeaving(groups, rev)
	return membership.Result{Count: len(groups), Revision: rev}
}

// leave removes uid from groups, every group it is in (Store.GroupsOf),
// and returns them. The caller holds every shard and uid's reverse shard,
// and records the change, then calls afterLeaving.
func (d *Directory) leave(uid membership.UID, groups []*group.Group) []*group.Group {
	for _, g := range groups {
		g.Members.Remove(uid)
		d.due.End(&g.Expiries, g.Number, uid)
		d.reverse.Remove(uid, g.Number)
	}
	d.members.Add(-int64(len(groups)))
	return groups
}

// afterLeaving gives the groups a user left the revision rev of the
// change, or drops them when they are vacant. The caller holds every
// shard, and no later lock.
func (d *Directory) afterLeaving(groups []*group.Group, rev membership.Revision) {
	for _, g := range groups {
		if g.Vacant() {
			d.s.Drop(g, rev)
		} else {
			g.Revision = rev
		}
	}
}

// setGroup applies an OpSetGroup.
func (d *Directory) setGroup(w membership.Write, st feed.Stamp) (membership.Result, error) {
	g, create, unlock := d.s.LockGroup(w.GroupID)
	defer unlock()
	if err := d.s.Check(g, w.If); err != nil {
		return membership.Result{}, err
	}
	if a := d.attrs(g); a != nil && a.GroupAttributes == *w.Group {
		return membership.Result{Revision: d.s.RevisionOf(g)}, nil
	}
	if g == nil {
		g = create()
	}
	nicks := d.nicknames.Write()
	defer nicks.Release()
	rev := nicks.Record(d.feed, SetAttributes(*d.tables, g, *w.Group, &nicks), st)
	g.Revision = rev
	return membership.Result{Revision: rev}, nil
}

// SetAttributes gives g, a group of tables, the attributes a, indexed in
// nicks, with the times of the change nicks records, and returns the
// change, whose Op is "" when g had them already. The caller holds g's
// shard: a batch's OpSetGroup is applied so.
func SetAttributes(tables group.Tables, g *group.Group, a account.GroupAttributes, nicks *nicknames.Write) membership.Change {
	old := tables.Attrs(g)
	if old != nil && old.GroupAttributes == a {
		return membership.Change{}
	}
	attrs := &group.Attrs{GroupAttributes: a}
	if old != nil {
		nicks.IndexGroup(g.ID, &old.GroupAttributes, &a)
		attrs.Created, attrs.Modified = old.Created, old.Modified
	} else {
		nicks.IndexGroup(g.ID, nil, &a)
	}
	tables.SetAttrs(g, attrs)
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

// DropAttributes takes the attributes of g, a group of tables, away, and
// out of the index in nicks, and reports whether it had some: a group
// deleted loses them, after its members, whose nicknames the deletion
// forgot under the lock nicks takes.
func DropAttributes(tables group.Tables, g *group.Group, nicks *nicknames.Write) bool {
	old := tables.Attrs(g)
	if old == nil {
		return false
	}
	nicks.IndexGroup(g.ID, &old.GroupAttributes, nil)
	tables.SetAttrs(g, nil)
	return true
}

// attrs returns the attributes of g, nil for none (g nil: a group that
// does not exist). The caller holds g's shard.
func (d *Directory) attrs(g *group.Group) *group.Attrs {
	if g == nil {
		return nil
	}
	return d.tables.Attrs(g)
}

// Check is the store's Check of a directory write: what Write would do
// with w now, reading only.
func (d *Directory) Check(w membership.Write) (membership.Revision, bool, error) {
	if w.Op == membership.OpSetGroup && w.Group != nil {
		g, unlock := d.s.RGroup(w.GroupID)
		defer unlock()
		if err := d.s.Check(g, w.If); err != nil {
			return 0, false, err
		}
		a := d.attrs(g)
		return d.s.RevisionOf(g), a == nil || a.GroupAttributes != *w.Group, nil
	}
	if len(w.UIDs) != 1 || w.Op == membership.OpSetGroup || (w.Op == membership.OpSetUser) != (w.Account != nil) {
		return 0, false, fmt.Errorf("a %s write of %d uids, account %v", w.Op, len(w.UIDs), w.Account != nil)
	}
	return d.checkAccount(w)
}

// checkAccount is Check of OpSetUser and OpDeleteUser. It holds the user's
// reverse shard and the nicknames for reading, so that the precondition
// and the answer are of one state.
func (d *Directory) checkAccount(w membership.Write) (membership.Revision, bool, error) {
	uid := w.UIDs[0]
	d.reverse.RLock(uid)
	defer d.reverse.RUnlock(uid)
	d.nicknames.RLock()
	defer d.nicknames.RUnlock()
	table := d.nicknames.Accounts()
	e := table.Get(uid)
	inGroup := d.reverse.HasUser(uid)
	if err := checkUser(w.If, e != nil, inGroup, revisionOfEntry(e)); err != nil {
		return 0, false, err
	}
	if w.Op == membership.OpDeleteUser {
		if e == nil && !inGroup {
			return d.s.Latest(), false, nil // as Write answers
		}
		return revisionOfEntry(e), true, nil // the user's: a precondition keeps the revisions from it on
	}
	a := *w.Account
	if owner, ok := table.OwnerOf(a.UserName); ok && owner != uid {
		return 0, false, userNameTaken(a.UserName)
	}
	same := e != nil && sameAccount(e.Account, a) && d.nicknames.Of(uid) == a.DisplayName && (a.Active || !inGroup)
	return revisionOfEntry(e), !same, nil
}

// userNameTaken returns the CodeUserNameTaken error of name.
func userNameTaken(name string) *membership.Error {
	return membership.Errorf(membership.CodeUserNameTaken, "another user has the userName %q (compared case-insensitively): nothing was changed", name)
}

// sameAccount reports whether a and b are the same account but for the
// display name, which the nickname holds.
func sameAccount(a, b account.Account) bool {
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
func revisionOfEntry(e *accounts.Entry) membership.Revision {
	if e == nil {
		return 0
	}
	return e.Revision
}
