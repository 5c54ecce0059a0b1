package memory

import (
	"time"

	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/memory/expiry"
	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/membership"
)

// Expiries (membership.OpExpire): a group keeps its members' expiries
// (expiry.Members), and the store every one of them in its due set, by
// time (expiry.Due; package expiry says how, and why an expired
// membership's entry may stay behind).

// ExpiryQueue is the due set's side of store.Expiring, which Store has
// from the expiring.Queue it embeds. The durable and PostgreSQL stores
// embed their Store as one, and apply the OpExpire writes it gives through
// their logs, as any other write.
type ExpiryQueue interface {
	DueExpiries(now time.Time, max int) []store.Due
	RequeueExpiries(due []store.Due)
	NextExpiry() (time.Time, bool)
	ExpiryCount() int64
	ExpiryWakeup() <-chan struct{}
}

// expire removes, from the group, each of uids whose expiry is at or
// before asOf, as a remove does, under OpExpire: one whose expiry was
// extended or ended since it was found due stays.
func (m *Store) expire(groupID string, uids []membership.UID, asOf time.Time, st feed.Stamp) membership.Result {
	s := m.shardOf(groupID)
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups.Get(groupID)
	if g == nil || g.Expiries.Len() == 0 || len(uids) == 0 {
		return membership.Result{Revision: m.revisionOf(g)}
	}
	return m.removeHeld(s, g, g.Expiries.Due(uids, asOf), membership.OpExpire, st)
}

// setExpiries sets the expiries users give (the last of each user's) to
// those of them who are members of g, for a write committed at commit
// (zero: now), and returns those it changed, ascending by uid. The caller
// holds g's shard.
func (m *Store) setExpiries(g *group.Group, users []membership.User, commit time.Time) []membership.MemberExpiry {
	return m.due.SetAll(&g.Expiries, g.Number, users, commit, g.Members.Contains)
}

// changesExpiries reports whether setExpiries would change any expiry of
// g (nil: no group), reading only: a user who is not a member yet counts
// when the write gives them an expiry. The caller holds g's shard.
func changesExpiries(g *group.Group, users []membership.User, commit time.Time) bool {
	var e expiry.Members
	if g != nil {
		e = g.Expiries
	}
	return e.Changes(users, commit)
}
