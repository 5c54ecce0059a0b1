package transitive

import (
	"context"
	"slices"
	"strings"
	"sync"

	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/packed"
	"example.com/groupmembership/membership"
)

// NestingRevision implements membership.Nesting.
func (r *Reader) NestingRevision(context.Context) (membership.Revision, error) {
	_, rev := r.s.RLockNesting()
	r.s.RUnlockNesting()
	return rev, nil
}

// TransitiveRevision implements membership.Nesting: the revision
// ListTransitiveMembers answers at, were it to read now, from the kept
// parts of its key (membersKey): it walks the groups of the shards written
// since the last read of the closure alone.
func (r *Reader) TransitiveRevision(_ context.Context, groupID string) (membership.Revision, error) {
	graph, nrev := r.s.RLockNesting()
	defer r.s.RUnlockNesting()
	c := r.closureOf(graph, nrev, groupID)
	return r.withNicknames(r.membersKey(c, false)), nil
}

// ListTransitiveMembers implements membership.Nesting. The members are
// the closure's groups' members merged, kept (mergedCache) until the
// closure, or a member of a group in it, changes: a page is then a binary
// search and the page, as a direct page is. A read that finds none builds
// it, when it fits; one that cannot merges from opts.After, one cursor a
// group, and counts every member of the closure once, keeping the total
// (totalCache) as the merge is. It reads in pieces (pieces.go): no writer
// waits for more than one.
func (r *Reader) ListTransitiveMembers(_ context.Context, groupID string, opts membership.ListOptions, list membership.ListFunc) (membership.Revision, error) {
	for restarts := 0; ; restarts++ {
		p := &pieces{r: r, groupID: groupID, hold: restarts >= maxRestarts}
		total, page, rev, ok := p.list(opts)
		p.unlock()
		if ok {
			list(total, slices.Values(page))
			return rev, nil
		}
	}
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

// memberRevision returns the revision TransitiveMember answers a user's
// record in c's root at, root being the root's group and userRev the
// user's revision: that of the latest change of the nestings below the
// root, of the user's groups, ends and nickname, and of the change that
// made the root or last left it in no nesting (before which its node,
// made again since, knew nothing); 0 when the root is absent: it holds no
// one, as at revision 0. The caller holds the root's shard.
func (r *Reader) memberRevision(c *closure, root *group.Group, userRev membership.Revision) membership.Revision {
	if root == nil {
		return 0
	}
	return max(c.down, userRev, r.s.Unnested(root))
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
