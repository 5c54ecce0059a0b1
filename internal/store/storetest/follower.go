package storetest

import (
	"cmp"
	"context"
	"iter"
	"slices"
	"time"

	"example.com/groupmembership/membership"
)

// Follower is a client that keeps every group from lists and the feed, as
// the feed recipe of docs/reference.md says: per group its members, per user its nickname.
type Follower struct {
	members   map[string]map[membership.UID]bool
	nicknames map[membership.UID]string
	// expiries are the members' that have one, per group.
	expiries map[string]map[membership.UID]time.Time
	// subgroups are the groups nested in each group, with when each
	// nesting ends (zero: never).
	subgroups map[string]map[string]time.Time
}

// setExpiry gives uid's membership of group the expiry at (zero: none).
func (f *Follower) setExpiry(group string, uid membership.UID, at time.Time) {
	if at.IsZero() {
		delete(f.expiries[group], uid)
		return
	}
	if f.expiries[group] == nil {
		f.expiries[group] = map[membership.UID]time.Time{}
	}
	f.expiries[group][uid] = at
}

func (f *Follower) setNicknames(ms []membership.Member) {
	for _, m := range ms {
		if m.Nickname == "" {
			delete(f.nicknames, m.UID)
		} else {
			f.nicknames[m.UID] = m.Nickname
		}
	}
}

// Relist replaces the Follower's group with the store's list of it.
func (f *Follower) Relist(s membership.Store, group string) error {
	var got []membership.Member
	_, err := s.ListMembers(context.Background(), group, membership.ListOptions{}, func(_ int, members iter.Seq[membership.Member]) {
		for m := range members {
			got = append(got, m)
		}
	})
	if err != nil {
		return err
	}
	f.members[group] = map[membership.UID]bool{}
	delete(f.expiries, group)
	for _, m := range got {
		f.members[group][m.UID] = true
		f.setExpiry(group, m.UID, m.Expires)
	}
	f.setNicknames(got)
	return nil
}

// Apply applies a change of the feed to the follower's groups and nicknames.
// After a replace, a group deletion, a user removed everywhere and a batch,
// which do not list the nicknames they clear, it forgets every user in none
// of its groups, as the feed's documentation says.
func (f *Follower) Apply(c membership.Change) {
	if c.Op == membership.OpBatch {
		// Its writes in order, then the users it left in no group are
		// forgotten: a batch's removes list no nickname they clear.
		for _, sub := range c.Changes {
			f.apply(sub)
		}
		f.forgetUsersInNoGroup()
		return
	}
	f.apply(c)
	if c.Op == membership.OpReplace || c.Op == membership.OpDeleteGroup || c.Op == membership.OpRemoveUser || c.Op == membership.OpDeleteUser {
		f.forgetUsersInNoGroup()
	}
}

// ApplyAll applies changes, in order, as Apply does.
func (f *Follower) ApplyAll(changes []membership.Change) {
	for _, c := range changes {
		f.Apply(c)
	}
}

// apply applies one change, not a batch, to the follower's groups and
// nicknames.
func (f *Follower) apply(c membership.Change) {
	if membership.IsNestingOp(c.Op) {
		f.applyNesting(c)
		return
	}
	switch c.Op {
	case membership.OpReplace:
		f.members[c.GroupID] = map[membership.UID]bool{}
		for _, uid := range c.UIDs {
			f.members[c.GroupID][uid] = true
		}
		for uid := range f.expiries[c.GroupID] { // those it kept keep theirs
			if !f.members[c.GroupID][uid] {
				delete(f.expiries[c.GroupID], uid)
			}
		}
	case membership.OpDeleteGroup:
		delete(f.members, c.GroupID)
		delete(f.expiries, c.GroupID)
		f.deleteNestings(c.GroupID)
	case membership.OpRemoveUser, membership.OpDeleteUser:
		f.removeEverywhere(c.UIDs[0])
	case membership.OpSetUser:
		// An inactive account is in no group; its display name is the
		// user's nickname.
		if !c.Account.Active {
			f.removeEverywhere(c.UIDs[0])
		}
		f.setNicknames([]membership.Member{{UID: c.UIDs[0], Nickname: c.Account.DisplayName}})
	case membership.OpSetGroup: // attributes: no list changes
	default:
		if f.members[c.GroupID] == nil {
			f.members[c.GroupID] = map[membership.UID]bool{}
		}
		for _, uid := range c.UIDs {
			if c.Op == membership.OpAdd {
				f.members[c.GroupID][uid] = true
			} else { // a remove, an expiry
				delete(f.members[c.GroupID], uid)
				delete(f.expiries[c.GroupID], uid)
			}
		}
	}
	for _, e := range c.Expiries {
		f.setExpiry(c.GroupID, e.UID, e.At)
	}
	f.setNicknames(c.Nicknames)
}

// removeEverywhere takes uid out of every group.
func (f *Follower) removeEverywhere(uid membership.UID) {
	for _, members := range f.members {
		delete(members, uid)
	}
	for _, expiries := range f.expiries {
		delete(expiries, uid)
	}
}

// forgetUsersInNoGroup forgets the nicknames of users in none of the
// follower's groups.
func (f *Follower) forgetUsersInNoGroup() {
	for uid := range f.nicknames {
		in := false
		for _, members := range f.members {
			if members[uid] {
				in = true
				break
			}
		}
		if !in {
			delete(f.nicknames, uid)
		}
	}
}

// ListOf returns the Follower's list of group, as the store lists it.
func (f *Follower) ListOf(group string) []membership.Member {
	list := []membership.Member{}
	for uid := range f.members[group] {
		list = append(list, membership.Member{UID: uid, Nickname: f.nicknames[uid], Expires: f.expiries[group][uid]})
	}
	slices.SortFunc(list, func(a, b membership.Member) int { return cmp.Compare(a.UID, b.UID) })
	return list
}

// NewFollower returns a follower that knows nothing yet.
func NewFollower() *Follower {
	return &Follower{members: map[string]map[membership.UID]bool{}, nicknames: map[membership.UID]string{},
		expiries: map[string]map[membership.UID]time.Time{}, subgroups: map[string]map[string]time.Time{}}
}
