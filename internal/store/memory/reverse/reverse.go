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
//
// Each user has two revisions: that of the latest change of the groups it
// is in, and that of the latest change of them, of its memberships' ends
// or of its nickname (Touch). The users of a shard share Slots of them, by
// quotient: users whose uids are equal modulo Slots share them, which then
// move with the changes of either. A slot keeps each as 32 bits above its
// shard's base revision.
package reverse

import (
	"cmp"
	"iter"
	"math"
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
	// mu guards the fields below.
	mu    sync.RWMutex
	pairs packed.Pairs
	// revs are the users' revisions, a slot each, above base; touched are
	// the slots the change that holds mu has changed, for UnlockAt, with
	// groupsTouched set for a change of a user's groups.
	base    membership.Revision
	revs    []slotRevisions
	touched []uint32
}

// slotRevisions are the revisions of the users of a slot, each as its
// difference from its shard's base: that of the latest change of their
// groups, and that of the latest change of their groups, ends or
// nicknames.
type slotRevisions struct{ groups, any uint32 }

// Slots is how many slots of revisions of users all the shards keep: 512
// KiB.
const Slots = 1 << 16

// groupsTouched marks a slot touched by a change of a user's groups.
const groupsTouched = 1 << 31

// New returns an empty index of n shards.
func New(n int) Index {
	sh := make([]shard, n)
	for k := range sh {
		sh[k].revs = make([]slotRevisions, max(1, Slots/n))
	}
	return Index{shards: sh}
}

// slot returns the slot of the user user (a uid's quotient) in shard k.
func (x *Index) slot(k int, user membership.UID) uint32 {
	return uint32(uint64(user) % uint64(len(x.shards[k].revs)))
}

// Touch notes that the change in progress changed uid's memberships' ends
// or nickname: UnlockAt gives it the change's revision. The caller holds
// uid's shard (Lock). Add and Remove touch the uids whose groups they
// change.
func (x *Index) Touch(uid membership.UID) {
	k, user := x.key(uid)
	sh := &x.shards[k]
	sh.touched = append(sh.touched, x.slot(k, user))
}

// TouchChanged touches the users whose nicknames or memberships' ends a
// change set (changed, expiries). The caller holds their shards.
func (x *Index) TouchChanged(changed []membership.Member, expiries []membership.MemberExpiry) {
	for _, c := range changed {
		x.Touch(c.UID)
	}
	for _, e := range expiries {
		x.Touch(e.UID)
	}
}

// UserRevision returns uid's revision: a revision at least that of the
// latest change of its groups, their ends in it and its nickname, at most
// the latest. The caller holds uid's shard (RLock).
func (x *Index) UserRevision(uid membership.UID) membership.Revision {
	k, user := x.key(uid)
	sh := &x.shards[k]
	return sh.base + membership.Revision(sh.revs[x.slot(k, user)].any)
}

// GroupsRevision returns the revision of uid's groups: a revision at least
// that of their latest change, at most the latest. The caller holds uid's
// shard (RLock).
func (x *Index) GroupsRevision(uid membership.UID) membership.Revision {
	k, user := x.key(uid)
	sh := &x.shards[k]
	return sh.base + membership.Revision(sh.revs[x.slot(k, user)].groups)
}

// StampAll gives every user the revision rev, as a loaded index does: the
// revision its state is of. The caller has not shared x yet.
func (x *Index) StampAll(rev membership.Revision) {
	for k := range x.shards {
		x.shards[k].rebase(rev)
	}
}

// rebase gives every slot of sh the revision rev, as its base. The caller
// holds sh, or has not shared it.
func (sh *shard) rebase(rev membership.Revision) {
	sh.base = rev
	clear(sh.revs)
}

// stamp gives the slots touched the revision rev, which is the latest: a
// shard whose base is too far below it for 32 bits is rebased at rev,
// which is then the revision of every slot, at least that of its latest
// change. The caller holds sh.
func (sh *shard) stamp(rev membership.Revision) {
	var above uint32 // a revision below base: base is later, and at least it
	if rev > sh.base {
		if rev-sh.base > math.MaxUint32 {
			sh.rebase(rev)
		}
		above = uint32(rev - sh.base)
	}
	for _, i := range sh.touched {
		if i&groupsTouched != 0 {
			i &^= groupsTouched
			sh.revs[i].groups = above
		}
		sh.revs[i].any = above
	}
}

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

// Unlock unlocks the shards Lock locked, after a change that recorded no
// revision (it changed nothing).
func (x *Index) Unlock(set shards.Set) { x.UnlockAt(set, 0) }

// UnlockAt unlocks the shards Lock locked, after the change rev, which
// the users it touched get as their revision.
func (x *Index) UnlockAt(set shards.Set, rev membership.Revision) {
	for k := range set.All {
		sh := &x.shards[k]
		if rev != 0 {
			sh.stamp(rev)
		}
		sh.touched = sh.touched[:0]
		sh.mu.Unlock()
	}
}

// Add records uid's membership of group number n. The caller holds uid's
// shard (Lock).
func (x *Index) Add(uid membership.UID, n uint32) {
	k, user := x.key(uid)
	sh := &x.shards[k]
	if sh.pairs.Add(packed.Pair{User: user, Group: n}) {
		x.users.Add(1)
	}
	sh.touched = append(sh.touched, x.slot(k, user)|groupsTouched)
}

// Remove forgets uid's membership of group number n, and reports whether
// uid is in no group any more. The caller holds uid's shard (Lock).
func (x *Index) Remove(uid membership.UID, n uint32) (inNoGroup bool) {
	k, user := x.key(uid)
	sh := &x.shards[k]
	sh.touched = append(sh.touched, x.slot(k, user)|groupsTouched)
	if sh.pairs.Remove(packed.Pair{User: user, Group: n}) {
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
		sh := &x.shards[k]
		for _, user := range users[start[k]:start[k+1]] {
			if sh.pairs.Add(packed.Pair{User: user, Group: n}) {
				newUsers++
			}
			sh.touched = append(sh.touched, x.slot(k, user)|groupsTouched)
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
// changes are recorded (UnlockAt); buf is room for the set.
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
		sh := &x.shards[k]
		for i := 0; i < len(shard); {
			user, none := shard[i].User, false
			sh.touched = append(sh.touched, x.slot(k, user)|groupsTouched)
			j := i
			for ; j < len(shard) && shard[j].User == user; j++ {
				none = sh.pairs.Remove(shard[j].Pair)
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
