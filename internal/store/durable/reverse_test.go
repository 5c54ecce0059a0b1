package durable

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
	"github.com/stretchr/testify/require"
)

func TestForwardAndReverseAgreeAfterConcurrentChanges(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T, dir string) membership.Store
	}{
		{"memory", func(t *testing.T, _ string) membership.Store { return memory.New() }},
		{"durable", func(t *testing.T, dir string) membership.Store {
			d := openTestDurable(t, dir, Options{ChangesKeep: keepAll, SnapshotBytes: 16 << 10})
			t.Cleanup(func() { _ = d.Close() })
			return d
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := tc.open(t, dir)
			groups := []string{"g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7"}
			var uids []membership.UID
			for uid := membership.UID(1); uid <= 30; uid++ {
				uids = append(uids, uid)
			}
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(w), 9))
					for range 400 {
						g := groups[rng.IntN(len(groups))]
						a, b := membership.UID(rng.IntN(30)+1), membership.UID(rng.IntN(30)+1)
						var err error
						if rng.IntN(2) == 0 {
							_, err = storetest.Add(context.Background(), s, g, []membership.User{{UID: a}, {UID: b}})
						} else {
							_, err = storetest.Remove(context.Background(), s, g, []membership.UID{a, b})
						}
						if err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			storetest.ReverseAgrees(t, s, groups, uids)
			if d, ok := s.(*Store); ok {
				require.NoError(t, d.Close())
				reopened := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
				defer reopened.Close()
				storetest.ReverseAgrees(t, reopened, groups, uids)
			}
		})
	}
}
