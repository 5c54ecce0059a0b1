package memory

import (
	"context"
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
	// shards of the groups at the ends of the nestings it can change
	// (nestingEnds), beside its own.
	nests := slices.ContainsFunc(b.Writes, func(w membership.Write) bool {
		return membership.IsNestingOp(w.Op) || w.Op == membership.OpDeleteGroup
	})
	if nests {
		m.nestMu.Lock()
		defer m.nestMu.Unlock()
	}
	ids := m.batchGroups(b.Writes, nests)
	var sbuf [1]uint64
	defer m.unlockShards(m.lockShards(len(ids), func(i int) string { return ids[i] }, false, sbuf[:]))
	groups := make(map[string]*group.Group, len(b.Writes))
	if err := batch.Check(batchStore{m}, b.Writes, groups); err != nil {
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
		return batch.AtRevision(results, m.LatestRevision()), nil
	}
	rev := a.Nicknames().Record(&m.feed, membership.Change{Op: membership.OpBatch, Changes: subs}, st)
	m.reverse.UnlockAt(locked, rev)
	if nestChanged {
		m.nestChanged(rev, next)
	}
	for g := range changed {
		if g.Vacant() {
			m.dropGroup(m.shardOf(g.ID), g, rev)
		} else {
			m.revise(g, rev)
		}
	}
	return batch.AtRevision(results, rev), nil
}

// batchGroups returns the ids of the groups the writes of a batch change,
// with, when it nests (and so holds nestMu), those at the ends of the
// nestings it can change.
func (m *Store) batchGroups(ws []membership.Write, nests bool) []string {
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.GroupID
	}
	if nests {
		for _, w := range ws {
			if membership.IsNestingOp(w.Op) || w.Op == membership.OpDeleteGroup {
				ids = append(ids, m.nestingEnds(w)[1:]...)
			}
		}
	}
	return ids
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
// naming the write, as membership.BatchElementError does), and returns what each
// write did. The caller holds nestMu and the shards of the
// groups b changes.
func (m *Store) batchNesting(b membership.Batch, commit time.Time) ([]nestedWrite, error) {
	out := make([]nestedWrite, len(b.Writes))
	m.nest.Begin()
	for i, w := range b.Writes {
		switch {
		case membership.IsNestingOp(w.Op):
			res, c, err := m.nest.Apply(w, b.MaxDepth, b.MaxAncestors, commit)
			if err != nil {
				m.nest.Rollback()
				return nil, membership.BatchElementError(i, w.GroupID, err)
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

// batchStore is what batch.Check reads a batch's groups through: the
// store, whose shards of the batch's groups the caller holds.
type batchStore struct{ m *Store }

func (b batchStore) Group(groupID string) *group.Group {
	return b.m.shardOf(groupID).groups.Get(groupID)
}

func (b batchStore) Check(g *group.Group, cond membership.Precondition) error {
	return b.m.check(g, cond)
}

func (b batchStore) RefuseInactive(users []membership.User) error {
	return b.m.Directory.RefuseInactive(users)
}
