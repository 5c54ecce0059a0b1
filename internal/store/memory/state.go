package memory

import (
	"math/bits"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"example.com/groupmembership/internal/store/memory/expiry"
	"example.com/groupmembership/internal/store/memory/packed"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/membership"
)

// Export copies m's contents for a snapshot, the feed's changes included.
// Changes made while it runs may or may not be in the copy, so the caller
// must keep them out: the durable store's committer, the only goroutine
// that changes its Store, calls it.
func (m *Store) Export() *snap.State { return m.exportState(false) }

// exportState copies m's contents. For a snapshot, it copies the feed's
// changes too, and changes made while it runs may or may not be in the copy,
// so the caller must keep them out. For a backup, the caller holds every
// shard (read locked), and the feed's changes are left out.
func (m *Store) exportState(forBackup bool) *snap.State {
	shardsHeld := forBackup
	st := &snap.State{
		NicknamesRevision: membership.Revision(m.nicknamesRevision.Load()),
		RemovedRevision:   membership.Revision(m.removedRevision.Load()),
	}
	if forBackup {
		st.LastRevision = m.feed.Stats().Last
	} else {
		st.LastRevision, st.Changes = m.feed.Export()
	}
	st.Keys = m.keys.Export()
	m.nicknamesMu.RLock()
	st.Nicknames = make(map[membership.UID]string, len(m.nicknames))
	for uid, nick := range m.nicknames {
		st.Nicknames[uid] = nick
	}
	m.nicknamesMu.RUnlock()
	// The shards are copied on every core at once: at a hundred million
	// memberships, the copy is seconds that writes wait.
	groups := make([][]snap.Group, len(m.shards))
	parallel(cores(len(m.shards)), len(m.shards), func(_, i int) {
		s := &m.shards[i]
		if !shardsHeld {
			s.mu.RLock()
			defer s.mu.RUnlock()
		}
		for id, g := range s.groups {
			groups[i] = append(groups[i], snap.Group{ID: id, Revision: g.revision, UIDs: g.members.AppendTo(make([]membership.UID, 0, g.members.Len())), Expiries: g.expiries.Export()})
		}
	})
	st.Groups = slices.Concat(groups...)
	return st
}

// parallel calls fn with each of 0 to n-1, from workers goroutines at
// once, each calling fn with its number, below workers: a caller that
// keeps something for each worker sizes it by the number it gave, read
// once (see cores), not by GOMAXPROCS again, which the runtime may change
// meanwhile.
func parallel(workers, n int, fn func(worker, i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(w, i)
			}
		})
	}
	wg.Wait()
}

// byReverseShard buckets what uids yields, total of them, by reverse
// shard, in the order yielded within each: shard k's are
// items[starts[k]:starts[k+1]], each made by item from the uid's user in
// its shard and the tag yielded with it. It calls uids twice, to count and
// to place: a bulk change then works on one shard at a time.
func byReverseShard[T any](m *Store, total int, uids func(yield func(uid membership.UID, tag uint32) bool), item func(user membership.UID, tag uint32) T) (items []T, starts []int) {
	starts = make([]int, len(m.reverse)+1)
	for uid := range uids {
		k, _ := m.reverseKey(uid)
		starts[k+1]++
	}
	for k := range m.reverse {
		starts[k+1] += starts[k]
	}
	items = make([]T, total)
	next := slices.Clone(starts[:len(m.reverse)])
	for uid, tag := range uids {
		k, user := m.reverseKey(uid)
		items[next[k]] = item(user, tag)
		next[k]++
	}
	return items, starts
}

// cores returns how many workers parallel should have for n tasks: one
// for each core, at most n, at least one.
func cores(n int) int { return max(1, min(runtime.GOMAXPROCS(0), n)) }

// Import loads st into m, which must be empty and not yet shared, but for
// the nicknames of users in no group. It builds every index in bulk: each
// group's chunks directly, and the reverse index from all pairs sorted at
// once, rather than one insert at a time.
func (m *Store) Import(st *snap.State) {
	l := m.Loader()
	for _, g := range st.Groups {
		_ = l.Group(g) // never fails
	}
	l.Finish(st)
}

// A Loader loads a snapshot into an empty Store, as Import does, from its
// groups given one at a time (as snap.ReadFileEach gives them) and then the
// rest of it: a restart need not hold every uid of the snapshot decoded
// while it builds the Store. Its groups' members are filled as they come,
// and their reverse pairs gathered on another goroutine at the same time:
// a restart of a hundred million memberships is two passes over them, one
// on each core. Finish, or Drop, must follow.
type Loader struct {
	m       *Store
	indexed []*group
	due     []expiry.Key
	scratch []packed.Pair // a group's members, for fill
	// The reverse pairs: groups' uids, copied into a run and sent to
	// gather, which appends them to pairs; free gives runs back.
	run      *loaderRun
	runs     chan *loaderRun
	free     chan *loaderRun
	gathered chan struct{}
	pairs    []pairBlocks // each reverse shard's, in group order
}

// loaderRun is the uids of groups given to the Loader one after another:
// groups[i]'s are the next counts[i] uids.
type loaderRun struct {
	uids   []membership.UID
	groups []uint32 // numbers
	counts []int
}

// loaderRunUIDs is how many uids a run holds before it is sent: enough
// that sending one costs nothing beside its uids' pairs.
const loaderRunUIDs = 1 << 16

// Loader returns a Loader into m, which must be empty and not yet shared.
func (m *Store) Loader() *Loader {
	const runs = 4 // in flight, beside the one filling
	l := &Loader{m: m, pairs: make([]pairBlocks, len(m.reverse)),
		runs: make(chan *loaderRun, runs), free: make(chan *loaderRun, runs+1), gathered: make(chan struct{})}
	for range runs + 1 {
		l.free <- &loaderRun{}
	}
	l.run = <-l.free
	go l.gather()
	return l
}

// gather appends the pairs of each run sent to the Loader's reverse
// shards' pairs.
func (l *Loader) gather() {
	defer close(l.gathered)
	for r := range l.runs {
		uids := r.uids
		for i, number := range r.groups {
			for _, uid := range uids[:r.counts[i]] {
				k, user := l.m.reverseKey(uid)
				l.pairs[k].append(packed.Pair{User: user, Group: number})
			}
			uids = uids[r.counts[i]:]
		}
		r.uids, r.groups, r.counts = r.uids[:0], r.groups[:0], r.counts[:0]
		l.free <- r
	}
}

// Group loads g, whose UIDs it does not keep. It returns nil: its type is
// that of snap.ReadFileEach's each.
func (l *Loader) Group(g snap.Group) error {
	if len(g.UIDs) == 0 {
		return nil
	}
	m := l.m
	grp := &group{id: g.ID, number: m.groupNumbers.number(g.ID), revision: g.Revision}
	l.scratch = grp.members.FillFrom(g.UIDs, l.scratch)
	l.due = m.loadExpiries(grp, g.Expiries, l.due)
	m.shardOf(g.ID).groups[g.ID] = grp
	l.indexed = append(l.indexed, grp)
	m.counts.groups.Add(1)
	m.counts.members.Add(int64(len(g.UIDs)))
	r := l.run
	r.uids = append(r.uids, g.UIDs...)
	r.groups = append(r.groups, grp.number)
	r.counts = append(r.counts, len(g.UIDs))
	if len(r.uids) >= loaderRunUIDs {
		l.runs <- r
		l.run = <-l.free
	}
	return nil
}

// Drop stops l without finishing: the Store it loaded into is to be
// dropped (the snapshot did not read back).
func (l *Loader) Drop() {
	close(l.runs)
	<-l.gathered
	*l = Loader{}
}

// Finish loads the rest of st, all but its Groups, which were given to
// Group, and builds the indexes of the groups.
func (l *Loader) Finish(st *snap.State) {
	m := l.m
	l.runs <- l.run
	close(l.runs)
	<-l.gathered
	for uid, nick := range st.Nicknames {
		if nick != "" {
			m.nicknames[uid] = nick
		}
	}
	m.nicknamesRevision.Store(uint64(st.NicknamesRevision))
	m.removedRevision.Store(uint64(st.RemovedRevision))
	m.feed.Load(st.LastRevision, st.Changes)
	m.keys.Import(st.Keys)
	slices.SortFunc(l.indexed, func(a, b *group) int { return strings.Compare(a.id, b.id) })
	m.index.build(l.indexed)
	slices.SortFunc(l.due, expiry.CompareKeys)
	m.due.set.Fill(l.due)
	m.fillReverse(l.pairs)
	// A snapshot written before users in no group were forgotten may hold
	// their nicknames: forget them now.
	for uid := range m.nicknames {
		if k, user := m.reverseKey(uid); !m.reverse[k].pairs.HasUser(user) {
			delete(m.nicknames, uid)
		}
	}
	m.nicknameCount.Store(int64(len(m.nicknames)))
	*l = Loader{}
}

// pairBlocks holds pairs, in the order appended, in blocks: a restart
// appends a hundred million pairs to the reverse shards' blocks without
// copying them as a slice grown by append would, and without counting them
// first. A pair whose user is below 2^32 (a uid below 2^32 times the
// shards) takes 8 bytes, user and group in one word, not a pair's 16: the
// blocks are fresh memory, which the kernel clears and maps a page at a
// time, and that was most of what they cost.
type pairBlocks struct {
	narrow [][]uint64      // user<<32 | group
	wide   [][]packed.Pair // the pairs of users from 2^32 on
	n      int
}

// A shard's first block holds firstPairBlock pairs, each next one twice as
// many as the one before, up to pairBlock: a small store's load takes
// little room, a large one's blocks are large.
const (
	firstPairBlock = 1 << 8
	pairBlock      = 1 << 16
)

func (b *pairBlocks) append(p packed.Pair) {
	if p.User < 1<<32 {
		appendToBlocks(&b.narrow, uint64(p.User)<<32|uint64(p.Group))
	} else {
		appendToBlocks(&b.wide, p)
	}
	b.n++
}

func appendToBlocks[T any](blocks *[][]T, v T) {
	bs := *blocks
	if len(bs) == 0 {
		bs = append(bs, make([]T, 0, firstPairBlock))
		*blocks = bs
	} else if last := bs[len(bs)-1]; len(last) == cap(last) {
		bs = append(bs, make([]T, 0, min(2*cap(last), pairBlock)))
		*blocks = bs
	}
	last := &bs[len(bs)-1]
	*last = append(*last, v)
}

// appendTo appends b's pairs to ps: the narrow ones, then the wide ones.
// A user's pairs are all narrow or all wide, so each user's stay in the
// order appended.
func (b *pairBlocks) appendTo(ps []packed.Pair) []packed.Pair {
	for _, block := range b.narrow {
		for _, v := range block {
			ps = append(ps, packed.Pair{User: membership.UID(v >> 32), Group: uint32(v)})
		}
	}
	for _, block := range b.wide {
		ps = append(ps, block...)
	}
	return ps
}

// fillReverse fills each reverse shard k from pairs[k], in group order,
// which it sorts: the shards on every core at once, as a restart of a
// hundred million memberships sorts as many pairs. Each worker copies a
// shard's pairs into room of its own, reused from shard to shard, and lets
// the blocks go.
func (m *Store) fillReverse(pairs []pairBlocks) {
	workers := cores(len(pairs))
	type room struct{ ps, scratch []packed.Pair } // a worker's, for the sort
	rooms := make([]room, workers)
	parallel(workers, len(pairs), func(w, k int) {
		r := &rooms[w]
		if cap(r.ps) < pairs[k].n {
			r.ps = make([]packed.Pair, 0, pairs[k].n)
		}
		ps := pairs[k].appendTo(r.ps[:0])
		pairs[k] = pairBlocks{} // let them go
		r.scratch = sortByUser(ps, r.scratch)
		// sortByUser keeps the order pairs came in within a user, which is
		// ascending group numbers only when numbers were given out in
		// st.Groups' order: not so in a store whose groups were all
		// deleted, which gives freed numbers out again, last freed first.
		// A pass finds out, and a comparison sort puts it right.
		if !slices.IsSortedFunc(ps, packed.ComparePairs) {
			slices.SortFunc(ps, packed.ComparePairs)
		}
		m.reverse[k].pairs.Fill(ps)
		users := 0
		for i, p := range ps {
			if i == 0 || p.User != ps[i-1].User {
				users++
			}
		}
		m.counts.users.Add(int64(users))
	})
}

// sortByUser sorts ps, which are in group order, by user, keeping the
// group order within each user: the order of packed.ComparePairs. It is a radix
// sort of the users' bits, 11 at a time, so a restart of a hundred
// million memberships sorts its pairs in a few passes over them, not a
// comparison sort's twenty.
//
// scratch is room for the sort, which it returns, grown to len(ps) when it
// was less.
func sortByUser(ps, scratch []packed.Pair) []packed.Pair {
	const digitBits = 11
	var maxUser uint64
	for _, p := range ps {
		maxUser = max(maxUser, uint64(p.User))
	}
	if cap(scratch) < len(ps) {
		scratch = make([]packed.Pair, len(ps))
	}
	src, dst := ps, scratch[:len(ps)]
	for shift := 0; shift < bits.Len64(maxUser); shift += digitBits {
		var count [1<<digitBits + 1]int
		for _, p := range src {
			count[(uint64(p.User)>>shift)&(1<<digitBits-1)+1]++
		}
		for i := 1; i < len(count); i++ {
			count[i] += count[i-1]
		}
		for _, p := range src {
			d := (uint64(p.User) >> shift) & (1<<digitBits - 1)
			dst[count[d]] = p
			count[d]++
		}
		src, dst = dst, src
	}
	copy(ps, src) // a no-op when src is ps
	return scratch
}

// Backup copies the whole state at one revision. Writes wait while it
// copies: it holds every shard, so that no change is halfway, and the copy
// is of memory only (no encoding, no I/O).
func (m *Store) Backup() *snap.Backup {
	m.keys.Block()
	defer m.keys.Unblock()
	for i := range m.shards {
		m.shards[i].mu.RLock()
	}
	st := m.exportState(true)
	for i := range m.shards {
		m.shards[i].mu.RUnlock()
	}
	return snap.NewBackup(st)
}
