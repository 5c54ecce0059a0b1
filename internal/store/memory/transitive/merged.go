package transitive

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/nesting"
	"example.com/groupmembership/membership"
)

// mergedCache keeps, for the closures read last, their members merged
// (merge.each) into flat sorted slices, with the end of each one's last
// path: a page of transitive members is then a binary search and the page,
// as a direct page is, instead of a seek in each group of the closure and a
// heap. An entry is of one closure (the nesting at one revision) and of its
// groups as they were: it holds their *group.Group and the revision of
// each, so that a read checks it with a pointer load a group, no map
// lookup (a group dropped frees its slot, which then holds another group's
// id or none, whatever the revisions: the read checks the id too; a group
// absent then is looked up). A write takes no part of it: a user's add
// costs what it did, and the next read of a closure it changed merges
// again. Nicknames are not kept: a read gives them as they are.
//
// It holds at most budget bytes of entries (mergedBytes), an entry at most
// half of them, and one read at a time builds one: a closure whose
// members would take more, or read while another is built, is merged at
// the read (merge), from opts.After to the page's end, as it was before.
type mergedCache struct {
	// mu guards entries and bytes; it is taken with no lock after it.
	mu      sync.Mutex
	entries map[string]*merged
	bytes   int64
	// budget is the bytes entries may hold, fixed at New.
	budget int64
	// building is set while a read builds an entry: one at a time, so
	// that what reads allocate for entries not yet kept is bounded too.
	building atomic.Bool
	// hits and misses count the reads that used an entry and those that
	// found none fit, for tests.
	hits, misses atomic.Int64
}

// defaultMergedBudget is mergedCache.budget: 1,000,000 members with an
// end each in 1,000 groups take 16.8 MB.
const defaultMergedBudget = 64 << 20

// merged is a closure's members merged, never written once built.
type merged struct {
	c      *closure
	groups []*group.Group // of c.ids; nil: the group was absent
	revs   []membership.Revision
	// key is the latest of revs; absent that some group was.
	key    membership.Revision
	absent bool
	uids   []membership.UID
	// ends are the ends of uids' last paths (forever: none ends); nil when
	// none ends.
	ends []int64
}

// pinnedGroupBytes is what a group an entry holds may keep from the
// collector once dropped: the group (112 bytes), its id and the last chunk
// of its members, emptied (packed.maxChunkBytes).
const pinnedGroupBytes = 128 + membership.MaxGroupIDBytes + 384

// mergedBytes returns the bytes an entry of g groups and n members takes,
// ends included, with its key and the groups it may pin.
func mergedBytes(groupID string, g, n int, ends bool) int64 {
	b := int64(len(groupID)) + 128 + int64(g)*(8+8+pinnedGroupBytes) + int64(n)*8
	if ends {
		b += int64(n) * 8
	}
	return b
}

func (e *merged) bytes(groupID string) int64 {
	return mergedBytes(groupID, len(e.groups), len(e.uids), e.ends != nil)
}

// current reports whether e is of the closure c and of its groups as they
// are. The caller holds the nesting and the shards of c's groups.
func (r *Reader) current(e *merged, c *closure) bool {
	if e.c.rev != c.rev || len(e.groups) != len(c.ids) {
		return false
	}
	for i, g := range e.groups {
		if g == nil {
			if r.s.Group(e.c.shards[i], e.c.ids[i]) != nil {
				return false
			}
		} else if g.ID != e.c.ids[i] || g.Revision != e.revs[i] {
			return false
		}
	}
	return true
}

// cachedMerge returns groupID's entry when it is current. The caller holds
// the nesting and the shards of c's groups.
func (r *Reader) cachedMerge(groupID string, c *closure) *merged {
	mc := &r.merged
	mc.mu.Lock()
	e := mc.entries[groupID]
	mc.mu.Unlock()
	if e == nil || !r.current(e, c) {
		mc.misses.Add(1)
		return nil
	}
	mc.hits.Add(1)
	return e
}

// buildMerge merges the members of groups, c's groups as closureGroups
// gave them, into an entry and keeps it; it returns nil, building nothing,
// when the entry would take more than half the budget, or another read
// builds one. The caller holds the nesting and the shards of c's groups.
func (r *Reader) buildMerge(groupID string, c *closure, groups []*group.Group, mg *merge) *merged {
	mc := &r.merged
	n := 0
	for _, g := range groups {
		if g != nil {
			n += g.Members.Len() // at least the merged members
		}
	}
	if mergedBytes(groupID, len(groups), n, true) > mc.budget/2 || !mc.building.CompareAndSwap(false, true) {
		return nil
	}
	defer mc.building.Store(false)
	e := &merged{c: c, groups: slices.Clone(groups), revs: make([]membership.Revision, len(groups))}
	for i, g := range groups {
		if g != nil {
			e.revs[i] = g.Revision
			e.key = max(e.key, g.Revision)
		} else {
			e.absent = true
		}
	}
	uids := make([]membership.UID, 0, n)
	var ends []int64
	for uid, end := range mg.start(c.ends, 0).each {
		if end != forever && ends == nil {
			ends = make([]int64, len(uids), cap(uids))
			for i := range ends {
				ends[i] = forever
			}
		}
		uids = append(uids, uid)
		if ends != nil {
			ends = append(ends, end)
		}
	}
	e.uids = slices.Clip(uids)
	if ends != nil {
		e.ends = slices.Clip(ends)
	}
	mc.put(groupID, e)
	return e
}

// put keeps e as groupID's entry, evicting others at random until it fits.
func (mc *mergedCache) put(groupID string, e *merged) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if mc.entries == nil {
		mc.entries = map[string]*merged{}
	}
	if old := mc.entries[groupID]; old != nil {
		mc.bytes -= old.bytes(groupID)
		delete(mc.entries, groupID)
	}
	size := e.bytes(groupID)
	for id, old := range mc.entries {
		if mc.bytes+size <= mc.budget {
			break
		}
		mc.bytes -= old.bytes(id)
		delete(mc.entries, id)
	}
	if mc.bytes+size > mc.budget {
		return
	}
	mc.entries[strings.Clone(groupID)] = e
	mc.bytes += size
}

// revision returns what closureGroups gives for e's groups, which are
// as e has them.
func (r *Reader) revision(e *merged) membership.Revision {
	rev := max(e.key, r.s.Nicknames().Revision())
	if e.absent {
		rev = max(rev, r.s.RemovedRevision())
	}
	return rev
}

// pageMerged yields the members of e above after, at most limit (0: all), with
// their nicknames as they are. The caller holds the nicknames.
func (r *Reader) pageMerged(e *merged, after membership.UID, limit int) func(func(membership.Member) bool) {
	nicks := r.s.Nicknames()
	return func(yield func(membership.Member) bool) {
		i, found := slices.BinarySearch(e.uids, after)
		if found {
			i++
		}
		end := len(e.uids)
		if limit > 0 {
			end = min(end, i+limit)
		}
		for ; i < end; i++ {
			uid := e.uids[i]
			at := int64(forever)
			if e.ends != nil {
				at = e.ends[i]
			}
			if !yield(membership.Member{UID: uid, Nickname: nicks.Of(uid), Expires: nesting.TimeOf(endOrZero(at))}) {
				return
			}
		}
	}
}
