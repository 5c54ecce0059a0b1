package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
)

// The state the harness loads: how many groups, how large each is, and
// who is in them. Everything is a function of the options and fixed
// seeds, so every run loads the same memberships, and any group's members
// can be drawn again later (to pick requests) without keeping them.

// defaultExponent is the power law's exponent: with sizes from 1 to
// 100,000, P(size = s) ∝ s^-1.61 has a mean of 100.33 members a group, so
// a million groups hold about 100 million memberships.
const defaultExponent = 1.61

// Seeds of the draws.
const (
	seedShuffle = 30 // the order of the group sizes among the group ids
	seedMembers = 31 // each group's members (the stream is the group's index)
	seedPicks   = 32 // the requests measured
)

// groupSizes returns the sizes of groups groups, drawn from the power law
// P(s) ∝ s^-exponent on 1..maxSize: group i's size is the law's quantile
// at i/(groups-1) (a stratified draw: the sizes follow the law, from 1 to
// maxSize both included), then the sizes are shuffled among the groups
// with a fixed seed.
func groupSizes(groups, maxSize int, exponent float64) []int32 {
	cdf := make([]float64, maxSize)
	sum := 0.0
	for s := 1; s <= maxSize; s++ {
		sum += math.Pow(float64(s), -exponent)
		cdf[s-1] = sum
	}
	sizes := make([]int32, groups)
	for i := range sizes {
		u := float64(i) / float64(max(groups-1, 1)) * sum
		sizes[i] = int32(min(sort.SearchFloat64s(cdf, u)+1, maxSize))
	}
	rng := rand.New(rand.NewPCG(seedShuffle, 0))
	rng.Shuffle(len(sizes), func(i, j int) { sizes[i], sizes[j] = sizes[j], sizes[i] })
	return sizes
}

// powerLawMean returns the mean of P(s) ∝ s^-exponent on 1..maxSize.
func powerLawMean(maxSize int, exponent float64) float64 {
	var weights, total float64
	for s := 1; s <= maxSize; s++ {
		w := math.Pow(float64(s), -exponent)
		weights += w
		total += float64(s) * w
	}
	return total / weights
}

// members returns the members of group g, of size size: a uniform sample
// without replacement from 1..users, in ascending order. Every user is
// equally likely to be in any group, so a user is in about
// memberships/users groups (a Poisson count).
func members(g, size, users int) []int64 {
	rng := rand.New(rand.NewPCG(seedMembers, uint64(g)))
	uids := make([]int64, 0, size)
	for len(uids) < size {
		for len(uids) < cap(uids) {
			uids = append(uids, rng.Int64N(int64(users))+1)
		}
		slices.Sort(uids)
		uids = slices.Compact(uids) // draws again for the duplicates
	}
	return uids
}

// groupID is the id of group g: "g" and seven digits, so that ids sort as
// their numbers do.
func groupID(g int) string { return fmt.Sprintf("g%07d", g) }

// segment is part of a group's members, added by one change of a batch.
type segment struct {
	group int
	uids  []int64
}

// batch is one POST /batch: add changes of segments, at most maxUsers
// users and maxChanges changes in all.
type batch []segment

// users returns how many users b adds.
func (b batch) users() int {
	n := 0
	for _, s := range b {
		n += len(s.uids)
	}
	return n
}

// batcher packs the groups of a state, in order of their ids, into
// batches of at most maxUsers users and maxChanges changes: small groups
// share a batch; a group larger than what a batch has room for is split
// across batches, each part an add change of ascending uids.
type batcher struct {
	st                   state
	maxUsers, maxChanges int

	next int     // the next group to draw
	left []int64 // members of the group before next not yet in a batch
}

// batch returns the next batch, or nil once every group is in one.
func (p *batcher) batch() batch {
	var b batch
	room := p.maxUsers
	for room > 0 && len(b) < p.maxChanges {
		if len(p.left) == 0 {
			if p.next == len(p.st.sizes) {
				break
			}
			p.left = p.st.members(p.next)
			p.next++
		}
		n := min(room, len(p.left))
		b = append(b, segment{group: p.next - 1, uids: p.left[:n:n]})
		p.left = p.left[n:]
		room -= n
	}
	return b
}

// appendBody appends b as the JSON body of POST /batch.
func (b batch) appendBody(out []byte) []byte {
	out = append(out, `{"changes":[`...)
	for i, s := range b {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"op":"add","group":"`...)
		out = append(out, groupID(s.group)...)
		out = append(out, `","users":[`...)
		for j, uid := range s.uids {
			if j > 0 {
				out = append(out, ',')
			}
			out = strconv.AppendInt(out, uid, 10)
		}
		out = append(out, "]}"...)
	}
	return append(out, "]}"...)
}
