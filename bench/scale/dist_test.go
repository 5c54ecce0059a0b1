package main

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
)

// The default law's mean is about 100, so that a million groups hold
// about 100 million memberships, and the stratified draw keeps it.
func TestGroupSizesMean(t *testing.T) {
	mean := powerLawMean(100_000, defaultExponent)
	if math.Abs(mean-100) > 1 {
		t.Fatalf("got a mean of %.2f members a group, want 100 ± 1", mean)
	}
	sizes := groupSizes(1_000_000, 100_000, defaultExponent)
	total, largest, ones := 0, int32(0), 0
	for _, s := range sizes {
		total += int(s)
		largest = max(largest, s)
		if s == 1 {
			ones++
		}
	}
	if got := float64(total) / float64(len(sizes)); math.Abs(got-mean) > 0.01*mean {
		t.Errorf("got a drawn mean of %.2f, want %.2f ± 1%%", got, mean)
	}
	if largest != 100_000 {
		t.Errorf("got a largest group of %d, want 100000", largest)
	}
	if got, want := float64(ones)/float64(len(sizes)), 0.443; math.Abs(got-want) > 0.001 {
		t.Errorf("got a share of %.4f groups of one member, want %.3f", got, want)
	}
	if !slices.Equal(sizes[:1000], groupSizes(1_000_000, 100_000, defaultExponent)[:1000]) {
		t.Error("two draws of the sizes differ")
	}
}

func TestMembersDistinctAscendingInRange(t *testing.T) {
	for _, tt := range []struct{ g, size, users int }{{0, 1, 10}, {1, 10, 10}, {2, 5000, 10_000}, {3, 100_000, 10_000_000}} {
		uids := members(tt.g, tt.size, tt.users)
		if len(uids) != tt.size {
			t.Fatalf("group %d: got %d members, want %d", tt.g, len(uids), tt.size)
		}
		for i, uid := range uids {
			if uid < 1 || uid > int64(tt.users) || (i > 0 && uid <= uids[i-1]) {
				t.Fatalf("group %d: member %d is %d after %d, want ascending in 1..%d", tt.g, i, uid, uids[max(i-1, 0)], tt.users)
			}
		}
		if !slices.Equal(uids, members(tt.g, tt.size, tt.users)) {
			t.Errorf("group %d: two draws differ", tt.g)
		}
	}
}

// Every member of every group is in exactly one batch, and no batch
// passes the bounds.
func TestBatcherBounds(t *testing.T) {
	sizes := []int32{1, 25_000, 3, 9_999, 1, 1, 10_000, 2}
	st := state{sizes: sizes, members: func(g int) []int64 { return members(g, int(sizes[g]), 100_000) }}
	p := &batcher{st: st, maxUsers: 10_000, maxChanges: 3}
	got := make([][]int64, len(sizes))
	for b := p.batch(); b != nil; b = p.batch() {
		if b.users() > 10_000 || len(b) > 3 {
			t.Fatalf("got a batch of %d users in %d changes, want at most 10000 in 3", b.users(), len(b))
		}
		var body struct {
			Changes []struct{ Op, Group string }
		}
		if err := json.Unmarshal(b.appendBody(nil), &body); err != nil || len(body.Changes) != len(b) {
			t.Fatalf("the body does not decode to %d changes: %v", len(b), err)
		}
		for _, s := range b {
			got[s.group] = append(got[s.group], s.uids...)
		}
	}
	for g, size := range sizes {
		if want := members(g, int(size), 100_000); !slices.Equal(got[g], want) {
			t.Errorf("group %d: got %d members in batches, want its %d", g, len(got[g]), len(want))
		}
	}
}

// The small service holds 1,000 memberships: 50 groups of 10 made of 50
// users each in 10 of them, and a group of 500 of other users.
func TestSmallState(t *testing.T) {
	st := smallState(10_000_000)
	if got := st.memberships(); got != 1000 {
		t.Errorf("got %d memberships, want 1000", got)
	}
	groupsOf := map[int64]int{}
	for g := range 50 {
		if len(st.members(g)) != 10 {
			t.Errorf("group %d: got %d members, want 10", g, len(st.members(g)))
		}
		for _, uid := range st.members(g) {
			groupsOf[uid]++
		}
	}
	if len(groupsOf) != 50 {
		t.Errorf("got %d users in the groups of 10, want 50", len(groupsOf))
	}
	for uid, n := range groupsOf {
		if n != 10 {
			t.Errorf("user %d: in %d groups, want 10", uid, n)
		}
	}
	for _, uid := range st.members(50) {
		if groupsOf[uid] != 0 {
			t.Errorf("user %d is in the largest group and in groups of 10", uid)
		}
	}
}
