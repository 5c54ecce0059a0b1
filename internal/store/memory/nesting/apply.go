package nesting

import (
	"slices"
	"strings"
	"time"

	"example.com/groupmembership/membership"
)

// MillisOf returns an expiry as the graph keeps it: Unix milliseconds, 0
// for none.
func MillisOf(at time.Time) int64 {
	if at.IsZero() {
		return 0
	}
	return at.UnixMilli()
}

// TimeOf returns a nesting's end as the reads give it: zero for none.
func TimeOf(at int64) time.Time {
	if at == 0 {
		return time.Time{}
	}
	return time.UnixMilli(at).UTC()
}

// Apply applies the nesting write w (OpAddGroups, OpRemoveGroups,
// OpReplaceGroups, OpExpireGroups) to the graph, checking each nesting it
// makes against cycles, maxDepth and maxAncestors as it goes, for a write
// committed at commit, and returns its result and its change (Op "" when
// it changed nothing). On an error it has applied part of w: the caller
// has the graph in a transaction (Begin) and rolls it back.
func (g *Graph) Apply(w membership.Write, maxDepth, maxAncestors int, commit time.Time) (membership.Result, membership.Change, error) {
	subs := membership.ResolveSubgroupTTLs(w.Subgroups, commit)
	if w.Op == membership.OpReplaceGroups {
		return g.replace(w.GroupID, subs, maxDepth, maxAncestors)
	}
	parent := w.GroupID
	changed := map[string]int64{}
	var res membership.Result
	switch w.Op {
	case membership.OpAddGroups:
		for _, sg := range subs {
			e, exists := g.Node(parent).Child(sg.GroupID)
			at := MillisOf(sg.Expiry.At)
			switch {
			case !exists:
				if !sg.Expiry.Set {
					at = 0
				}
				if err := g.nest(parent, sg.GroupID, at, maxDepth, maxAncestors); err != nil {
					return membership.Result{}, membership.Change{}, err
				}
				res.Count++
				changed[sg.GroupID] = at
			case sg.Expiry.Set && at != e.At:
				g.Set(parent, sg.GroupID, at)
				changed[sg.GroupID] = at
			}
		}
	case membership.OpRemoveGroups, membership.OpExpireGroups:
		asOf := MillisOf(w.AsOf)
		for _, sg := range subs {
			e, exists := g.Node(parent).Child(sg.GroupID)
			if !exists || w.Op == membership.OpExpireGroups && (e.At == 0 || e.At > asOf) {
				continue
			}
			g.Remove(parent, sg.GroupID)
			res.Count++
			changed[sg.GroupID] = 0
		}
	}
	if len(changed) == 0 {
		return res, membership.Change{}, nil
	}
	groups := make([]membership.Nested, 0, len(changed))
	for id, at := range changed {
		groups = append(groups, membership.Nested{GroupID: id, Expires: TimeOf(at)})
	}
	slices.SortFunc(groups, func(a, b membership.Nested) int { return strings.Compare(a.GroupID, b.GroupID) })
	return res, membership.Change{Op: w.Op, GroupID: parent, Groups: groups}, nil
}

// nest makes the new nesting of child in parent, ending at at, checked
// against cycles and maxDepth before it is made and maxAncestors after:
// on an error after, the caller rolls the graph back.
func (g *Graph) nest(parent, child string, at int64, maxDepth, maxAncestors int) error {
	if err := g.Check(parent, child, maxDepth); err != nil {
		return err
	}
	g.Set(parent, child, at)
	return g.CheckAncestors(parent, child, maxAncestors)
}

// replace makes parent's subgroups exactly subs, as Apply does for an
// OpReplaceGroups write.
func (g *Graph) replace(parent string, subs []membership.Subgroup, maxDepth, maxAncestors int) (membership.Result, membership.Change, error) {
	var res membership.Result
	want := make(map[string]int64, len(subs))
	var order []string
	for _, sg := range subs {
		old, seen := want[sg.GroupID]
		if !seen {
			order = append(order, sg.GroupID)
			e, _ := g.Node(parent).Child(sg.GroupID)
			old = e.At
		}
		if sg.Expiry.Set {
			old = MillisOf(sg.Expiry.At)
		}
		want[sg.GroupID] = old
	}
	if n := g.Node(parent); n != nil {
		var gone []string
		for _, e := range n.Children {
			if _, kept := want[e.Node.ID]; !kept {
				gone = append(gone, e.Node.ID)
			}
		}
		for _, id := range gone {
			g.Remove(parent, id)
			res.Removed++
		}
	}
	altered := res.Removed > 0
	for _, id := range order {
		e, exists := g.Node(parent).Child(id)
		switch {
		case !exists:
			if err := g.nest(parent, id, want[id], maxDepth, maxAncestors); err != nil {
				return membership.Result{}, membership.Change{}, err
			}
			res.Count++
			altered = true
		case e.At != want[id]:
			g.Set(parent, id, want[id])
			altered = true
		}
	}
	if !altered {
		return res, membership.Change{}, nil
	}
	slices.Sort(order)
	groups := make([]membership.Nested, len(order))
	for i, id := range order {
		groups[i] = membership.Nested{GroupID: id, Expires: TimeOf(want[id])}
	}
	return res, membership.Change{Op: membership.OpReplaceGroups, GroupID: parent, Groups: groups}, nil
}

// Unnest removes id's subgroups from it and it from its parents, as a
// deletion of id does, and returns its parents.
//
// Its parents go first, all at once: id then has no ancestors, which its
// subgroups and the groups below them lose in one walk, and each subgroup
// then loses id alone.
func (g *Graph) Unnest(id string) []string {
	n := g.Node(id)
	if n == nil {
		return nil
	}
	parents := n.ParentIDs()
	// Last first, so that each leaves the end of the lists.
	for i := len(n.Parents) - 1; i >= 0; i-- {
		g.unlink(n.Parents[i].Node, n)
	}
	g.removeAbove(nil, n)
	for i := len(n.Children) - 1; i >= 0; i-- {
		c := n.Children[i].Node
		g.unlink(n, c)
		g.removeAbove(n, c)
		g.drop(c)
	}
	for _, p := range parents {
		g.drop(g.nodes[p])
	}
	g.drop(n)
	return parents
}

// ParentIDs returns the ids of the groups n (nil: none) is directly in.
func (n *Node) ParentIDs() []string {
	if n == nil {
		return nil
	}
	ids := make([]string, len(n.Parents))
	for i, e := range n.Parents {
		ids[i] = e.Node.ID
	}
	return ids
}

// SubgroupCount returns how many subgroups n (nil: none) has.
func (n *Node) SubgroupCount() int {
	if n == nil {
		return 0
	}
	return len(n.Children)
}
