package storetest

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"example.com/groupmembership/membership"
)

// The Follower's groups in groups: it keeps each group's direct subgroups
// from the feed, and answers every transitive read by brute force, walking
// every path, so that a store's indexes are checked against a closure
// computed from nothing but the changes.

// applyNesting applies a nesting change (not a batch) to the follower's
// subgroups.
func (f *Follower) applyNesting(c membership.Change) {
	switch c.Op {
	case membership.OpAddGroups, membership.OpReplaceGroups:
		if c.Op == membership.OpReplaceGroups {
			delete(f.subgroups, c.GroupID)
		}
		for _, g := range c.Groups {
			f.setSubgroup(c.GroupID, g.GroupID, g.Expires)
		}
	case membership.OpRemoveGroups, membership.OpExpireGroups:
		for _, g := range c.Groups {
			delete(f.subgroups[c.GroupID], g.GroupID)
		}
		if len(f.subgroups[c.GroupID]) == 0 {
			delete(f.subgroups, c.GroupID)
		}
	}
}

func (f *Follower) setSubgroup(parent, child string, expires time.Time) {
	if f.subgroups[parent] == nil {
		f.subgroups[parent] = map[string]time.Time{}
	}
	f.subgroups[parent][child] = expires
}

// deleteNestings removes group's subgroups from it and it from its
// parents, as a group deletion does.
func (f *Follower) deleteNestings(group string) {
	delete(f.subgroups, group)
	for parent, children := range f.subgroups {
		delete(children, group)
		if len(children) == 0 {
			delete(f.subgroups, parent)
		}
	}
}

// SubgroupsOf returns group's subgroups as Nesting.Subgroups lists them:
// the direct ones with their expiries, or every group below it.
func (f *Follower) SubgroupsOf(group string, transitive bool) []membership.Nested {
	list := []membership.Nested{}
	if !transitive {
		for child, at := range f.subgroups[group] {
			list = append(list, membership.Nested{GroupID: child, Expires: at})
		}
	} else {
		for _, g := range f.below(group) {
			list = append(list, membership.Nested{GroupID: g})
		}
	}
	slices.SortFunc(list, func(a, b membership.Nested) int { return cmp.Compare(a.GroupID, b.GroupID) })
	return list
}

// ParentsOf returns the groups group is in as Nesting.Parents lists them.
func (f *Follower) ParentsOf(group string, transitive bool) []membership.Nested {
	list := []membership.Nested{}
	for parent, children := range f.subgroups {
		if at, ok := children[group]; ok && !transitive {
			list = append(list, membership.Nested{GroupID: parent, Expires: at})
		} else if transitive && slices.Contains(f.below(parent), group) {
			list = append(list, membership.Nested{GroupID: parent})
		}
	}
	slices.SortFunc(list, func(a, b membership.Nested) int { return cmp.Compare(a.GroupID, b.GroupID) })
	return list
}

// below returns every group below group, each once, in byte order.
func (f *Follower) below(group string) []string {
	seen := map[string]bool{}
	var walk func(g string)
	walk = func(g string) {
		for child := range f.subgroups[g] {
			if !seen[child] {
				seen[child] = true
				walk(child)
			}
		}
	}
	walk(group)
	delete(seen, group) // only if the nesting has a cycle, which no store allows
	return slices.Sorted(maps.Keys(seen))
}

// forever stands for a path that never ends.
var forever = time.Unix(1<<40, 0)

// paths calls fn with every path of groups from group down, group
// included, and the time it ends (forever when it does not).
func (f *Follower) paths(group string, fn func(path []string, ends time.Time)) {
	var walk func(path []string, ends time.Time)
	walk = func(path []string, ends time.Time) {
		fn(path, ends)
		last := path[len(path)-1]
		for child, at := range f.subgroups[last] {
			if slices.Contains(path, child) {
				continue // no store allows a cycle; a follower must not loop on one
			}
			e := ends
			if !at.IsZero() && at.Before(e) {
				e = at
			}
			walk(append(slices.Clone(path), child), e)
		}
	}
	walk([]string{group}, forever)
}

// TransitiveMembersOf returns what ListTransitiveMembers lists for group:
// each user of it or of a group below once, with the end of its last path
// (zero when one never ends).
func (f *Follower) TransitiveMembersOf(group string) []membership.Member {
	ends := map[membership.UID]time.Time{}
	f.paths(group, func(path []string, pathEnds time.Time) {
		last := path[len(path)-1]
		for uid := range f.members[last] {
			e := pathEnds
			if at := f.expiries[last][uid]; !at.IsZero() && at.Before(e) {
				e = at
			}
			if old, ok := ends[uid]; !ok || e.After(old) {
				ends[uid] = e
			}
		}
	})
	list := []membership.Member{}
	for uid, e := range ends {
		if e.Equal(forever) {
			e = time.Time{}
		}
		list = append(list, membership.Member{UID: uid, Nickname: f.nicknames[uid], Expires: e})
	}
	slices.SortFunc(list, func(a, b membership.Member) int { return cmp.Compare(a.UID, b.UID) })
	return list
}

// TransitiveMemberOf returns what TransitiveMember returns for uid in
// group: its record and the shortest path down to a group that holds it,
// the smallest in byte order of those.
func (f *Follower) TransitiveMemberOf(group string, uid membership.UID) (membership.Member, []string, bool) {
	var via []string
	f.paths(group, func(path []string, _ time.Time) {
		if !f.members[path[len(path)-1]][uid] {
			return
		}
		if via == nil || len(path) < len(via) || len(path) == len(via) && slices.Compare(path, via) < 0 {
			via = path
		}
	})
	if via == nil {
		return membership.Member{}, nil, false
	}
	for _, m := range f.TransitiveMembersOf(group) {
		if m.UID == uid {
			return m, via, true
		}
	}
	panic("a member with a path is listed")
}

// groupsKnown returns every group the follower knows of: with members,
// with subgroups, or nested.
func (f *Follower) groupsKnown() []string {
	seen := map[string]bool{}
	for g, members := range f.members {
		if len(members) > 0 {
			seen[g] = true
		}
	}
	for g, children := range f.subgroups {
		seen[g] = true
		for c := range children {
			seen[c] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// TransitiveGroupsOf returns every group uid is in, directly or through
// nesting, in byte order.
func (f *Follower) TransitiveGroupsOf(uid membership.UID) []string {
	out := []string{}
	for _, g := range f.groupsKnown() {
		if _, _, ok := f.TransitiveMemberOf(g, uid); ok {
			out = append(out, g)
		}
	}
	return out
}
