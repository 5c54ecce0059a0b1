package group

import (
	"slices"
	"time"

	"example.com/groupmembership/internal/store/memory/expiry"
	"example.com/groupmembership/internal/store/memory/nicknames"
	"example.com/groupmembership/membership"
)

// What a write of users would change in a group, read without changing
// it: the store asks before it logs a write. g may be nil (a group with
// neither members nor subgroups); the caller holds its shard.

// HoldsAll reports whether every user is a member of g and already has the
// nickname it gives in nicks, if any, and the expiry.
func (g *Group) HoldsAll(users []membership.User, nicks *nicknames.Directory) bool {
	if g == nil {
		return false
	}
	for _, u := range users {
		if !g.Members.Contains(u.UID) || u.Expiry.TTL != 0 { // a TTL counts from the commit: it changes the expiry
			return false
		}
	}
	return !nicks.Changes(users) && !g.ChangesExpiries(users, time.Time{})
}

// IsExactly reports whether g has exactly the users as members, with the
// nicknames and expiries they give: whether replacing its members by them
// would change nothing.
func (g *Group) IsExactly(users []membership.User, nicks *nicknames.Directory) bool {
	size := 0
	if g != nil {
		size = g.Members.Len()
	}
	if len(users) < size {
		return false // fewer users than members, repeats or not
	}
	uids := make([]membership.UID, len(users))
	for i, u := range users {
		uids[i] = u.UID
	}
	slices.Sort(uids)
	if len(slices.Compact(uids)) != size {
		return false
	}
	return size == 0 || g.HoldsAll(users, nicks)
}

// ChangesExpiries reports whether setting the expiries users give, for a
// write committed at commit (zero: now), would change any expiry of g: a
// user who is not a member yet counts when the write gives them one.
func (g *Group) ChangesExpiries(users []membership.User, commit time.Time) bool {
	var e expiry.Members
	if g != nil {
		e = g.Expiries
	}
	return e.Changes(users, commit)
}
