package memory

import (
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/nesting"
	"example.com/groupmembership/internal/store/memory/shards"
	"example.com/groupmembership/membership"
)

// Groups in groups (membership.Nesting). The nesting is a graph of its own
// (nesting.Graph) under one lock, nestMu, taken before any shard: a
// nesting write holds it exclusively with its group's shard; so do a group
// deletion and a batch that nests, with the shards of every group they
// change. A transitive read holds it for reading with the shards of the
// closure it reads (the group and every group below it) for reading, so
// that what it answers is of one revision; a check and a user's groups
// read the user's groups in the reverse index and each one's ancestors,
// kept in the graph. A membership write takes no part of it: what a user's
// add or remove costs does not depend on the nesting.
//
// A group keeps the count of its subgroups (group.Group.Subgroups), and its
// revision moves with them; a group that has subgroups and no members is
// kept, as one with members is.

// millisOf returns an expiry as the graph keeps it: Unix milliseconds, 0
// for none.
func millisOf(at time.Time) int64 {
	if at.IsZero() {
		return 0
	}
	return at.UnixMilli()
}

// timeOfMillis returns a nesting's end as the reads give it: zero for none.
func timeOfMillis(at int64) time.Time {
	if at == 0 {
		return time.Time{}
	}
	return time.UnixMilli(at).UTC()
}

// nestOp applies the nesting write w to the graph, checking each nesting
// it makes against maxDepth and cycles as it goes, for a write committed
// at commit, and returns its result and its change (Op "" when it changed
// nothing). On an error it has applied part of w: the caller has the graph
// in a transaction (nesting.Graph.Begin) and rolls it back. The caller
// holds nestMu.
func (m *Store) nestOp(w membership.Write, maxDepth int, commit time.Time) (membership.Result, membership.Change, error) {
	parent := w.GroupID
	subs := membership.ResolveSubgroupTTLs(w.Subgroups, commit)
	changed := map[string]int64{}
	var res membership.Result
	switch w.Op {
	case membership.OpAddGroups:
		for _, sg := range subs {
			e, exists := m.nest.Node(parent).Child(sg.GroupID)
			at := millisOf(sg.Expiry.At)
			switch {
			case !exists:
				if !sg.Expiry.Set {
					at = 0
				}
				if err := m.nest.Check(parent, sg.GroupID, maxDepth); err != nil {
					return membership.Result{}, membership.Change{}, err
				}
				m.nest.Set(parent, sg.GroupID, at)
				res.Count++
				changed[sg.GroupID] = at
			case sg.Expiry.Set && at != e.At:
				m.nest.Set(parent, sg.GroupID, at)
				changed[sg.GroupID] = at
			}
		}
	case membership.OpRemoveGroups, membership.OpExpireGroups:
		asOf := millisOf(w.AsOf)
		for _, sg := range subs {
			e, exists := m.nest.Node(parent).Child(sg.GroupID)
			if !exists || w.Op == membership.OpExpireGroups && (e.At == 0 || e.At > asOf) {
				continue
			}
			m.nest.Remove(parent, sg.GroupID)
			res.Count++
			changed[sg.GroupID] = 0
		}
	case membership.OpReplaceGroups:
		want := make(map[string]int64, len(subs))
		var order []string
		for _, sg := range subs {
			old, seen := want[sg.GroupID]
			if !seen {
				order = append(order, sg.GroupID)
				e, _ := m.nest.Node(parent).Child(sg.GroupID)
				old = e.At
			}
			if sg.Expiry.Set {
				old = millisOf(sg.Expiry.At)
			}
			want[sg.GroupID] = old
		}
		if n := m.nest.Node(parent); n != nil {
			var gone []string
			for _, e := range n.Children {
				if _, kept := want[e.Node.ID]; !kept {
					gone = append(gone, e.Node.ID)
				}
			}
			for _, id := range gone {
				m.nest.Remove(parent, id)
				res.Removed++
			}
		}
		altered := res.Removed > 0
		for _, id := range order {
			e, exists := m.nest.Node(parent).Child(id)
			switch {
			case !exists:
				if err := m.nest.Check(parent, id, maxDepth); err != nil {
					return membership.Result{}, membership.Change{}, err
				}
				m.nest.Set(parent, id, want[id])
				res.Count++
				altered = true
			case e.At != want[id]:
				m.nest.Set(parent, id, want[id])
				altered = true
			}
		}
		if !altered {
			return res, membership.Change{}, nil
		}
		slices.Sort(order)
		groups := make([]membership.Nested, len(order))
		for i, id := range order {
			groups[i] = membership.Nested{GroupID: id, Expires: timeOfMillis(want[id])}
		}
		return res, membership.Change{Op: w.Op, GroupID: parent, Groups: groups}, nil
	}
	if len(changed) == 0 {
		return res, membership.Change{}, nil
	}
	groups := make([]membership.Nested, 0, len(changed))
	for id, at := range changed {
		groups = append(groups, membership.Nested{GroupID: id, Expires: timeOfMillis(at)})
	}
	slices.SortFunc(groups, func(a, b membership.Nested) int { return strings.Compare(a.GroupID, b.GroupID) })
	return res, membership.Change{Op: w.Op, GroupID: parent, Groups: groups}, nil
}

// subgroupCount returns how many subgroups id has. The caller holds
// nestMu.
func (m *Store) subgroupCount(id string) int {
	if n := m.nest.Node(id); n != nil {
		return len(n.Children)
	}
	return 0
}

// nestWrite applies a nesting write, when its precondition holds, as one
// change: all of it or, when a nesting it makes is refused (a cycle, too
// deep), nothing.
func (m *Store) nestWrite(w membership.Write, st feed.Stamp) (membership.Result, error) {
	m.nestMu.Lock()
	defer m.nestMu.Unlock()
	s := m.shardOf(w.GroupID)
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[w.GroupID]
	if err := m.check(g, w.If); err != nil {
		return membership.Result{}, err
	}
	st = st.WithTimeForSubgroups(w.Subgroups)
	next := m.nest.Next()
	m.nest.Begin()
	res, c, err := m.nestOp(w, w.MaxDepth, nowOr(st.At))
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
	g.Subgroups = m.subgroupCount(w.GroupID)
	rev := m.feed.Record(c, st, nil)
	m.nestChanged(rev, next)
	if g.Vacant() {
		m.dropGroup(s, g, rev)
	} else {
		g.Revision = rev
	}
	res.Revision = rev
	return res, nil
}

// nestChanged notes that the change rev altered the nesting, which had
// its earliest end at next before: the expirer is told when one comes
// sooner now. The caller holds nestMu.
func (m *Store) nestChanged(rev membership.Revision, next int64) {
	m.nestRev = rev
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

// unnest removes id's subgroups from it and it from its parents, as a
// deletion of id does, and returns its parents. The caller holds nestMu
// and the parents' shards.
//
// The subgroups go first: a removal rebuilds the ancestors of every group
// below the nesting it ends, so that a parent removed while id still held
// its subgroups would rebuild all of theirs, once for each parent.
func (m *Store) unnest(id string) []string {
	n := m.nest.Node(id)
	if n == nil {
		return nil
	}
	parents := make([]string, 0, len(n.Parents))
	for _, e := range n.Parents {
		parents = append(parents, e.Node.ID)
	}
	for _, e := range slices.Clone(n.Children) {
		m.nest.Remove(id, e.Node.ID)
	}
	for _, p := range parents {
		m.nest.Remove(p, id)
	}
	return parents
}

// parentsOf returns the ids of the groups id is directly in. The caller
// holds nestMu.
func (m *Store) parentsOf(id string) []string {
	n := m.nest.Node(id)
	if n == nil {
		return nil
	}
	ids := make([]string, len(n.Parents))
	for i, e := range n.Parents {
		ids[i] = e.Node.ID
	}
	return ids
}

// touchParents gives each of parents, whose subgroups the change rev
// altered, its count of subgroups and the revision, dropping those left
// vacant. The caller holds their shards and nestMu.
func (m *Store) touchParents(parents []string, rev membership.Revision) {
	for _, p := range parents {
		s := m.shardOf(p)
		g := s.groups[p]
		if g == nil {
			continue // every group with subgroups has one
		}
		g.Subgroups = m.subgroupCount(p)
		if g.Vacant() {
			m.dropGroup(s, g, rev)
		} else {
			g.Revision = rev
		}
	}
}

// closure is a group and every group below it, as the nesting was at
// rev: it changes only with the nesting (nestRev), so it is kept
// (closureCache) and shared, never written once built.
type closure struct {
	rev membership.Revision
	// root is the group's node, nil when it is neither nested nor has
	// subgroups: then ids is the group alone.
	root  *nesting.Node
	nodes []*nesting.Node // while it is built
	// ids are the groups, the root first, their shards' indexes and the
	// end of each one's last path from the root (forever: none ends).
	ids    []string
	shards []int
	ends   []int64
	// lock is the set of shards, built once: a read of a closure of
	// thousands of groups locks its few shards without adding each.
	lock shards.Set
}

// closureOf returns groupID's closure as the nesting is. The caller holds
// nestMu.
func (m *Store) closureOf(groupID string) *closure {
	if c := m.closures.get(groupID, m.nestRev); c != nil {
		return c
	}
	c := &closure{rev: m.nestRev, root: m.nest.Node(groupID)}
	if c.root == nil {
		c.ids, c.ends = []string{groupID}, []int64{forever}
	} else {
		c.nodes = append([]*nesting.Node{c.root}, m.nest.Below(groupID)...)
		c.ids = make([]string, len(c.nodes))
		for i, n := range c.nodes {
			c.ids[i] = n.ID
		}
		c.ends = reach(c.nodes)
		c.nodes = nil // only reach needs them
		m.closures.put(c.root.ID, c)
	}
	c.shards = make([]int, len(c.ids))
	c.lock = shards.NewSet(len(m.shards), nil)
	for i, id := range c.ids {
		c.shards[i] = m.shardIndex(id)
		c.lock.Add(c.shards[i])
	}
	return c
}

// rlock holds the shards of c's groups for reading, in index order, and
// returns them for unlockShards.
func (m *Store) rlock(c *closure) heldShards {
	for i := range c.lock.All {
		m.shards[i].mu.RLock()
	}
	return heldShards{set: c.lock, read: true}
}

// closureCache keeps the closures read last, at most maxCachedClosureNodes
// groups in all (a few MiB).
type closureCache struct {
	// mu guards the fields below; it is taken with no lock after it.
	mu      sync.Mutex
	entries map[string]*closure
	nodes   int
}

const maxCachedClosureNodes = 1 << 18

func (cc *closureCache) get(groupID string, rev membership.Revision) *closure {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if c := cc.entries[groupID]; c != nil && c.rev == rev {
		return c
	}
	return nil
}

func (cc *closureCache) put(groupID string, c *closure) {
	if len(c.ids) > maxCachedClosureNodes/4 {
		return
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.entries == nil {
		cc.entries = map[string]*closure{}
	}
	if old := cc.entries[groupID]; old != nil {
		cc.nodes -= len(old.ids)
		delete(cc.entries, groupID)
	}
	for id, old := range cc.entries { // at random, until it fits
		if cc.nodes+len(c.ids) <= maxCachedClosureNodes {
			break
		}
		cc.nodes -= len(old.ids)
		delete(cc.entries, id)
	}
	cc.entries[groupID] = c
	cc.nodes += len(c.ids)
}

// forever is the end of a path that never ends.
const forever = math.MaxInt64

// reach returns, for each node of a closure (nodes, its root first), when
// its last path from the root ends: a path ends at the earliest end of
// its nestings (forever when none ends). Each node is reached after every
// parent in the closure (the graph has no cycle).
func reach(nodes []*nesting.Node) []int64 {
	index := make(map[*nesting.Node]int, len(nodes))
	for i, n := range nodes {
		index[n] = i
	}
	waiting := make([]int, len(nodes)) // parents in the closure not yet reached
	for _, n := range nodes {
		for _, e := range n.Children {
			waiting[index[e.Node]]++
		}
	}
	ends := make([]int64, len(nodes))
	ends[0] = forever
	ready := []int{0}
	for len(ready) > 0 {
		i := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		for _, e := range nodes[i].Children {
			j := index[e.Node]
			end := ends[i]
			if e.At != 0 {
				end = min(end, e.At)
			}
			ends[j] = max(ends[j], end)
			if waiting[j]--; waiting[j] == 0 {
				ready = append(ready, j)
			}
		}
	}
	return ends
}

// closureGroups returns the groups of c (nil: one with no members and no
// subgroups), in groups' room, the latest of their revisions as revisionOf gives them, and
// the key of their members: a revision that moves whenever any of their
// members, or which they are, changes, and with nothing else (a nickname
// does not move it). The caller holds their shards.
func (m *Store) closureGroups(c *closure, groups []*group.Group) ([]*group.Group, membership.Revision, membership.Revision) {
	groups = groups[:0]
	var key membership.Revision
	removed := membership.Revision(m.removedRevision.Load())
	for i, id := range c.ids {
		g := m.shards[c.shards[i]].groups[id]
		groups = append(groups, g)
		if g != nil {
			key = max(key, g.Revision)
		} else {
			key = max(key, removed)
		}
	}
	// What revisionOf gives each group, the latest of them.
	return groups, max(key, m.nicknames.Revision()), key
}

// pageNested calls list with a page of ids (sorted) as opts selects, the
// expiry of each from at.
func pageNested(ids []string, at func(i int) int64, opts membership.NestingListOptions, list membership.NestedListFunc) {
	start := 0
	if opts.After != "" {
		start, _ = slices.BinarySearch(ids, opts.After)
		if start < len(ids) && ids[start] == opts.After {
			start++
		}
	}
	end := len(ids)
	if opts.Limit > 0 {
		end = min(end, start+opts.Limit)
	}
	list(len(ids), func(yield func(membership.Nested) bool) {
		for i := start; i < end; i++ {
			if !yield(membership.Nested{GroupID: ids[i], Expires: timeOfMillis(at(i))}) {
				return
			}
		}
	})
}

// nestedIDs returns the ids of edges and their ends.
func nestedIDs(edges []nesting.Edge) ([]string, []int64) {
	ids := make([]string, len(edges))
	ats := make([]int64, len(edges))
	for i, e := range edges {
		ids[i], ats[i] = e.Node.ID, e.At
	}
	return ids, ats
}

// sortedIDs returns the ids of nodes in byte order.
func sortedIDs(nodes []*nesting.Node) []string {
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	slices.Sort(ids)
	return ids
}
