package memory

import (
	"context"
	"fmt"
	"iter"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// smallKind is a kind of group of the mixed model test: its uids below
// 2^bits, so that its members pack in its struct up to small, in its heap
// set up to medium, and go to chunks beyond (package packed).
type smallKind struct {
	bits          int
	small, medium int
}

// packedCap returns how many uids of b bits words of packed uids hold.
func packedCap(b, words int) int { return min(32, (64*words-16)/b) }

// TestSmallAndLargeGroupsAgreeWithAModel runs a seeded random sequence of
// writes on groups of four kinds of uids (of 7, 17, 40 and 63 bits),
// whose sizes wander up and down across the sizes where their members
// move between the forms they are kept in (packed in the group, packed
// beside it, in chunks), beside large groups of thousands of the same
// users. It checks the store against a map model: lists, pages, members,
// users' groups, counts, pages of groups with their sizes, and after a
// round trip through a snapshot; and that every kind's groups crossed
// both sizes both ways.
func TestSmallAndLargeGroupsAgreeWithAModel(t *testing.T) {
	for _, shards := range []int{1, 7} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			smallAndLargeAgainstAModel(t, shards)
		})
	}
}

func smallAndLargeAgainstAModel(t *testing.T, shards int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, uint64(shards)))
	m := NewWith(Options{Shards: shards, ChangesKeep: membership.DefaultChangesKeep})
	md, seen := diffModel{}, map[membership.UID]bool{}
	var kinds []smallKind
	for _, b := range []int{7, 17, 40, 63} {
		kinds = append(kinds, smallKind{bits: b, small: packedCap(b, 2), medium: packedCap(b, 4)})
	}
	kindOf := map[string]smallKind{}
	var groupIDs []string
	for i := range 48 {
		id := fmt.Sprintf("s%02d", i)
		groupIDs = append(groupIDs, id)
		kindOf[id] = kinds[i%len(kinds)]
		md[id] = map[membership.UID]bool{}
	}
	uidOf := func(k smallKind) membership.UID {
		return membership.UID(1 + rng.Int64N(int64(1)<<k.bits-1))
	}
	// Two large groups hold thousands of the users the small ones draw
	// from, and take some of their adds.
	large := []string{"large-a", "large-b"}
	for _, id := range large {
		md[id] = map[membership.UID]bool{}
		var users []membership.User
		for _, k := range kinds {
			for range 1000 {
				u := uidOf(k)
				users = append(users, membership.User{UID: u})
				md[id][u], seen[u] = true, true
			}
		}
		_, err := storetest.Add(ctx, m, id, users)
		require.NoError(t, err)
	}
	allIDs := append(slices.Clone(groupIDs), large...)
	// crossed counts each kind's crossings of its small and medium sizes,
	// up and down.
	type crossing struct {
		bits       int
		medium, up bool
	}
	crossed := map[crossing]int{}
	// Each group's size drifts toward a target, drawn again now and then
	// between none and past its medium size.
	targets := map[string]int{}
	for step := range 4000 {
		id := groupIDs[rng.IntN(len(groupIDs))]
		k := kindOf[id]
		if rng.IntN(8) == 0 {
			targets[id] = rng.IntN(k.medium + 10)
		}
		before := len(md[id])
		smallAndLargeStep(t, ctx, rng, m, md, seen, id, k, targets[id], uidOf, large)
		after := len(md[id])
		for _, c := range []struct {
			size   int
			medium bool
		}{{k.small, false}, {k.medium, true}} {
			switch {
			case before <= c.size && after > c.size:
				crossed[crossing{k.bits, c.medium, true}]++
			case before > c.size && after <= c.size:
				crossed[crossing{k.bits, c.medium, false}]++
			}
		}
		if step%200 == 199 {
			checkAgainstModel(t, m, md, seen, allIDs, rng, step)
			checkGroupSizes(t, m, md, step)
		}
		if step%1000 == 500 {
			m = roundTrip(t, m, shards, func(*Store) {})
			checkAgainstModel(t, m, md, seen, allIDs, rng, step)
		}
	}
	checkAgainstModel(t, m, md, seen, allIDs, rng, -1)
	for _, k := range kinds {
		for _, medium := range []bool{false, true} {
			for _, up := range []bool{false, true} {
				require.Positive(t, crossed[crossing{k.bits, medium, up}], "groups of %d-bit uids crossing size %d (medium %v) up %v",
					k.bits, k.small, medium, up)
			}
		}
	}
}

// smallAndLargeStep applies one random write to the group id, of kind k,
// and to the model: adds and removes of a few users (and at times of
// many, to cross both sizes at once), replaces, deletions, a user's
// removal from every group, and batches that change id and a large group.
func smallAndLargeStep(t *testing.T, ctx context.Context, rng *rand.Rand, m *Store, md diffModel, seen map[membership.UID]bool,
	id string, k smallKind, target int, uidOf func(smallKind) membership.UID, large []string) {
	t.Helper()
	few := func() int {
		if rng.IntN(10) == 0 {
			return 1 + rng.IntN(k.medium+8)
		}
		return 1 + rng.IntN(3)
	}
	existing := func() membership.UID {
		cur := md.members(id)
		if len(cur) == 0 || rng.IntN(5) == 0 {
			return uidOf(k)
		}
		return cur[rng.IntN(len(cur))]
	}
	var err error
	switch op := rng.IntN(20); {
	case op < 12 && len(md[id]) <= target, op < 4:
		var users []membership.User
		for range few() {
			u := uidOf(k)
			users = append(users, membership.User{UID: u})
			md[id][u], seen[u] = true, true
		}
		_, err = storetest.Add(ctx, m, id, users)
	case op < 15:
		var uids []membership.UID
		for range few() {
			u := existing()
			uids = append(uids, u)
			delete(md[id], u)
		}
		_, err = storetest.Remove(ctx, m, id, uids)
	case op < 17:
		next := map[membership.UID]bool{}
		var users []membership.User
		for range rng.IntN(k.medium + 4) {
			u := existing()
			if !next[u] {
				users = append(users, membership.User{UID: u})
			}
			next[u], seen[u] = true, true
		}
		md[id] = next
		_, err = m.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: id, Users: users})
	case op < 18:
		md[id] = map[membership.UID]bool{}
		_, err = m.Write(ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: id})
	case op < 19:
		u := existing()
		for _, g := range md {
			delete(g, u)
		}
		_, err = m.Write(ctx, membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{u}})
	default:
		add, gone := uidOf(k), existing()
		l := large[rng.IntN(len(large))]
		seen[add], seen[gone] = true, true
		md[id][add] = true
		delete(md[id], gone)
		md[l][gone] = true
		delete(md[l], add)
		_, err = m.Batch(ctx, membership.Batch{Writes: []membership.Write{
			{Op: membership.OpAdd, GroupID: id, Users: []membership.User{{UID: add}}},
			{Op: membership.OpRemove, GroupID: id, UIDs: []membership.UID{gone}},
			{Op: membership.OpAdd, GroupID: l, Users: []membership.User{{UID: gone}}},
			{Op: membership.OpRemove, GroupID: l, UIDs: []membership.UID{add}},
		}})
	}
	require.NoError(t, err)
	for uid := range md[id] {
		require.Less(t, bits.Len64(uint64(uid)), k.bits+1, "a uid of kind %d bits", k.bits)
	}
}

// checkGroupSizes checks the pages of groups, with their sizes, against
// the model.
func checkGroupSizes(t *testing.T, m *Store, md diffModel, step int) {
	t.Helper()
	var want []membership.GroupSize
	for id, g := range md {
		if len(g) > 0 {
			want = append(want, membership.GroupSize{ID: id, Members: len(g)})
		}
	}
	slices.SortFunc(want, func(a, b membership.GroupSize) int { return strings.Compare(a.ID, b.ID) })
	var got []membership.GroupSize
	total := -1
	_, err := m.Groups(context.Background(), membership.GroupsOptions{}, func(n int, page iter.Seq[membership.GroupSize]) {
		total = n
		for g := range page {
			got = append(got, g)
		}
	})
	require.NoError(t, err)
	require.Equal(t, len(want), total, "step %d", step)
	require.Equal(t, want, got, "step %d", step)
}
