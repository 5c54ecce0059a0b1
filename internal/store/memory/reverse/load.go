package reverse

import (
	"cmp"
	"math/bits"
	"slices"

	"example.com/groupmembership/internal/store/memory/packed"
	"example.com/groupmembership/internal/store/memory/shards"
	"example.com/groupmembership/membership"
)

// Gathered are the pairs of a snapshot's groups, gathered shard by shard
// in group order, for Fill, on a goroutine of their own while the store
// loads the groups: a restart of a hundred million memberships is two
// passes over them, one on each core. Fill, or Drop, must follow.
type Gathered struct {
	x      *Index
	blocks []blocks // each shard's
	// Groups' uids are copied into a run and sent to gather, which adds
	// their pairs to blocks; free gives runs back.
	run      *run
	runs     chan *run
	free     chan *run
	gathered chan struct{}
}

// run is the uids of groups added one after another: groups[i]'s are the
// next counts[i] uids.
type run struct {
	uids   []membership.UID
	groups []uint32 // numbers
	counts []int
}

// runUIDs is how many uids a run holds before it is sent: enough that
// sending one costs nothing beside its uids' pairs.
const runUIDs = 1 << 16

// Gather starts gathering pairs for x, which must be empty and not yet
// shared.
func (x *Index) Gather() *Gathered {
	const runs = 4 // in flight, beside the one filling
	g := &Gathered{x: x, blocks: make([]blocks, len(x.shards)),
		runs: make(chan *run, runs), free: make(chan *run, runs+1), gathered: make(chan struct{})}
	for range runs + 1 {
		g.free <- &run{}
	}
	g.run = <-g.free
	go g.gather()
	return g
}

// Add gathers the memberships of uids, which it does not keep, of group
// number n.
func (g *Gathered) Add(uids []membership.UID, n uint32) {
	r := g.run
	r.uids = append(r.uids, uids...)
	r.groups = append(r.groups, n)
	r.counts = append(r.counts, len(uids))
	if len(r.uids) >= runUIDs {
		g.runs <- r
		g.run = <-g.free
	}
}

// gather adds the pairs of each run sent to their shards' blocks.
func (g *Gathered) gather() {
	defer close(g.gathered)
	for r := range g.runs {
		uids := r.uids
		for i, number := range r.groups {
			for _, uid := range uids[:r.counts[i]] {
				k, user := g.x.key(uid)
				g.blocks[k].append(packed.Pair{User: user, Group: number})
			}
			uids = uids[r.counts[i]:]
		}
		r.uids, r.groups, r.counts = r.uids[:0], r.groups[:0], r.counts[:0]
		g.free <- r
	}
}

// Drop stops gathering without filling: the store is to be dropped.
func (g *Gathered) Drop() {
	close(g.runs)
	<-g.gathered
	*g = Gathered{}
}

// Fill fills each shard of x, which must be empty and not yet shared, with
// the pairs g gathered, once it has every one, which it sorts: the shards on every core at once,
// as a restart of a hundred million memberships sorts as many pairs. Each
// worker copies a shard's pairs into room of its own, reused from shard to
// shard, and lets the blocks go.
func (x *Index) Fill(g *Gathered) {
	g.runs <- g.run
	close(g.runs)
	<-g.gathered
	pairs := g.blocks
	workers := shards.Workers(len(pairs))
	type room struct{ ps, scratch []packed.Pair } // a worker's, for the sort
	rooms := make([]room, workers)
	shards.Parallel(workers, len(pairs), func(w, k int) {
		r := &rooms[w]
		if cap(r.ps) < pairs[k].n {
			r.ps = make([]packed.Pair, 0, pairs[k].n)
		}
		ps := pairs[k].appendTo(r.ps[:0])
		pairs[k] = blocks{} // let them go
		r.scratch = sortByUser(ps, r.scratch)
		sortRuns(ps)
		x.shards[k].pairs.Fill(ps)
		users := 0
		for i, p := range ps {
			if i == 0 || p.User != ps[i-1].User {
				users++
			}
		}
		x.users.Add(int64(users))
	})
}

// sortRuns sorts each user's pairs of ps, which are sorted by user, by
// group. They came in the snapshot's order of groups, and the store that
// loads it numbers a group by its slot in its shard (slot*shards +
// shard), each shard's slots given out in that order: a user's groups are
// in ascending numbers but where two were loaded close together, in
// different shards. A pass finds those users, and sorts theirs alone.
func sortRuns(ps []packed.Pair) {
	for i := 1; i < len(ps); i++ {
		if ps[i].User != ps[i-1].User || ps[i].Group > ps[i-1].Group {
			continue
		}
		start, end := i-1, i+1
		for start > 0 && ps[start-1].User == ps[i].User {
			start--
		}
		for end < len(ps) && ps[end].User == ps[i].User {
			end++
		}
		slices.SortFunc(ps[start:end], func(a, b packed.Pair) int { return cmp.Compare(a.Group, b.Group) })
		i = end - 1
	}
}

// blocks holds pairs, in the order appended, in blocks: a restart appends
// a hundred million pairs to the shards' blocks without copying them as a
// slice grown by append would, and without counting them first. A pair
// whose user is below 2^32 (a uid below 2^32 times the shards) takes 8
// bytes, user and group in one word, not a pair's 16: the blocks are fresh
// memory, which the kernel clears and maps a page at a time, and that was
// most of what they cost.
type blocks struct {
	narrow [][]uint64      // user<<32 | group
	wide   [][]packed.Pair // the pairs of users from 2^32 on
	n      int
}

// A shard's first block holds firstBlock pairs, each next one twice as
// many as the one before, up to BlockPairs: a small store's load takes
// little room, a large one's blocks are large.
const (
	firstBlock = 1 << 8
	BlockPairs = 1 << 16
)

func (b *blocks) append(p packed.Pair) {
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
		bs = append(bs, make([]T, 0, firstBlock))
		*blocks = bs
	} else if last := bs[len(bs)-1]; len(last) == cap(last) {
		bs = append(bs, make([]T, 0, min(2*cap(last), BlockPairs)))
		*blocks = bs
	}
	last := &bs[len(bs)-1]
	*last = append(*last, v)
}

// appendTo appends b's pairs to ps: the narrow ones, then the wide ones.
// A user's pairs are all narrow or all wide, so each user's stay in the
// order appended.
func (b *blocks) appendTo(ps []packed.Pair) []packed.Pair {
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

// sortByUser sorts ps, which are in group order, by user, keeping the
// group order within each user: the order of packed.ComparePairs. It is a
// radix sort of the users' bits, 11 at a time, so a restart of a hundred
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
