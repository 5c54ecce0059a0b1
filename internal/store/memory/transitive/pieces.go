package transitive

import (
	"slices"

	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/nesting"
	"example.com/groupmembership/internal/store/memory/nicknames"
	"example.com/groupmembership/membership"
)

// A read of a closure's members works in pieces: each holds the locks (the
// nesting, the closure's shards and, for the members it answers, the
// nicknames) while it walks at most pieceMembers members, and lets go of
// them after it, so that a writer waits for one piece at most, never for a
// merge of millions. Each piece checks that the closure is as the first
// one found it: the same nesting, the same groups at the same revisions
// and, once it has read nicknames, the same nicknames' revision. When it
// is not, the read starts again; after maxRestarts, it holds the locks
// from its first piece to its last, as a read that changes kept starting
// over would never end. The answer is gathered piece by piece, in memory
// of the page asked for.

const (
	// defaultPieceMembers is Reader.pieceMembers: a merge of as many
	// members takes a few milliseconds.
	defaultPieceMembers = 1 << 16
	// maxRestarts is how many times a read in pieces starts again.
	maxRestarts = 3
)

// pieces is one try of a read in pieces.
type pieces struct {
	r       *Reader
	groupID string
	// hold keeps the locks from the first piece to the last.
	hold bool
	// c is the closure the first piece found, groups its groups (nil:
	// absent) and revs their revisions then.
	c      *closure
	groups []*group.Group
	revs   []membership.Revision
	// locked is the closure whose shards the piece holds (nil: none), and
	// nicks whether it holds the nicknames.
	locked *closure
	nicks  bool
	// nickRev is the nicknames' revision the first piece that held them
	// found (nickSeen), and changed whether a piece found the closure or
	// the nicknames otherwise.
	nickRev  membership.Revision
	nickSeen bool
	changed  bool
}

// lock takes a piece's locks: the nesting and the closure's shards. The
// first piece notes the closure (its groups, once list has them); each
// later one checks it (changed).
func (p *pieces) lock() {
	graph, nrev := p.r.s.RLockNesting()
	c := p.r.closureOf(graph, nrev, p.groupID)
	p.r.rlock(c)
	p.locked = c
	if p.c == nil {
		p.c = c
		return
	}
	if c.rev != p.c.rev || !p.same() {
		p.changed = true
	}
}

// note notes the closure's groups as the first piece found them: those
// of a kept merge that is current, which it shares, or those the shards
// hold. The caller holds them.
func (p *pieces) note(e *merged) {
	if e != nil {
		p.groups, p.revs = e.groups, e.revs // never written
		return
	}
	p.groups = p.r.closureGroups(p.c)
	p.revs = make([]membership.Revision, len(p.groups))
	for i, g := range p.groups {
		if g != nil {
			p.revs[i] = g.Revision
		}
	}
}

// same reports whether the closure's groups are as the first piece found
// them. A group dropped frees its slot, which another group, or the same
// id made anew, may take since: the pointer alone does not tell them
// apart, so it checks the id and the revision too, as a kept merge does
// (mergedCache). The caller holds their shards.
func (p *pieces) same() bool {
	c := p.c
	for i, id := range c.ids {
		g := p.r.s.Group(c.shards[i], id)
		if g != p.groups[i] || g != nil && (g.ID != id || g.Revision != p.revs[i]) {
			return false
		}
	}
	return true
}

// unlock lets go of what the piece holds.
func (p *pieces) unlock() {
	if p.nicks {
		p.r.s.Nicknames().RUnlock()
		p.nicks = false
	}
	if p.locked != nil {
		p.r.runlock(p.locked)
		p.locked = nil
		p.r.s.RUnlockNesting()
	}
}

// next ends a piece and starts the next, and reports whether the closure
// (and the nicknames, once read) are as the first piece found them. A read
// that holds (hold) lets go of nothing.
func (p *pieces) next() bool {
	if !p.hold {
		p.unlock()
		if p.r.betweenPieces != nil {
			p.r.betweenPieces()
		}
		p.lock()
	}
	return !p.changed
}

// nicknames holds the nicknames for the rest of the piece, and returns
// them, false when their revision is not the one the first piece that
// held them found.
func (p *pieces) nicknames() (*nicknames.Directory, bool) {
	d := p.r.s.Nicknames()
	if !p.nicks {
		d.RLock()
		p.nicks = true
	}
	switch rev := d.Revision(); {
	case !p.nickSeen:
		p.nickRev, p.nickSeen = rev, true
	case rev != p.nickRev:
		p.changed = true
	}
	return d, !p.changed
}

// list returns the total of the closure's members and those opts asks for
// (every one, with no limit), and the revision it answers at: false when
// the closure changed between two of its pieces. Its first piece is
// locked when it returns, and its last, if it was another.
func (p *pieces) list(opts membership.ListOptions) (int, []membership.Member, membership.Revision, bool) {
	p.lock()
	r, c := p.r, p.c
	var e *merged
	if c.root != nil {
		e = r.cachedMerge(p.groupID, c)
	}
	p.note(e)
	key := r.membersKey(c, true)
	total := 0
	var src source
	switch {
	case c.root == nil:
		if g := p.groups[0]; g != nil {
			total, src = g.Members.Len(), groupSource{g}
		}
	case e != nil:
		total, src = len(e.uids), mergedSource{e}
	default:
		mg := mergePool.Get().(*merge)
		defer func() {
			mg.groups = nil // p's, not the pool's
			mg.release()
		}()
		e, ok := p.build(mg)
		if !ok {
			return 0, nil, 0, false
		}
		if e != nil {
			total, src = len(e.uids), mergedSource{e}
		} else if total, ok = p.total(mg, key); !ok {
			return 0, nil, 0, false
		} else {
			src = heapSource{mg}
		}
	}
	page, ok := p.page(src, opts, total)
	if !ok {
		return 0, nil, 0, false
	}
	if key == 0 {
		return total, page, 0, true
	}
	nickRev := p.nickRev
	if !p.nickSeen {
		nickRev = r.s.Nicknames().Revision() // no member read: as they are
	}
	return total, page, max(key, nickRev), true
}

// build merges the closure's members into an entry of the kept merges, a
// piece at a time, and keeps it: nil, building nothing, when the entry
// would take more than half the budget, or another read builds one; false
// when the closure changed between two pieces.
func (p *pieces) build(mg *merge) (*merged, bool) {
	c, mc := p.c, &p.r.merged
	n := 0
	for _, g := range p.groups {
		if g != nil {
			n += g.Members.Len() // at least the merged members
		}
	}
	if mergedBytes(p.groupID, len(p.groups), n, true) > mc.budget/2 || !mc.building.CompareAndSwap(false, true) {
		return nil, true
	}
	defer mc.building.Store(false)
	e := &merged{c: c, groups: slices.Clone(p.groups), revs: slices.Clone(p.revs)}
	uids := make([]membership.UID, 0, n)
	var ends []int64
	ok := p.walk(mg, func(uid membership.UID, end int64) {
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
	})
	if !ok {
		return nil, false
	}
	e.uids = slices.Clip(uids)
	if ends != nil {
		e.ends = slices.Clip(ends)
	}
	mc.put(p.groupID, e)
	return e, true
}

// total returns how many distinct members the closure holds, counted a
// piece at a time, or as counted before at the same key (totalCache);
// false when the closure changed between two pieces.
func (p *pieces) total(mg *merge, key membership.Revision) (int, bool) {
	if total, ok := p.r.totals.get(p.groupID, key); ok {
		return total, true
	}
	total := 0
	if !p.walk(mg, func(membership.UID, int64) { total++ }) {
		return 0, false
	}
	p.r.totals.put(p.groupID, key, total)
	return total, true
}

// walk merges every member of the closure (merge.each) into fn, a piece
// at a time; false when the closure changed between two pieces.
func (p *pieces) walk(mg *merge, fn func(uid membership.UID, end int64)) bool {
	var after membership.UID
	for {
		mg.groups = p.groups
		n := 0
		for uid, end := range mg.start(p.c.ends, after).each {
			if n == p.r.pieceMembers {
				break
			}
			fn(uid, end)
			after, n = uid, n+1
		}
		if n < p.r.pieceMembers {
			return true
		}
		if !p.next() {
			return false
		}
	}
}

// page returns the members src gives that opts asks for, with their
// nicknames, a piece at a time, of total in all; false when the closure or
// the nicknames changed between two pieces.
func (p *pieces) page(src source, opts membership.ListOptions, total int) ([]membership.Member, bool) {
	if opts.Limit > 0 {
		total = min(total, opts.Limit)
	}
	page := make([]membership.Member, 0, total)
	if src == nil {
		return page, true
	}
	after := opts.After
	for {
		n := p.r.pieceMembers
		if opts.Limit > 0 {
			n = min(n, opts.Limit-len(page))
		}
		nicks, ok := p.nicknames()
		if !ok {
			return nil, false
		}
		got := 0
		src.read(p, after, n, nicks, func(m membership.Member) {
			page = append(page, m)
			after, got = m.UID, got+1
		})
		if got < n || len(page) == opts.Limit {
			return page, true
		}
		if !p.next() {
			return nil, false
		}
	}
}

// source gives the closure's members in order: read calls fn with at most
// n of them above after, with their nicknames in nicks, under a piece's
// locks.
type source interface {
	read(p *pieces, after membership.UID, n int, nicks *nicknames.Directory, fn func(membership.Member))
}

// mergedSource reads a kept merge, which no change alters.
type mergedSource struct{ e *merged }

func (s mergedSource) read(_ *pieces, after membership.UID, n int, nicks *nicknames.Directory, fn func(membership.Member)) {
	e := s.e
	i, found := slices.BinarySearch(e.uids, after)
	if found {
		i++
	}
	for end := min(len(e.uids), i+n); i < end; i++ {
		at := int64(forever)
		if e.ends != nil {
			at = e.ends[i]
		}
		fn(membership.Member{UID: e.uids[i], Nickname: nicks.Of(e.uids[i]), Expires: nesting.TimeOf(endOrZero(at))})
	}
}

// groupSource reads the one group of a closure of a group in no nesting.
type groupSource struct{ g *group.Group }

func (s groupSource) read(_ *pieces, after membership.UID, n int, nicks *nicknames.Directory, fn func(membership.Member)) {
	for m := range s.g.Records(after, n, nicks) {
		fn(m)
	}
}

// heapSource merges the closure's groups from after at each read.
type heapSource struct{ mg *merge }

func (s heapSource) read(p *pieces, after membership.UID, n int, nicks *nicknames.Directory, fn func(membership.Member)) {
	s.mg.groups = p.groups
	got := 0
	for uid, end := range s.mg.start(p.c.ends, after).each {
		if got == n {
			return
		}
		fn(membership.Member{UID: uid, Nickname: nicks.Of(uid), Expires: nesting.TimeOf(endOrZero(end))})
		got++
	}
}
