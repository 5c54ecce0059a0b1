package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/nicknames"
	"example.com/groupmembership/internal/store/memory/packed"
	"example.com/groupmembership/membership"
)

// Batch implements membership.Store. It holds the shards of every group the
// batch writes to, in index order, from its first check to its last change,
// and the reverse shards of every user it can touch, from its first change
// of the reverse index until its revision is recorded: no reader of any of
// these groups or users sees part of it.
//
// A batch with an Idempotency key is applied once for its key (keys.go),
// as of its Time, or now when it has none.
func (m *Store) Batch(ctx context.Context, b membership.Batch) (membership.BatchResult, error) {
	if b.Idem.Key == "" {
		return m.batch(b)
	}
	results, rev, replayed, err := m.keyed(ctx, b.Idem, true, nowOr(b.Time), func() ([]membership.Result, membership.Revision, error) {
		res, err := m.batch(b)
		return res.Results, res.Revision, err
	})
	if err != nil {
		return membership.BatchResult{}, err
	}
	return membership.BatchResult{Results: results, Revision: rev, Replayed: replayed}, nil
}

// batch applies b, holding every lock it needs from its first check to its
// last change.
func (m *Store) batch(b membership.Batch) (membership.BatchResult, error) {
	// A batch that nests, or deletes a group, holds the nesting and the
	// shards of the parents of the groups it deletes, beside its own.
	nests := slices.ContainsFunc(b.Writes, func(w membership.Write) bool {
		return membership.IsNestingOp(w.Op) || w.Op == membership.OpDeleteGroup
	})
	var parents []string
	if nests {
		m.nestMu.Lock()
		defer m.nestMu.Unlock()
		for _, w := range b.Writes {
			if w.Op == membership.OpDeleteGroup {
				parents = append(parents, m.parentsOf(w.GroupID)...)
			}
		}
	}
	var sbuf [1]uint64
	held := m.lockShards(len(b.Writes)+len(parents), func(i int) string {
		if i < len(b.Writes) {
			return b.Writes[i].GroupID
		}
		return parents[i-len(b.Writes)]
	}, false, sbuf[:])
	defer m.unlockShards(held)
	groups := make(map[string]*group.Group, len(b.Writes))
	if err := m.checkBatch(b.Writes, groups); err != nil {
		return membership.BatchResult{}, err
	}
	// A TTL counts from the very time the batch's change carries, as a
	// write's does (feed.Stamp.WithTimeFor), not from a second reading of the
	// clock: they could fall in two milliseconds.
	st := feed.Stamp{Actor: b.Actor, At: b.Time, Now: true}
	for _, w := range b.Writes {
		st = st.WithTimeFor(w.Users).WithTimeForSubgroups(w.Subgroups)
	}
	// The nesting first, all of it or nothing: a nesting write, the only
	// kind that can be refused here, is refused before any member
	// changes. Nestings and members are apart, so applying one before the
	// other ends as applying the writes in order does.
	var nested []nestedWrite
	next := m.nest.Next()
	if nests {
		var err error
		if nested, err = m.batchNesting(b, nowOr(st.At)); err != nil {
			return membership.BatchResult{}, err
		}
	}
	// Groups are created before any reverse shard is taken (lock order).
	for i, w := range b.Writes {
		adds := (w.Op == membership.OpAdd || w.Op == membership.OpReplace) && len(w.Users) > 0 || w.Op == membership.OpSetGroup
		if nests && nested[i].change.Op != "" && w.Op != membership.OpDeleteGroup {
			adds = true
		}
		if adds && groups[w.GroupID] == nil {
			groups[w.GroupID] = m.newGroup(m.shardOf(w.GroupID), w.GroupID)
		}
	}
	var rbuf [4]uint64
	locked := m.reverse.Lock(batchUIDs(b.Writes, groups), rbuf[:])
	a := batchApplier{m: m, named: namedUIDs(b.Writes), commit: nowOr(st.At), nicknames: m.nicknames.Write()}
	defer a.nicknames.Release()
	results := make([]membership.Result, len(b.Writes))
	var subs []membership.Change
	changed := map[*group.Group]bool{}
	nestChanged := false
	for i, w := range b.Writes {
		g := groups[w.GroupID]
		var sub membership.Change
		if membership.IsNestingOp(w.Op) {
			results[i], sub = nested[i].res, nested[i].change
		} else {
			results[i], sub = a.apply(g, w)
		}
		if nests && nested[i].change.Op != "" {
			nestChanged = true
			if sub.Op == "" { // a deletion of a group with no members, nested
				sub = nested[i].change
			}
			for _, p := range nested[i].touched {
				pg := groups[p]
				if pg == nil {
					pg = m.shardOf(p).groups[p]
				}
				if pg != nil {
					pg.Subgroups = m.subgroupCount(p)
					changed[pg] = true
				}
			}
		}
		if sub.Op != "" {
			subs = append(subs, sub)
			if g != nil {
				changed[g] = true
			}
		}
	}
	a.forgetDeferred()
	if len(subs) == 0 {
		a.nicknames.Release()
		m.reverse.Unlock(locked)
		rev := m.LatestRevision()
		for i := range results {
			results[i].Revision = rev
		}
		return membership.BatchResult{Results: results, Revision: rev}, nil
	}
	rev := a.nicknames.Record(&m.feed, membership.Change{Op: membership.OpBatch, Changes: subs}, st)
	m.reverse.Unlock(locked)
	if nestChanged {
		m.nestChanged(rev, next)
	}
	for g := range changed {
		if g.Vacant() {
			m.dropGroup(m.shardOf(g.ID), g, rev)
		} else {
			g.Revision = rev
		}
	}
	for i := range results {
		results[i].Revision = rev
	}
	return membership.BatchResult{Results: results, Revision: rev}, nil
}

// nestedWrite is what a write of a batch did to the nesting.
type nestedWrite struct {
	res    membership.Result
	change membership.Change // Op "": nothing
	// touched are the groups whose subgroups it changed.
	touched []string
}

// batchNesting applies the nesting writes of b, and the nestings its group
// deletions end, in order, all or, when one is refused, none (its error
// naming the write, as BatchElementError does), and returns what each
// write did. The caller holds nestMu and the shards of the
// groups b changes.
func (m *Store) batchNesting(b membership.Batch, commit time.Time) ([]nestedWrite, error) {
	out := make([]nestedWrite, len(b.Writes))
	m.nest.Begin()
	for i, w := range b.Writes {
		switch {
		case membership.IsNestingOp(w.Op):
			res, c, err := m.nestOp(w, b.MaxDepth, commit)
			if err != nil {
				m.nest.Rollback()
				return nil, BatchElementError(i, w.GroupID, err)
			}
			out[i] = nestedWrite{res: res, change: c}
			if c.Op != "" {
				out[i].touched = []string{w.GroupID}
			}
		case w.Op == membership.OpDeleteGroup && m.nest.Node(w.GroupID) != nil:
			hadChildren := m.subgroupCount(w.GroupID) > 0
			touched := m.unnest(w.GroupID)
			if hadChildren {
				touched = append(touched, w.GroupID)
			}
			out[i] = nestedWrite{change: membership.Change{Op: membership.OpDeleteGroup, GroupID: w.GroupID}, touched: touched}
		}
	}
	m.nest.Commit()
	return out, nil
}

// checkBatch puts in groups the groups ws write to (nil: a group with no
// members), and returns the error of the first write that a batch does
// not take, whose precondition does not hold or that adds an inactive
// user, or CodeTooManyChanges
// when the batch's replaces and deletions hold more members than a batch
// may remove. The caller holds the groups' shards.
func (m *Store) checkBatch(ws []membership.Write, groups map[string]*group.Group) error {
	removals := 0 // the members the batch's replaces and deletions hold
	for i, w := range ws {
		if !membership.InABatch(w.Op) || w.Op == membership.OpSetGroup && w.Group == nil {
			return fmt.Errorf("batch element %d: op %q is not one a batch takes", i, w.Op)
		}
		g, seen := groups[w.GroupID]
		if !seen {
			g = m.shardOf(w.GroupID).groups[w.GroupID]
			groups[w.GroupID] = g
		}
		if err := m.check(g, w.If); err != nil {
			return BatchElementError(i, w.GroupID, err)
		}
		if w.Op == membership.OpAdd || w.Op == membership.OpReplace {
			if err := m.refuseInactive(w.Users); err != nil {
				return BatchElementError(i, w.GroupID, err)
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

// BatchElementError returns err, an error of write i of a batch, to
// groupID, naming the write in its message: "changes element i" (the
// index in the request's changes). A *membership.Error keeps its code and
// fields.
func BatchElementError(i int, groupID string, err error) error {
	var e *membership.Error
	if errors.As(err, &e) {
		named := *e
		named.Message = fmt.Sprintf("changes element %d (group %q): %s", i, groupID, e.Message)
		return &named
	}
	return fmt.Errorf("changes element %d (group %q): %w", i, groupID, err)
}

// batchApplier applies the writes of a batch, one after another, with every
// lock they need held.
type batchApplier struct {
	m *Store
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

// leftInNoGroup forgets uid, which a write left in no group, now or, when
// a write of the batch names it, at the end.
func (a *batchApplier) leftInNoGroup(uid membership.UID) {
	if a.named[uid] {
		a.deferred = append(a.deferred, uid)
		return
	}
	a.nicknames.Forget(uid)
}

// forgetDeferred forgets the users left in no group whose forgetting waited
// for the end of the batch, and are still in no group.
func (a *batchApplier) forgetDeferred() {
	for _, uid := range a.deferred {
		if !a.m.reverse.HasUser(uid) {
			a.nicknames.Forget(uid)
		}
	}
}

// apply applies w to g (nil: a group with no members, which only a remove
// or a deletion can meet), and returns its result and its change, whose Op
// is "" when it changed nothing.
func (a *batchApplier) apply(g *group.Group, w membership.Write) (membership.Result, membership.Change) {
	m := a.m
	if g == nil {
		return membership.Result{}, membership.Change{}
	}
	switch w.Op {
	case membership.OpAdd:
		added := g.Insert(&m.reverse, w.Users)
		expiries := m.setExpiries(g, w.Users, a.commit)
		changed, reported := a.nicknames.Set(w.Users, added)
		m.counts.members.Add(int64(len(added)))
		if len(added) == 0 && len(changed) == 0 && len(expiries) == 0 {
			return membership.Result{}, membership.Change{}
		}
		var uids []membership.UID
		if len(added) > 0 {
			uids = tight(added)
		}
		return membership.Result{Count: len(added)}, membership.Change{Op: membership.OpAdd, GroupID: g.ID, UIDs: uids, Nicknames: reported, Expiries: expiries}
	case membership.OpRemove:
		var removed []membership.UID
		for _, uid := range w.UIDs {
			if g.Members.Remove(uid) {
				m.due.End(&g.Expiries, g.Number, uid)
				if m.reverse.Remove(uid, g.Number) {
					a.leftInNoGroup(uid)
				}
				removed = append(removed, uid)
			}
		}
		m.counts.members.Add(-int64(len(removed)))
		if len(removed) == 0 {
			return membership.Result{}, membership.Change{}
		}
		slices.Sort(removed)
		return membership.Result{Count: len(removed)}, membership.Change{Op: membership.OpRemove, GroupID: g.ID, UIDs: removed}
	case membership.OpReplace:
		uids := sortedUIDs(w.Users)
		added, removed := packed.Diff(&g.Members, uids)
		g.SetMembers(&m.reverse, &m.due, uids, a.leftInNoGroup)
		expiries := m.setExpiries(g, w.Users, a.commit)
		changed, reported := a.nicknames.Set(w.Users, added)
		m.counts.members.Add(int64(len(added) - removed))
		if len(added) == 0 && removed == 0 && len(changed) == 0 && len(expiries) == 0 {
			return membership.Result{}, membership.Change{}
		}
		return membership.Result{Count: len(added), Removed: removed},
			membership.Change{Op: membership.OpReplace, GroupID: g.ID, UIDs: uids, Nicknames: reported, Expiries: expiries}
	case membership.OpSetGroup:
		if g.Attrs != nil && g.Attrs.GroupAttributes == *w.Group {
			return membership.Result{}, membership.Change{}
		}
		return membership.Result{}, setAttrs(g, *w.Group, &a.nicknames)
	default: // OpDeleteGroup
		hadAttrs := g.Attrs != nil
		removed := g.Empty(&m.reverse, &m.due, a.leftInNoGroup)
		dropAttrs(g, &a.nicknames)
		if removed == 0 && !hadAttrs {
			return membership.Result{}, membership.Change{}
		}
		m.counts.members.Add(-int64(removed))
		return membership.Result{Count: removed}, membership.Change{Op: membership.OpDeleteGroup, GroupID: g.ID}
	}
}

// sortedUIDs returns the uids of users, ascending, each once.
func sortedUIDs(users []membership.User) []membership.UID {
	uids := make([]membership.UID, len(users))
	for i, u := range users {
		uids[i] = u.UID
	}
	slices.Sort(uids)
	return slices.Compact(uids)
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

// batchUIDs yields every uid the writes can touch: those they name, and the
// members of the groups they replace or delete (members an earlier write of
// the batch adds are named by it).
func batchUIDs(ws []membership.Write, groups map[string]*group.Group) func(yield func(membership.UID) bool) {
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
