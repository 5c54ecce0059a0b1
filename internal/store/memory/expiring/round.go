package expiring

import (
	"context"
	"fmt"
	"slices"

	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/shards"
	"example.com/groupmembership/membership"
)

// A round of the expirer is many expire writes (membership.OpExpire), one
// or more a group. Applied one after another, each removes its pairs from
// the reverse index where they lie, scattered over every reverse shard: a
// search and a scan of a chunk that is rarely in the cache, about 300 ns a
// membership, most of what an expiry costs. Applied together, each is
// still a change of its own, with its own revision, in the order given,
// but their pairs are removed shard by shard in ascending order, where
// those of one round lie close together: half the time.

// WriteExpiries applies ws, expire writes (membership.OpExpire), as Write
// would one after another, each a change of its own with its own revision
// in the order given, each change with its write's Actor and Time (or the
// time it is recorded, as Write), and returns their results. It is how the
// expirer applies a round. Any other write (another op, or an expire with
// an Idempotency key) is refused, and nothing applied.
func (q *Queue) WriteExpiries(_ context.Context, ws []membership.Write) ([]membership.Result, error) {
	if err := onlyExpires(ws); err != nil {
		return nil, err
	}
	return q.expireRuns(ws, func(w membership.Write) feed.Stamp { return feed.StampOf(w, true) })
}

// ApplyExpiries is WriteExpiries for a store that replays its own log (see
// Apply): each change takes its write's Time as it is.
func (q *Queue) ApplyExpiries(ws []membership.Write) ([]membership.Result, error) {
	if err := onlyExpires(ws); err != nil {
		return nil, err
	}
	return q.expireRuns(ws, func(w membership.Write) feed.Stamp { return feed.StampOf(w, false) })
}

// expireRuns applies ws in order: each run of expires of memberships
// together (expireAll), each expiry of nestings (OpExpireGroups) alone.
func (q *Queue) expireRuns(ws []membership.Write, stampOf func(membership.Write) feed.Stamp) ([]membership.Result, error) {
	results := make([]membership.Result, 0, len(ws))
	for i := 0; i < len(ws); {
		if ws[i].Op == membership.OpExpireGroups {
			res, err := q.s.WriteNesting(ws[i], stampOf(ws[i]))
			if err != nil {
				return results, err
			}
			results = append(results, res)
			i++
			continue
		}
		j := i
		for j < len(ws) && ws[j].Op == membership.OpExpire {
			j++
		}
		results = append(results, q.expireAll(ws[i:j], stampOf)...)
		i = j
	}
	return results, nil
}

// onlyExpires returns an error unless every write of ws is an expire (of
// memberships or nestings) without an Idempotency key (the expirer's).
func onlyExpires(ws []membership.Write) error {
	for i, w := range ws {
		if w.Op != membership.OpExpire && w.Op != membership.OpExpireGroups || w.Idem.Key != "" {
			return fmt.Errorf("write %d: not an expire without an Idempotency key", i)
		}
	}
	return nil
}

// expireAll applies ws, expire writes, as one after another would, each
// stamped by stampOf. It holds the shards of their groups throughout, and
// every reverse shard they touch from the first pair removed until the
// last revision is recorded, as removeHeld does for one.
func (q *Queue) expireAll(ws []membership.Write, stampOf func(membership.Write) feed.Stamp) []membership.Result {
	results := make([]membership.Result, len(ws))
	if len(ws) == 0 {
		return results
	}
	groups, unlock := q.s.LockGroups(len(ws), func(i int) string { return ws[i].GroupID })
	defer unlock()

	removed := q.expireMembers(ws, groups)
	if !slices.ContainsFunc(removed, func(uids []membership.UID) bool { return len(uids) > 0 }) {
		for i, g := range groups {
			results[i].Revision = q.s.RevisionOf(g)
		}
		return results
	}
	// Their pairs leave the reverse index shard by shard, each shard's in
	// order; a user whose last pair left is in no group, as the last write
	// that removed one of the user's pairs says.
	var rbuf [4]uint64
	inNoGroup, locked := q.reverse.RemoveRound(removed, func(i int) uint32 { return groups[i].Number }, rbuf[:])
	dropped := q.recordExpiries(ws, groups, removed, inNoGroup, stampOf, results)
	q.reverse.Unlock(locked)
	for _, g := range dropped {
		q.s.Drop(g, g.Revision)
	}
	return results
}

// expireMembers takes each write's members that are due out of its group
// (groups, nil: none), each group's writes in the order given (a group
// emptied by one write has none for the next of it), the groups side by
// side on every core. It returns the uids each write removed, sorted. The
// caller holds the groups' shards.
func (q *Queue) expireMembers(ws []membership.Write, groups []*group.Group) (removed [][]membership.UID) {
	var byGroup [][]int // the writes of each group, in order
	index := make(map[*group.Group]int)
	for i, g := range groups {
		if g == nil {
			continue
		}
		k, ok := index[g]
		if !ok {
			k = len(byGroup)
			index[g] = k
			byGroup = append(byGroup, nil)
		}
		byGroup[k] = append(byGroup[k], i)
	}
	removed = make([][]membership.UID, len(ws))
	shards.Parallel(shards.Workers(len(byGroup)), len(byGroup), func(_, k int) {
		for _, i := range byGroup[k] {
			g, w := groups[i], ws[i]
			if g.Expiries.Len() == 0 || len(w.UIDs) == 0 {
				continue
			}
			due := g.Expiries.Due(w.UIDs, w.AsOf)
			out := due[:0]
			for _, uid := range due {
				if g.Members.Remove(uid) {
					out = append(out, uid)
				}
			}
			if len(out) > 0 {
				q.due.EndExpired(&g.Expiries, out)
				removed[i] = out
			}
		}
	})
	return removed
}

// recordExpiries records each write's change, in the order given, into
// results, and returns the groups to drop, in the order of their last
// change: a group is dropped when the last write that ends members of it
// leaves it empty. A write that ends none is answered the revision it
// would have been then. The caller holds the groups' shards and the
// reverse shards of the uids removed.
func (q *Queue) recordExpiries(ws []membership.Write, groups []*group.Group, removed, inNoGroup [][]membership.UID,
	stampOf func(membership.Write) feed.Stamp, results []membership.Result) (dropped []*group.Group) {
	lastOf := make(map[*group.Group]int)
	for i, g := range groups {
		if len(removed[i]) > 0 {
			lastOf[g] = i
		}
	}
	revisionNow := func(g *group.Group) membership.Revision {
		if g == nil || slices.Contains(dropped, g) {
			r := q.s.RevisionOf(nil)
			if len(dropped) > 0 {
				r = max(r, dropped[len(dropped)-1].Revision)
			}
			return r
		}
		return q.s.RevisionOf(g)
	}
	for i, w := range ws {
		g := groups[i]
		if len(removed[i]) == 0 {
			results[i].Revision = revisionNow(g)
			continue
		}
		cleared := q.nicknames.Clear(inNoGroup[i])
		q.members.Add(-int64(len(removed[i])))
		rev := q.s.Record(membership.Change{Op: membership.OpExpire, GroupID: g.ID, UIDs: group.Tight(removed[i]), Nicknames: cleared}, stampOf(w))
		results[i] = membership.Result{Count: len(removed[i]), Revision: rev}
		g.Revision = rev
		if lastOf[g] == i && g.Vacant() {
			dropped = append(dropped, g)
		}
	}
	return dropped
}
