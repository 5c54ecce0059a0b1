package transitive

import (
	"context"
	"strings"
	"sync"

	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/nesting"
	"example.com/groupmembership/internal/store/memory/packed"
	"example.com/groupmembership/membership"
)

// TransitiveRevision implements membership.Nesting: the latest revision
// of the group and of every group below it, as Revision gives each.
func (r *Reader) TransitiveRevision(_ context.Context, groupID string) (membership.Revision, error) {
	graph, nrev := r.s.RLockNesting()
	defer r.s.RUnlockNesting()
	c := r.closureOf(graph, nrev, groupID)
	r.rlock(c)
	defer r.runlock(c)
	_, rev, _ := r.closureGroups(c, nil)
	return rev, nil
}

// ListTransitiveMembers implements membership.Nesting. The members are
// the closure's groups' members merged, kept (mergedCache) until the
// closure, or a member of a group in it, changes: a page is then a binary
// search and the page, as a direct page is. A read that finds none builds
// it, when it fits; one that cannot merges from opts.After, one cursor a
// group: a seek in each group and the page, in memory of the closure's
// groups and the page's, however many users it holds, and a total that
// walks every member of the closure once, kept (totalCache) as the merge
// is.
func (r *Reader) ListTransitiveMembers(_ context.Context, groupID string, opts membership.ListOptions, list membership.ListFunc) (membership.Revision, error) {
	graph, nrev := r.s.RLockNesting()
	defer r.s.RUnlockNesting()
	c := r.closureOf(graph, nrev, groupID)
	r.rlock(c)
	defer r.runlock(c)
	nicks := r.s.Nicknames()
	nicks.RLock()
	defer nicks.RUnlock()
	if c.root != nil {
		if e := r.cachedMerge(groupID, c); e != nil {
			list(len(e.uids), r.pageMerged(e, opts.After, opts.Limit))
			return r.revision(e), nil
		}
	}
	mg := mergePool.Get().(*merge)
	defer mg.release()
	groups, rev, key := r.closureGroups(c, mg.groups)
	mg.groups = groups
	if c.root == nil {
		g := groups[0]
		if g == nil {
			list(0, func(func(membership.Member) bool) {})
		} else {
			list(g.Members.Len(), g.Records(opts.After, opts.Limit, nicks))
		}
		return rev, nil
	}
	if e := r.buildMerge(groupID, c, groups, mg); e != nil {
		list(len(e.uids), r.pageMerged(e, opts.After, opts.Limit))
		return rev, nil
	}
	ends := c.ends
	total, ok := r.totals.get(groupID, key)
	if !ok {
		total = 0
		for range mg.start(ends, 0).each {
			total++
		}
		r.totals.put(groupID, key, total)
	}
	list(total, func(yield func(membership.Member) bool) {
		n := 0
		for uid, end := range mg.start(ends, opts.After).each {
			if opts.Limit > 0 && n == opts.Limit {
				return
			}
			n++
			if !yield(membership.Member{UID: uid, Nickname: nicks.Of(uid), Expires: nesting.TimeOf(endOrZero(end))}) {
				return
			}
		}
	})
	return rev, nil
}

// endOrZero returns end, or 0 for forever.
func endOrZero(end int64) int64 {
	if end == forever {
		return 0
	}
	return end
}

// merge yields the members of groups, each once, in ascending order, and
// the end of each one's last path: a min-heap of one cursor a group.
type merge struct {
	groups []*group.Group
	ends   []int64 // of the groups' paths from the root
	heap   []mergeCursor
}

type mergeCursor struct {
	c     packed.Cursor
	group int
}

// mergePool keeps merges for reuse: their room is of the largest closure
// read (maxPooledMerge groups at most), not of a request.
var mergePool = sync.Pool{New: func() any { return new(merge) }}

const maxPooledMerge = 1 << 16

// start readies mg, whose groups are set, for a merge of their members
// from after, with the ends of their paths.
func (mg *merge) start(ends []int64, after membership.UID) *merge {
	mg.ends = ends
	mg.heap = mg.heap[:0]
	for i, g := range mg.groups {
		if g == nil || g.Members.Len() == 0 {
			continue
		}
		if c := g.Members.From(after); c.Ok() {
			mg.heap = append(mg.heap, mergeCursor{c: c, group: i})
		}
	}
	for i := len(mg.heap)/2 - 1; i >= 0; i-- {
		mg.down(i)
	}
	return mg
}

// release gives mg back to the pool, holding no group.
func (mg *merge) release() {
	if cap(mg.groups) > maxPooledMerge || cap(mg.heap) > maxPooledMerge {
		return
	}
	clear(mg.groups[:cap(mg.groups)])
	clear(mg.heap[:cap(mg.heap)])
	mg.groups, mg.heap, mg.ends = mg.groups[:0], mg.heap[:0], nil
	mergePool.Put(mg)
}

func (mg *merge) less(i, j int) bool { return mg.heap[i].c.UID() < mg.heap[j].c.UID() }

func (mg *merge) down(i int) {
	h := mg.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		small := l
		if r := l + 1; r < len(h) && mg.less(r, l) {
			small = r
		}
		if !mg.less(small, i) {
			return
		}
		h[i], h[small] = h[small], h[i]
		i = small
	}
}

// each yields each member and the end of its last path (forever: none
// ends).
func (mg *merge) each(yield func(membership.UID, int64) bool) {
	for len(mg.heap) > 0 {
		uid := mg.heap[0].c.UID()
		var end int64
		for len(mg.heap) > 0 && mg.heap[0].c.UID() == uid {
			top := &mg.heap[0]
			g := mg.groups[top.group]
			e := mg.ends[top.group]
			if e > end && g.Expiries.Len() > 0 {
				if at := g.Expiries.Of(uid); at != 0 {
					e = min(e, at)
				}
			}
			end = max(end, e)
			top.c.Next()
			if !top.c.Ok() {
				last := len(mg.heap) - 1
				mg.heap[0] = mg.heap[last]
				mg.heap = mg.heap[:last]
			}
			mg.down(0)
		}
		if !yield(uid, end) {
			return
		}
	}
}

// TransitiveMember implements membership.Nesting.
func (r *Reader) TransitiveMember(_ context.Context, groupID string, uid membership.UID) (membership.Member, []string, bool, membership.Revision, error) {
	graph, nrev := r.s.RLockNesting()
	defer r.s.RUnlockNesting()
	c := r.closureOf(graph, nrev, groupID)
	r.rlock(c)
	defer r.runlock(c)
	// The nicknames are held from before the revision is read, as a list
	// holds them, so that the nickname given is of that revision.
	nicks := r.s.Nicknames()
	nicks.RLock()
	defer nicks.RUnlock()
	groups, rev, _ := r.closureGroups(c, nil)
	ends := c.ends
	holds := map[string]bool{}
	var end int64
	for i, g := range groups {
		if g == nil || !g.Members.Contains(uid) {
			continue
		}
		holds[g.ID] = true
		e := ends[i]
		if at := g.Expiries.Of(uid); at != 0 {
			e = min(e, at)
		}
		end = max(end, e)
	}
	if len(holds) == 0 {
		return membership.Member{}, nil, false, rev, nil
	}
	via := graph.Path(groupID, func(id string) bool { return holds[id] })
	return membership.Member{UID: uid, Nickname: nicks.Of(uid), Expires: nesting.TimeOf(endOrZero(end))}, via, true, rev, nil
}

// totalCache keeps the totals of transitive members, each with the key of
// the closure it counted (closureGroups): a second read of an unchanged
// closure does not walk its members again. It holds at most
// maxCachedTotals, each of a group id of at most MaxGroupIDBytes: a few
// MiB at most.
type totalCache struct {
	// mu guards totals; it is taken with no lock after it.
	mu     sync.Mutex
	totals map[string]cachedTotal
}

type cachedTotal struct {
	key   membership.Revision
	total int
}

const maxCachedTotals = 4096

func (c *totalCache) get(groupID string, key membership.Revision) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.totals[groupID]
	return t.total, ok && t.key == key
}

func (c *totalCache) put(groupID string, key membership.Revision, total int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.totals == nil {
		c.totals = map[string]cachedTotal{}
	}
	if _, ok := c.totals[groupID]; !ok && len(c.totals) >= maxCachedTotals {
		for id := range c.totals { // one, at random
			delete(c.totals, id)
			break
		}
	}
	c.totals[strings.Clone(groupID)] = cachedTotal{key: key, total: total}
}
