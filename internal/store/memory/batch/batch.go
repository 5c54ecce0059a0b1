// Package batch checks the writes of a batch (membership.Batch) against
// their groups (Check: the ops a batch takes, each precondition, inactive
// users, the members it may remove) and applies its membership writes to
// their groups, one after another, with every lock they need held: what
// each changes in a group, the reverse index, the due set and the
// nicknames. The store holds the locks, applies the batch's nesting, and
// records the batch's change.
package batch

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"example.com/groupmembership/internal/store/memory/directory"
	"example.com/groupmembership/internal/store/memory/expiry"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/nicknames"
	"example.com/groupmembership/internal/store/memory/packed"
	"example.com/groupmembership/internal/store/memory/reverse"
	"example.com/groupmembership/membership"
)

// Applier applies the writes of a batch to their groups, one after
// another, with every lock they need held: the groups' shards, the reverse
// shards of every user the batch can touch (Users), and the nicknames.
type Applier struct {
	tables  group.Tables // the store's, which keep the groups' attributes
	reverse *reverse.Index
	due     *expiry.Due
	members *atomic.Int64
	// named are the uids the batch's adds and replaces name: a user one of
	// its writes leaves in no group may be in one again by the batch's end,
	// so it is forgotten only then (deferred), if it is still in none.
	named    map[membership.UID]bool
	deferred []membership.UID
	// nicknames holds the nicknames from the batch's first nickname set
	// until its change is recorded.
	nicknames nicknames.Write
	// commit is the batch's time, from which its TTLs count.
	commit time.Time
}

// NewApplier returns the Applier of the writes ws, committed at commit,
// to the store whose tables of groups, reverse index, due set and count of
// memberships (members) these are, with the nicknames held for writing.
func NewApplier(ws []membership.Write, commit time.Time, tables group.Tables, reverse *reverse.Index, due *expiry.Due, members *atomic.Int64, nicknames nicknames.Write) *Applier {
	return &Applier{tables: tables, reverse: reverse, due: due, members: members, named: namedUIDs(ws), commit: commit, nicknames: nicknames}
}

// Nicknames returns the nicknames held for writing.
func (a *Applier) Nicknames() *nicknames.Write { return &a.nicknames }

// leftInNoGroup forgets uid, which a write left in no group, now or, when
// a write of the batch names it, at the end.
func (a *Applier) leftInNoGroup(uid membership.UID) {
	if a.named[uid] {
		a.deferred = append(a.deferred, uid)
		return
	}
	a.nicknames.Forget(uid)
}

// ForgetDeferred forgets the users left in no group whose forgetting waited
// for the end of the batch, and are still in no group.
func (a *Applier) ForgetDeferred() {
	for _, uid := range a.deferred {
		if !a.reverse.HasUser(uid) {
			a.nicknames.Forget(uid)
		}
	}
}

// Apply applies w, a membership write or an OpSetGroup, to g (nil: a
// group with no members, which only a remove or a deletion can meet; a
// deletion takes the group's attributes too), and returns its result and
// its change, whose Op is "" when it changed nothing.
func (a *Applier) Apply(g *group.Group, w membership.Write) (membership.Result, membership.Change) {
	if g == nil {
		return membership.Result{}, membership.Change{}
	}
	switch w.Op {
	case membership.OpAdd:
		added := g.Insert(a.reverse, w.Users)
		expiries := a.due.SetAll(&g.Expiries, g.Number, w.Users, a.commit, g.Members.Contains)
		changed, reported := a.nicknames.Set(w.Users, added)
		a.reverse.TouchChanged(changed, expiries)
		a.members.Add(int64(len(added)))
		if len(added) == 0 && len(changed) == 0 && len(expiries) == 0 {
			return membership.Result{}, membership.Change{}
		}
		var uids []membership.UID
		if len(added) > 0 {
			uids = group.Tight(added)
		}
		return membership.Result{Count: len(added)}, membership.Change{Op: membership.OpAdd, GroupID: g.ID, UIDs: uids, Nicknames: reported, Expiries: expiries}
	case membership.OpRemove:
		var removed []membership.UID
		for _, uid := range w.UIDs {
			if g.Members.Remove(uid) {
				a.due.End(&g.Expiries, g.Number, uid)
				if a.reverse.Remove(uid, g.Number) {
					a.leftInNoGroup(uid)
				}
				removed = append(removed, uid)
			}
		}
		a.members.Add(-int64(len(removed)))
		if len(removed) == 0 {
			return membership.Result{}, membership.Change{}
		}
		slices.Sort(removed)
		return membership.Result{Count: len(removed)}, membership.Change{Op: membership.OpRemove, GroupID: g.ID, UIDs: removed}
	case membership.OpReplace:
		uids := group.SortedUIDs(w.Users)
		added, removed := packed.Diff(&g.Members, uids)
		g.SetMembers(a.reverse, a.due, uids, a.leftInNoGroup)
		expiries := a.due.SetAll(&g.Expiries, g.Number, w.Users, a.commit, g.Members.Contains)
		changed, reported := a.nicknames.Set(w.Users, added)
		a.reverse.TouchChanged(changed, expiries)
		a.members.Add(int64(len(added) - removed))
		if len(added) == 0 && removed == 0 && len(changed) == 0 && len(expiries) == 0 {
			return membership.Result{}, membership.Change{}
		}
		return membership.Result{Count: len(added), Removed: removed},
			membership.Change{Op: membership.OpReplace, GroupID: g.ID, UIDs: uids, Nicknames: reported, Expiries: expiries}
	case membership.OpSetGroup:
		return membership.Result{}, directory.SetAttributes(a.tables, g, *w.Group, &a.nicknames)
	default: // OpDeleteGroup
		removed := 0
		if g.Members.Len() > 0 {
			removed = g.Empty(a.reverse, a.due, a.leftInNoGroup)
			a.members.Add(-int64(removed))
		}
		if !directory.DropAttributes(a.tables, g, &a.nicknames) && removed == 0 {
			return membership.Result{}, membership.Change{}
		}
		return membership.Result{Count: removed}, membership.Change{Op: membership.OpDeleteGroup, GroupID: g.ID}
	}
}

// namedUIDs returns the uids the adds and replaces of ws name.
func namedUIDs(ws []membership.Write) map[membership.UID]bool {
	named := map[membership.UID]bool{}
	for _, w := range ws {
		if w.Op == membership.OpAdd || w.Op == membership.OpReplace {
			for _, u := range w.Users {
				named[u.UID] = true
			}
		}
	}
	return named
}

// Users yields every uid the writes can touch: those they name, and the
// members of the groups they replace or delete (members an earlier write of
// the batch adds are named by it).
func Users(ws []membership.Write, groups map[string]*group.Group) func(yield func(membership.UID) bool) {
	return func(yield func(membership.UID) bool) {
		for _, w := range ws {
			for _, u := range w.Users {
				if !yield(u.UID) {
					return
				}
			}
			for _, uid := range w.UIDs {
				if !yield(uid) {
					return
				}
			}
			if g := groups[w.GroupID]; g != nil && (w.Op == membership.OpReplace || w.Op == membership.OpDeleteGroup) {
				for uid := range g.Members.All {
					if !yield(uid) {
						return
					}
				}
			}
		}
	}
}

// Store is what Check reads a batch's groups through: the store, whose
// shards of the groups the caller holds.
type Store interface {
	// Group returns the group groupID (nil: one with no members).
	Group(groupID string) *group.Group
	// Check returns the error of a write whose precondition cond does
	// not hold for g.
	Check(g *group.Group, cond membership.Precondition) error
	// RefuseInactive returns the error of an add of users when one of
	// them is inactive.
	RefuseInactive(users []membership.User) error
}

// Check puts in groups the groups ws write to (nil: a group with no
// members), and returns the error of the first write that a batch does
// not take, whose precondition does not hold or that adds an inactive
// user, or CodeTooManyChanges
// when the batch's replaces and deletions hold more members than a batch
// may remove. The caller holds the groups' shards, which s reads.
func Check(s Store, ws []membership.Write, groups map[string]*group.Group) error {
	removals := 0 // the members the batch's replaces and deletions hold
	for i, w := range ws {
		switch {
		case w.Op == membership.OpAdd, w.Op == membership.OpRemove, w.Op == membership.OpReplace, w.Op == membership.OpDeleteGroup,
			membership.IsNestingOp(w.Op) && w.Op != membership.OpExpireGroups, w.Op == membership.OpSetGroup && w.Group != nil:
		default:
			return fmt.Errorf("batch element %d: op %q is not one a batch takes", i, w.Op)
		}
		g, seen := groups[w.GroupID]
		if !seen {
			g = s.Group(w.GroupID)
			groups[w.GroupID] = g
		}
		if err := s.Check(g, w.If); err != nil {
			return membership.BatchElementError(i, w.GroupID, err)
		}
		if w.Op == membership.OpAdd || w.Op == membership.OpReplace {
			if err := s.RefuseInactive(w.Users); err != nil {
				return membership.BatchElementError(i, w.GroupID, err)
			}
		}
		if g != nil && (w.Op == membership.OpReplace || w.Op == membership.OpDeleteGroup) {
			removals += g.Members.Len()
		}
	}
	if removals > membership.MaxBatchRemovals {
		return membership.Errorf(membership.CodeTooManyChanges,
			"the batch's replace and delete_group changes hold up to %d members in all, more than %d that one batch may remove: "+
				"delete large groups on their own (DELETE /groups/{groupID}); nothing was changed", removals, membership.MaxBatchRemovals)
	}
	return nil
}

// AtRevision returns the result of a batch whose writes' results are
// results, at rev.
func AtRevision(results []membership.Result, rev membership.Revision) membership.BatchResult {
	for i := range results {
		results[i].Revision = rev
	}
	return membership.BatchResult{Results: results, Revision: rev}
}
