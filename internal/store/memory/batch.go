package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"example.com/groupmembership/internal/store/memory/batch"
	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/internal/store/memory/group"
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
	results, rev, replayed, err := m.keyed(ctx, b.Principal, b.Idem, true, nowOr(b.Time), func() ([]membership.Result, membership.Revision, error) {
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
				parents = append(parents, m.nest.Node(w.GroupID).ParentIDs()...)
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
	st := feed.Stamp{Actor: b.Actor, Principal: b.Principal, At: b.Time, Now: true}
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
	m.createBatchGroups(b.Writes, groups, nested)
	var rbuf [4]uint64
	locked := m.reverse.Lock(batch.Users(b.Writes, groups), rbuf[:])
	a := batch.NewApplier(b.Writes, nowOr(st.At), m.groups, &m.reverse, &m.due, &m.counts.members, m.nicknames.Write())
	defer a.Nicknames().Release()
	results, subs, changed, nestChanged := m.applyBatchWrites(a, b.Writes, groups, nested)
	a.ForgetDeferred()
	if len(subs) == 0 {
		a.Nicknames().Release()
		m.reverse.Unlock(locked)
		return atRevision(results, m.LatestRevision()), nil
	}
	rev := a.Nicknames().Record(&m.feed, membership.Change{Op: membership.OpBatch, Changes: subs}, st)
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
	return atRevision(results, rev), nil
}

// atRevision returns the result of a batch whose writes' results are
// results, at rev.
func atRevision(results []membership.Result, rev membership.Revision) membership.BatchResult {
	for i := range results {
		results[i].Revision = rev
	}
	return membership.BatchResult{Results: results, Revision: rev}
}

// createBatchGroups creates the groups a batch's writes add users,
// subgroups or attributes to (nested is what its nesting writes did, nil
// when it has none), before any reverse shard is taken (the lock order).
func (m *Store) createBatchGroups(writes []membership.Write, groups map[string]*group.Group, nested []nestedWrite) {
	for i, w := range writes {
		adds := (w.Op == membership.OpAdd || w.Op == membership.OpReplace) && len(w.Users) > 0 || w.Op == membership.OpSetGroup
		if nested != nil && nested[i].change.Op != "" && w.Op != membership.OpDeleteGroup {
			adds = true
		}
		if adds && groups[w.GroupID] == nil {
			groups[w.GroupID] = m.newGroup(m.shardOf(w.GroupID), w.GroupID)
		}
	}
}

// applyBatchWrites applies a batch's writes to their groups with a, in
// order, taking its nesting writes' results from nested (nil when it has
// none), and returns each write's result, the changes of those that
// changed something, the groups whose revision moves with the batch, and
// whether it changed the nesting.
func (m *Store) applyBatchWrites(a *batch.Applier, writes []membership.Write, groups map[string]*group.Group, nested []nestedWrite) (
	results []membership.Result, subs []membership.Change, changed map[*group.Group]bool, nestChanged bool) {
	results = make([]membership.Result, len(writes))
	changed = map[*group.Group]bool{}
	for i, w := range writes {
		g := groups[w.GroupID]
		var sub membership.Change
		if membership.IsNestingOp(w.Op) {
			results[i], sub = nested[i].res, nested[i].change
		} else {
			results[i], sub = a.Apply(g, w)
		}
		if nested != nil && nested[i].change.Op != "" {
			nestChanged = true
			if sub.Op == "" { // a deletion of a group with no members, nested
				sub = nested[i].change
			}
			for _, p := range nested[i].touched {
				pg := groups[p]
				if pg == nil {
					pg = m.shardOf(p).groups.Get(p)
				}
				if pg != nil {
					pg.SetSubgroups(m.nest.Node(p).SubgroupCount())
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
	return results, subs, changed, nestChanged
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
			res, c, err := m.nest.Apply(w, b.MaxDepth, commit)
			if err != nil {
				m.nest.Rollback()
				return nil, BatchElementError(i, w.GroupID, err)
			}
			out[i] = nestedWrite{res: res, change: c}
			if c.Op != "" {
				out[i].touched = []string{w.GroupID}
			}
		case w.Op == membership.OpDeleteGroup && m.nest.Node(w.GroupID) != nil:
			hadChildren := m.nest.Node(w.GroupID).SubgroupCount() > 0
			touched := m.nest.Unnest(w.GroupID)
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
		switch {
		case w.Op == membership.OpAdd, w.Op == membership.OpRemove, w.Op == membership.OpReplace, w.Op == membership.OpDeleteGroup,
			membership.IsNestingOp(w.Op) && w.Op != membership.OpExpireGroups, w.Op == membership.OpSetGroup && w.Group != nil:
		default:
			return fmt.Errorf("batch element %d: op %q is not one a batch takes", i, w.Op)
		}
		g, seen := groups[w.GroupID]
		if !seen {
			g = m.shardOf(w.GroupID).groups.Get(w.GroupID)
			groups[w.GroupID] = g
		}
		if err := m.check(g, w.If); err != nil {
			return BatchElementError(i, w.GroupID, err)
		}
		if w.Op == membership.OpAdd || w.Op == membership.OpReplace {
			if err := m.Directory.RefuseInactive(w.Users); err != nil {
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
