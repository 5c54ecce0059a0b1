package memory

import (
	"context"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// TestReadersBesideWriters runs writers beside readers of every kind (lists,
// user groups, checks, the feed, exports and backups), for the race
// detector, then checks that the reverse index agrees with the groups and
// that the feed's revisions and times follow each other.
func TestReadersBesideWriters(t *testing.T) {
	ctx := context.Background()
	m := NewWith(Options{Shards: 4, ChangesKeep: 100000})
	groups := []string{"a", "b", "c", "d", "e", "f"}
	uidOf := func(rng *rand.Rand) membership.UID {
		if rng.IntN(2) == 0 {
			return membership.UID(1 + rng.IntN(40))
		}
		return membership.UID(math.MaxInt64 - rng.IntN(40))
	}
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 600 {
				id := groups[rng.IntN(len(groups))]
				var err error
				switch rng.IntN(10) {
				case 0:
					_, err = m.Write(ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: id})
				case 1:
					_, err = m.Write(ctx, membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{uidOf(rng)}})
				case 2:
					_, err = m.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: id, Users: []membership.User{{UID: uidOf(rng)}}})
				case 3, 4, 5:
					_, err = storetest.Remove(ctx, m, id, []membership.UID{uidOf(rng), uidOf(rng)})
				default:
					_, err = storetest.Add(ctx, m, id, []membership.User{{UID: uidOf(rng)}, {UID: uidOf(rng)}, {UID: uidOf(rng), Nickname: "n", HasNickname: true}})
				}
				if err != nil {
					panic(err)
				}
			}
		})
	}
	for r := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 2))
			for i := range 300 {
				id := groups[rng.IntN(len(groups))]
				_, _ = m.ListMembers(ctx, id, membership.ListOptions{After: uidOf(rng), Limit: rng.IntN(4)}, func(_ int, ms iter.Seq[membership.Member]) {
					for range ms {
					}
				})
				_ = m.UserGroups(ctx, uidOf(rng), membership.GroupListOptions{}, func(_ int, gs iter.Seq[string]) {
					for range gs {
					}
				})
				_, _, _ = m.CheckMembers(ctx, []membership.Check{{GroupID: id, UID: uidOf(rng)}})
				cs, _, _ := m.Changes(ctx, membership.ChangeOptions{})
				for _, c := range cs {
					if c.Revision == 0 || c.Time.IsZero() {
						panic(fmt.Sprint("a change without its revision or time: ", c))
					}
				}
				if i%50 == 0 {
					if r == 0 {
						_ = m.Export()
					} else {
						_ = m.Backup()
					}
				}
			}
		})
	}
	wg.Wait()

	// The reverse index agrees with the groups.
	want := map[membership.UID][]string{}
	for _, id := range groups {
		_, err := m.ListMembers(ctx, id, membership.ListOptions{}, func(_ int, ms iter.Seq[membership.Member]) {
			for mb := range ms {
				want[mb.UID] = append(want[mb.UID], id)
			}
		})
		require.NoError(t, err)
	}
	for uid, gs := range want {
		var got []string
		require.NoError(t, m.UserGroups(ctx, uid, membership.GroupListOptions{}, func(_ int, ids iter.Seq[string]) {
			for id := range ids {
				got = append(got, id)
			}
		}))
		require.Equal(t, gs, got, "uid %d", uid)
	}
	require.Equal(t, int64(len(want)), m.Stats().Users)
	cs, last, err := m.Changes(ctx, membership.ChangeOptions{})
	require.NoError(t, err)
	require.Equal(t, last, cs[len(cs)-1].Revision)
	for i := 1; i < len(cs); i++ {
		require.Equal(t, cs[i-1].Revision+1, cs[i].Revision)
		require.False(t, cs[i].Time.Before(cs[i-1].Time), "change %d is before the one before it", cs[i].Revision)
	}
}
