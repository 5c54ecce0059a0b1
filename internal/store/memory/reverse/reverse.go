// Package reverse is the in-memory store's reverse index, from users to
// the groups they are in. Group ids are interned as numbers by the store,
// and every membership is one (user, group number) pair in the shard of
// its uid, kept sorted in packed chunks (packed.Pairs): a user's pairs lie
// together, and adding or removing one never looks at a group id. The ids
// are looked up, and sorted, only when a user's groups are listed.
//
// A uid's shard is the uid modulo the number of shards, and its pairs hold
// the quotient: the uids of one shard are that many times closer together
// as quotients, so their distances take fewer bytes.
//
// Each shard has its lock; where it comes in the store's lock order,
// package memory's doc says.
package reverse

import (
	"cmp"
	"iter"
	"slices"
	"sync"
	"sync/atomic"

	"example.com/groupmembership/internal/store/memory/packed"
	"example.com/groupmembership/internal/store/memory/shards"
	"example.com/groupmembership/membership"
)

// Index is the reverse index.
type Index struct {
	shards []shard
	// users counts the uids in at least one group. It changes under the
	// lock of the uid's shard, and is read without one.
	users atomic.Int64
}

// shard holds the pairs of the uids that hash to it.
type shard struct {
	// mu guards pairs.
	mu    sync.RWMutex
	pairs packed.Pairs
}

// New returns an empty index of n shards.
func New(n int) Index { return Index{shards: make([]shard, n)} }

// key returns the index of uid's shard, and the user that uid is in its
// pairs.
func (x *Index) key(uid membership.UID) (k int, user membership.UID) {
	n := uint64(len(x.shards))
	return int(uint64(uid) % n), membership.UID(uint64(uid) / n)
}

// Users returns how many uids are in at least one group.
func (x *Index) Users() int64 { return x.users.Load() }

// Lock locks the shards of uids, in ascending order, and returns the set
// it locked, for Unlock; buf is room for the set.
func (x *Index) Lock(uids iter.Seq[membership.UID], buf []uint64) shards.Set {
	set := shards.NewSet(len(x.shards), buf)
	for uid := range uids {
		k, _ := x.key(uid)
		set.Add(k)
	}
	for k := range set.All {
		x.shards[k].mu.Lock()
	}
	return set
}

// Unlock unlocks the shards Lock locked.
func (x *Index) Unlock(set shards.Set) {
	for k := range set.All {
		x.shards[k].mu.Unlock()
	}
}

// Add records uid's membership of group number n. The caller holds uid's
// shard (Lock).
func (x *Index) Add(uid membership.UID, n uint32) {
	k, user := x.key(uid)
	if x.shards[k].pairs.Add(packed.Pair{User: user, Group: n}) {
		x.users.Add(1)
	}
}

// Remove forgets uid's membership of group number n, and reports whether
// uid is in no group any more. The caller holds uid's shard (Lock).
func (x *Index) Remove(uid membership.UID, n uint32) (inNoGroup bool) {
	k, user := x.key(uid)
	if x.shards[k].pairs.Remove(packed.Pair{User: user, Group: n}) {
		x.users.Add(-1)
		return true
	}
	return false
}

// HasUser reports whether uid is in a group. The caller holds uid's shard,
// or keeps changes out.
func (x *Index) HasUser(uid membership.UID) bool {
	k, user := x.key(uid)
	return x.shards[k].pairs.HasUser(user)
}

// GroupsOf calls fn with the group numbers of uid, in number order. The
// caller holds uid's shard.
func (x *Index) GroupsOf(uid membership.UID, fn func(n uint32)) {
	k, user := x.key(uid)
	x.EachPair(k, user, func(p packed.Pair) bool {
		if p.User != user {
			return false
		}
		fn(p.Group)
		return true
	})
}

// EachPair calls yield with the pairs of shard k from those of user on,
// in order, until it returns false: with user 0, the whole shard. The
// caller holds the shard.
func (x *Index) EachPair(k int, user membership.UID, yield func(packed.Pair) bool) {
	x.shards[k].pairs.EachFrom(user, yield)
}

// MaxUID returns the largest uid in a group, 0 when there is none. It
// holds each shard for reading in turn: a uid added meanwhile to a shard
// already read is not seen.
func (x *Index) MaxUID() membership.UID {
	var largest membership.UID
	n := membership.UID(len(x.shards))
	for k := range x.shards {
		sh := &x.shards[k]
		sh.mu.RLock()
		user, ok := sh.pairs.LastUser()
		sh.mu.RUnlock()
		if ok {
			largest = max(largest, user*n+membership.UID(k))
		}
	}
	return largest
}

// RLock holds uid's shard for reading: while it does, none of uid's groups
// can be emptied.
func (x *Index) RLock(uid membership.UID) {
	k, _ := x.key(uid)
	x.shards[k].mu.RLock()
}

// RLockAll holds the shards of uidOf(0) to uidOf(n-1) for reading, in
// ascending order, and returns the set it holds, for RUnlockAll; buf is
// room for the set.
func (x *Index) RLockAll(n int, uidOf func(i int) membership.UID, buf []uint64) shards.Set {
	set := shards.NewSet(len(x.shards), buf)
	for i := range n {
		k, _ := x.key(uidOf(i))
		set.Add(k)
	}
	for k := range set.All {
		x.shards[k].mu.RLock()
	}
	return set
}

// RUnlockAll lets go of what RLockAll holds.
func (x *Index) RUnlockAll(set shards.Set) {
	for k := range set.All {
		x.shards[k].mu.RUnlock()
	}
}

// RUnlock lets go of what RLock holds.
func (x *Index) RUnlock(uid membership.UID) {
	k, _ := x.key(uid)
	x.shards[k].mu.RUnlock()
}

// ParallelAdd is how many uids AddAll records on every core at once, a
// shard to a worker.
const ParallelAdd = 1024

// AddAll records the membership of group number n for each of uids, which
// are distinct: one at a time when they are few, and when they are many (a
// bulk add, or its replay at a restart), shard by shard on every core. At
// a hundred million memberships nearly every insertion misses the cache in
// its shard's search, about 1.5 µs a uid, and a replay is one goroutine.
// The caller holds the uids' shards (Lock).
func (x *Index) AddAll(uids []membership.UID, n uint32) {
	if len(uids) < ParallelAdd {
		for _, uid := range uids {
			x.Add(uid, n)
		}
		return
	}
	workers := shards.Workers(len(x.shards)) // GOMAXPROCS(0) takes the scheduler's lock: not for every add
	users, start := byShard(x, len(uids), func(yield func(membership.UID, uint32) bool) {
		for _, uid := range uids {
			if !yield(uid, 0) {
				return
			}
		}
	}, func(user membership.UID, _ uint32) membership.UID { return user })
	shards.Parallel(workers, len(x.shards), func(_, k int) {
		newUsers := 0
		for _, user := range users[start[k]:start[k+1]] {
			if x.shards[k].pairs.Add(packed.Pair{User: user, Group: n}) {
				newUsers++
			}
		}
		x.users.Add(int64(newUsers))
	})
}

// removal is a pair a write of a round removes, of the round's write
// numbered write.
type removal struct {
	packed.Pair
	write uint32
}

func compareRemovals(a, b removal) int {
	switch {
	case a.User != b.User:
		return cmp.Compare(a.User, b.User)
	case a.Group != b.Group:
		return cmp.Compare(a.Group, b.Group)
	}
	return cmp.Compare(a.write, b.write)
}

// RemoveRound forgets the memberships that the writes of a round
// removed, as one write after another would: removed[i] are the uids write
// i removed from the group numbered groupOf(i). It removes them shard by
// shard, each shard's in order, on every core: those of one round lie
// close together, where one write after another finds each pair in a chunk
// that is rarely in the cache. It returns, for each write, the uids it
// left in no group: of the writes that removed a user's pairs, the last
// one (in the order given) is the one that, applied one after another,
// would have found so. It locks the uids' shards, once it has sorted
// their pairs out, and leaves them locked, for Unlock once the round's
// changes are recorded; buf is room for the set.
func (x *Index) RemoveRound(removed [][]membership.UID, groupOf func(write int) uint32, buf []uint64) (inNoGroup [][]membership.UID, locked shards.Set) {
	total := 0
	for _, uids := range removed {
		total += len(uids)
	}
	pairs, starts := byShard(x, total, func(yield func(membership.UID, uint32) bool) {
		for i, uids := range removed {
			for _, uid := range uids {
				if !yield(uid, uint32(i)) {
					return
				}
			}
		}
	}, func(user membership.UID, write uint32) removal {
		return removal{Pair: packed.Pair{User: user, Group: groupOf(int(write))}, write: write}
	})
	locked = x.Lock(func(yield func(membership.UID) bool) {
		for _, uids := range removed {
			for _, uid := range uids {
				if !yield(uid) {
					return
				}
			}
		}
	}, buf)
	// Each shard's alone, on every core: a round's work under load gets
	// a core's share for each.
	type leftNone struct {
		uid   membership.UID
		write uint32
	}
	workers := shards.Workers(len(x.shards))
	found := make([][]leftNone, workers)
	shards.Parallel(workers, len(x.shards), func(worker, k int) {
		shard := pairs[starts[k]:starts[k+1]]
		slices.SortFunc(shard, compareRemovals)
		set := &x.shards[k].pairs
		for i := 0; i < len(shard); {
			user, none := shard[i].User, false
			j := i
			for ; j < len(shard) && shard[j].User == user; j++ {
				none = set.Remove(shard[j].Pair)
			}
			if none {
				last := shard[i].write
				for _, p := range shard[i+1 : j] {
					last = max(last, p.write)
				}
				uid := membership.UID(uint64(user)*uint64(len(x.shards)) + uint64(k))
				found[worker] = append(found[worker], leftNone{uid: uid, write: last})
			}
			i = j
		}
	})
	inNoGroup = make([][]membership.UID, len(removed))
	for _, f := range found {
		x.users.Add(-int64(len(f)))
		for _, n := range f {
			inNoGroup[n.write] = append(inNoGroup[n.write], n.uid)
		}
	}
	return inNoGroup, locked
}

// byShard buckets what uids yields, total of them, by shard, in the order
// yielded within each: shard k's are items[starts[k]:starts[k+1]], each
// made by item from the uid's user in its shard and the tag yielded with
// it. It calls uids twice, to count and to place: a bulk change then works
// on one shard at a time.
func byShard[T any](x *Index, total int, uids func(yield func(uid membership.UID, tag uint32) bool), item func(user membership.UID, tag uint32) T) (items []T, starts []int) {
	starts = make([]int, len(x.shards)+1)
	for uid := range uids {
		k, _ := x.key(uid)
		starts[k+1]++
	}
	for k := range x.shards {
		starts[k+1] += starts[k]
	}
	items = make([]T, total)
	next := slices.Clone(starts[:len(x.shards)])
	for uid, tag := range uids {
		k, user := x.key(uid)
		items[next[k]] = item(user, tag)
		next[k]++
	}
	return items, starts
}
