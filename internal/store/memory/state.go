package memory

import (
	"math/bits"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

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
		st.LastRevision = m.feed.stats().last
	} else {
		st.LastRevision, st.Changes = m.feed.export()
	}
	st.Keys = m.exportKeys()
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
			groups[i] = append(groups[i], snap.Group{ID: id, Revision: g.revision, UIDs: g.members.appendTo(make([]membership.UID, 0, g.members.size)), Expiries: exportExpiries(g.expiries)})
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

// cores returns how many workers parallel should have for n tasks: one
// for each core, at most n, at least one.
func cores(n int) int { return max(1, min(runtime.GOMAXPROCS(0), n)) }

// Import loads st into m, which must be empty and not yet shared, but for
// the nicknames of users in no group. It builds every index in bulk: each
// group's chunks directly, and the reverse index from all pairs sorted at
// once, rather than one insert at a time.
func (m *Store) Import(st *snap.State) {
	for uid, nick := range st.Nicknames {
		if nick != "" {
			m.nicknames[uid] = nick
		}
	}
	m.nicknamesRevision.Store(uint64(st.NicknamesRevision))
	m.removedRevision.Store(uint64(st.RemovedRevision))
	m.feed.load(st.LastRevision, st.Changes)
	m.importKeys(st.Keys)
	// Each reverse shard's pairs, in group order, in a slice of exactly
	// their number: uids need not spread evenly over the shards.
	counts := make([]int, len(m.reverse))
	for _, g := range st.Groups {
		for _, uid := range g.UIDs {
			k, _ := m.reverseKey(uid)
			counts[k]++
		}
	}
	pairs := make([][]pair, len(m.reverse))
	for k := range pairs {
		pairs[k] = make([]pair, 0, counts[k])
	}
	indexed := make([]*group, 0, len(st.Groups))
	var due []dueKey
	for _, g := range st.Groups {
		if len(g.UIDs) == 0 {
			continue
		}
		grp := &group{id: g.ID, number: m.groupNumbers.number(g.ID), revision: g.Revision}
		grp.members.fill(g.UIDs)
		due = m.importExpiries(grp, g.Expiries, due)
		m.shardOf(g.ID).groups[g.ID] = grp
		indexed = append(indexed, grp)
		m.counts.groups.Add(1)
		m.counts.members.Add(int64(len(g.UIDs)))
		for _, uid := range g.UIDs {
			k, user := m.reverseKey(uid)
			pairs[k] = append(pairs[k], pair{user: user, group: grp.number})
		}
	}
	slices.SortFunc(indexed, func(a, b *group) int { return strings.Compare(a.id, b.id) })
	m.index.build(indexed)
	slices.SortFunc(due, dueCodec{}.compare)
	m.due.set.fill(due)
	m.fillReverse(pairs)
	// A snapshot written before users in no group were forgotten may hold
	// their nicknames: forget them now.
	for uid := range m.nicknames {
		if k, user := m.reverseKey(uid); !m.reverse[k].pairs.hasUser(user) {
			delete(m.nicknames, uid)
		}
	}
	m.nicknameCount.Store(int64(len(m.nicknames)))
}

// fillReverse fills each reverse shard k from pairs[k], in group order,
// which it sorts: the
// shards on every core at once, as a restart of a hundred million
// memberships sorts as many pairs.
func (m *Store) fillReverse(pairs [][]pair) {
	workers := cores(len(pairs))
	scratch := make([][]pair, workers) // each worker's, for the sort
	parallel(workers, len(pairs), func(w, k int) {
		ps := pairs[k]
		scratch[w] = sortByUser(ps, scratch[w])
		// sortByUser keeps the order pairs came in within a user, which is
		// ascending group numbers only when numbers were given out in
		// st.Groups' order: not so in a store whose groups were all
		// deleted, which gives freed numbers out again, last freed first.
		// A pass finds out, and a comparison sort puts it right.
		if !slices.IsSortedFunc(ps, comparePairs) {
			slices.SortFunc(ps, comparePairs)
		}
		m.reverse[k].pairs.fill(ps)
		users := 0
		for i, p := range ps {
			if i == 0 || p.user != ps[i-1].user {
				users++
			}
		}
		m.counts.users.Add(int64(users))
		pairs[k] = nil // let them go
	})
}

// sortByUser sorts ps, which are in group order, by user, keeping the
// group order within each user: the order of comparePairs. It is a radix
// sort of the users' bits, 11 at a time, so a restart of a hundred
// million memberships sorts its pairs in a few passes over them, not a
// comparison sort's twenty.
//
// scratch is room for the sort, which it returns, grown to len(ps) when it
// was less.
func sortByUser(ps, scratch []pair) []pair {
	const digitBits = 11
	var maxUser uint64
	for _, p := range ps {
		maxUser = max(maxUser, uint64(p.user))
	}
	if cap(scratch) < len(ps) {
		scratch = make([]pair, len(ps))
	}
	src, dst := ps, scratch[:len(ps)]
	for shift := 0; shift < bits.Len64(maxUser); shift += digitBits {
		var count [1<<digitBits + 1]int
		for _, p := range src {
			count[(uint64(p.user)>>shift)&(1<<digitBits-1)+1]++
		}
		for i := 1; i < len(count); i++ {
			count[i] += count[i-1]
		}
		for _, p := range src {
			d := (uint64(p.user) >> shift) & (1<<digitBits - 1)
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
	m.keyedMu.Lock()
	defer m.keyedMu.Unlock()
	for i := range m.shards {
		m.shards[i].mu.RLock()
	}
	st := m.exportState(true)
	for i := range m.shards {
		m.shards[i].mu.RUnlock()
	}
	return snap.NewBackup(st)
}
