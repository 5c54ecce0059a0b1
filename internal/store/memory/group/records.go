package group

import (
	"iter"

	"example.com/groupmembership/internal/store/memory/expiry"
	"example.com/groupmembership/internal/store/memory/nicknames"
	"example.com/groupmembership/membership"
)

// Records yields the members of g above after, each with its nickname in
// nicks and its expiry, at most limit of them (0: all). The caller holds
// g's shard and the nicknames.
func (g *Group) Records(after membership.UID, limit int, nicks *nicknames.Directory) iter.Seq[membership.Member] {
	return func(yield func(membership.Member) bool) {
		expiries := g.Expiries.Cursor(after)
		n := 0
		g.Members.EachAbove(after, func(uid membership.UID) bool {
			if limit > 0 && n == limit {
				return false
			}
			n++
			member := membership.Member{UID: uid, Nickname: nicks.Of(uid)}
			if !expiries.Done() {
				member.Expires = expiry.Time(expiries.Of(uid))
			}
			return yield(member)
		})
	}
}
