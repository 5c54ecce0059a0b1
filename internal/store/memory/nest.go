package memory

import (
	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/membership"
)

// Groups in groups (membership.Nesting). The nesting is a graph of its own
// (nesting.Graph) under one lock, nestMu, taken before any shard: a
// nesting write holds it exclusively with the shards of the groups at
// both ends of every nesting it can change (nestingEnds); so do a group
// deletion and a batch that nests, with the shards of every group they
// change. Once the change has its revision, the graph gives it to what
// the change changed of each group (nestChanged), and a group it left in
// no nesting keeps it (groupNumbers.unnested): every read of groups in
// groups answers at the revision of the latest change of what it reads. The reads are package transitive's (Store embeds its Reader),
// which holds the nesting for reading, and the shards of what it reads
// (transitiveStore, below, is what it reads through). A membership write
// takes no part of it: what a user's add or remove costs does not depend
// on the nesting.
//
// A group keeps the count of its subgroups (group.Group.Subgroups), and its
// revision moves with them; a group that has subgroups and no members is
// kept, as one with members is.

// nestWrite applies a nesting write, when its precondition holds, as one
// change: all of it or, when a nesting it makes is refused (a cycle, too
// deep), nothing.
func (m *Store) nestWrite(w membership.Write, st feed.Stamp) (membership.Result, error) {
	m.nestMu.Lock()
	defer m.nestMu.Unlock()
	ends := m.nestingEnds(w)
	var sbuf [1]uint64
	defer m.unlockShards(m.lockShards(len(ends), func(i int) string { return ends[i] }, false, sbuf[:]))
	s := m.shardOf(w.GroupID)
	g := s.groups.Get(w.GroupID)
	if err := m.check(g, w.If); err != nil {
		return membership.Result{}, err
	}
	st = st.WithTimeForSubgroups(w.Subgroups)
	next := m.nest.Next()
	m.nest.Begin()
	res, c, err := m.nest.Apply(w, w.MaxDepth, w.MaxAncestors, nowOr(st.At))
	if err != nil {
		m.nest.Rollback()
		return membership.Result{}, err
	}
	m.nest.Commit()
	if c.Op == "" {
		res.Revision = m.revisionOf(g)
		return res, nil
	}
	if g == nil {
		g = m.newGroup(s, w.GroupID)
	}
	g.SetSubgroups(m.nest.Node(w.GroupID).SubgroupCount())
	rev := m.feed.Record(c, st, nil)
	m.nestChanged(rev, next)
	if g.Vacant() {
		m.dropGroup(s, g, rev)
	} else {
		m.revise(g, rev)
	}
	res.Revision = rev
	return res, nil
}

// nestingEnds returns the groups at the ends of every nesting w, a
// nesting write or a group's deletion, can change, w.GroupID first. The
// caller holds nestMu.
func (m *Store) nestingEnds(w membership.Write) []string {
	ids := []string{w.GroupID}
	for _, sg := range w.Subgroups {
		ids = append(ids, sg.GroupID)
	}
	if w.Op == membership.OpReplaceGroups || w.Op == membership.OpDeleteGroup {
		n := m.nest.Node(w.GroupID)
		if n != nil {
			for _, e := range n.Children {
				ids = append(ids, e.Node.ID)
			}
		}
		if w.Op == membership.OpDeleteGroup {
			ids = append(ids, n.ParentIDs()...)
		}
	}
	return ids
}

// nestChanged notes that the change rev altered the nesting, which had
// its earliest end at next before: what it changed of each group gets rev
// (nesting.Graph.Stamp), and the expirer is told when a nesting ends
// sooner now. The caller holds nestMu, and the shards of the groups at
// the ends of the nestings it changed (nestingEnds).
func (m *Store) nestChanged(rev membership.Revision, next int64) {
	m.nested.Store(true)
	m.nestRev = rev
	for _, id := range m.nest.Stamp(rev) {
		if g := m.shardOf(id).groups.Get(id); g != nil {
			m.groupNumbers.setUnnested(g.Number, rev)
		}
	}
	m.nestDue(next)
}

// nestDue notes when the earliest nesting ends now, which was next before,
// and tells the expirer when that comes before every other end. The caller
// holds nestMu.
func (m *Store) nestDue(next int64) {
	now := m.nest.Next()
	m.nestNext.Store(now)
	if now == 0 || next != 0 && now >= next {
		return
	}
	if first, ok := m.due.Next(); !ok || now < first.UnixMilli() {
		m.due.Wake()
	}
}

// touchParents gives each of parents, whose subgroups the change rev
// altered, its count of subgroups and the revision, dropping those left
// vacant. The caller holds their shards and nestMu.
func (m *Store) touchParents(parents []string, rev membership.Revision) {
	for _, p := range parents {
		s := m.shardOf(p)
		g := s.groups.Get(p)
		if g == nil {
			continue // every group with subgroups has one
		}
		g.SetSubgroups(m.nest.Node(p).SubgroupCount())
		if g.Vacant() {
			m.dropGroup(s, g, rev)
		} else {
			g.Revision = rev
		}
	}
}
