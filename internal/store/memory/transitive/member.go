package transitive

import (
	"context"
	"slices"
	"strings"

	"example.com/groupmembership/internal/store/memory/nesting"
	"example.com/groupmembership/internal/store/memory/shards"
	"example.com/groupmembership/membership"
)

// maxPeeks is how many times TransitiveMember reads a user's groups
// before it holds them (their shards) and finds them the same; past it, it
// holds every shard, where they cannot change.
const maxPeeks = 3

// TransitiveMember implements membership.Nesting. It reads the user's
// groups in the reverse index and keeps those that are groupID or below
// it (their ancestors hold its node); from each it walks up through the
// parents that are groupID or below it, which are the groups on the paths
// from groupID down to it, and only those: the end of the last path and a
// shortest one are found among them, however many groups the closure
// holds. It holds the shards of groupID and of those groups alone, read
// first without them (a peek) and then again with them held, until the
// two agree.
func (r *Reader) TransitiveMember(_ context.Context, groupID string, uid membership.UID) (membership.Member, []string, bool, membership.Revision, error) {
	graph, nrev := r.s.RLockNesting()
	defer r.s.RUnlockNesting()
	c := r.closureOf(graph, nrev, groupID)
	for peek := 0; ; peek++ {
		peeked, _ := r.s.HoldUser(uid)
		r.s.ReleaseUser(uid)
		var buf [1]uint64
		held := shards.NewSet(r.s.Shards(), buf[:])
		held.Add(r.s.ShardOf(groupID))
		for _, id := range below(graph, groupID, peeked) {
			held.Add(r.s.ShardOf(id))
		}
		if peek == maxPeeks {
			for i := range r.s.Shards() {
				held.Add(i)
			}
		}
		r.s.RLockShards(held)
		ids, userRev := r.s.HoldUser(uid)
		in := below(graph, groupID, ids)
		if peek < maxPeeks && slices.ContainsFunc(in, func(id string) bool { return !held.Has(r.s.ShardOf(id)) }) {
			r.s.ReleaseUser(uid) // a group of the user's, not held, came between
			r.s.RUnlockShards(held)
			continue
		}
		m, via, ok, rev := r.member(graph, c, in, uid, userRev)
		r.s.ReleaseUser(uid)
		r.s.RUnlockShards(held)
		return m, via, ok, rev, nil
	}
}

// below returns those of ids that are groupID or below it in graph.
func below(graph *nesting.Graph, groupID string, ids []string) []string {
	root := graph.Node(groupID)
	var out []string
	for _, id := range ids {
		if id == groupID || root != nil && graph.Node(id).IsAbove(root) {
			out = append(out, id)
		}
	}
	return out
}

// member returns uid's record in c's root, in being the user's groups at
// or below it and userRev its revision, the path to it and the revision it
// answers at (memberRevision). The caller holds the nesting, the shards of
// the root and of in, and the user (HoldUser).
func (r *Reader) member(graph *nesting.Graph, c *closure, in []string, uid membership.UID, userRev membership.Revision) (membership.Member, []string, bool, membership.Revision) {
	groupID := c.ids[0]
	rev := r.memberRevision(c, r.s.Group(r.s.ShardOf(groupID), groupID), userRev)
	// The graph's node, not c.root: a node made again since the closure
	// was kept (a write rolled back) is the same node, but a closure kept
	// is of the nesting as it is.
	up := upward{root: graph.Node(groupID), ends: map[*nesting.Node]int64{}}
	var holds []*nesting.Node
	var end int64
	direct := false
	for _, id := range in {
		g := r.s.Group(r.s.ShardOf(id), id)
		if g == nil || !g.Members.Contains(uid) {
			continue
		}
		e := int64(forever)
		if id == groupID {
			direct = true
		} else {
			n := graph.Node(id)
			e = up.end(n)
			holds = append(holds, n)
		}
		if at := g.Expiries.Of(uid); at != 0 {
			e = min(e, at)
		}
		end = max(end, e)
	}
	if !direct && len(holds) == 0 {
		return membership.Member{}, nil, false, rev
	}
	via := []string{groupID}
	if !direct {
		via = up.path(holds)
	}
	nicks := r.s.Nicknames()
	nicks.RLock()
	defer nicks.RUnlock()
	return membership.Member{UID: uid, Nickname: nicks.Of(uid), Expires: nesting.TimeOf(endOrZero(end))}, via, true, rev
}

// upward is the part of a closure between its root and the groups that
// hold a user, found walking up from each through the parents that are
// the root or below it: every group on a path from the root down to one
// of them, and no other.
type upward struct {
	root *nesting.Node
	// ends are the nodes reached, the root aside, each with the end of
	// its last path from the root (forever: none ends), as reach gives it.
	ends map[*nesting.Node]int64
	// below are the children of each node reached (the root too) that
	// were reached, in no order.
	below map[*nesting.Node][]*nesting.Node
}

// end returns when n's last path from the root ends, n the root or below
// it.
func (u *upward) end(n *nesting.Node) int64 {
	if n == u.root {
		return forever
	}
	if e, ok := u.ends[n]; ok {
		return e
	}
	var e int64
	for _, p := range n.Parents {
		if p.Node != u.root && !p.Node.IsAbove(u.root) {
			continue
		}
		pe := u.end(p.Node)
		if u.below == nil {
			u.below = map[*nesting.Node][]*nesting.Node{}
		}
		u.below[p.Node] = append(u.below[p.Node], n)
		if p.At != 0 {
			pe = min(pe, p.At)
		}
		e = max(e, pe)
	}
	u.ends[n] = e
	return e
}

// path returns what nesting.Graph.Path gives from the root to holds, all
// reached (end), none the root: breadth first, children in byte order,
// over the nodes reached alone (below), not every child of the closure.
// Every shortest path from the root to a node reached runs through nodes
// reached, and no node outside them leads to one, so that the first found
// is the one Path finds.
func (u *upward) path(holds []*nesting.Node) []string {
	prev := make(map[*nesting.Node]*nesting.Node, len(u.ends))
	layer := []*nesting.Node{u.root}
	for len(layer) > 0 {
		var next []*nesting.Node
		for _, n := range layer {
			children := u.below[n]
			slices.SortFunc(children, func(a, b *nesting.Node) int { return strings.Compare(a.ID, b.ID) })
			for _, c := range children {
				if _, seen := prev[c]; seen {
					continue
				}
				prev[c] = n
				if slices.Contains(holds, c) {
					var path []string
					for at := c; at != nil; at = prev[at] {
						path = append(path, at.ID)
					}
					slices.Reverse(path)
					return path
				}
				next = append(next, c)
			}
		}
		layer = next
	}
	return nil
}
