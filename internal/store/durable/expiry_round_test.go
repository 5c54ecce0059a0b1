package durable

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/expiry"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// nearEdgeUID draws uids from a few near 1, a few near MaxInt64 and 80
// small ones, so that writes meet the same memberships often.
func nearEdgeUID(rng *rand.Rand) membership.UID {
	switch rng.IntN(4) {
	case 0:
		return membership.UID(1 + rng.Int64N(6))
	case 1:
		return membership.UID(math.MaxInt64 - rng.Int64N(6))
	}
	return membership.UID(1 + rng.Int64N(80))
}

// The committer applies runs of expires together; a replay of the log after
// a kill applies them one at a time: both must give the same state and
// feed. Runs are made two ways: the expirer's writes in flight beside
// other writers, and expires queued while the committer is held (applyMu),
// so that one commit holds them all, with repeats of the same group and
// uid and adds of the same users between them.
func TestDurableRoundOfExpiresLiveEqualsReplay(t *testing.T) {
	for seed := range uint64(4) {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(seed, 11))
			dir := t.TempDir()
			d := openTestDurable(t, dir, markedOpts())
			t0 := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
			groups := make([]string, 12)
			for i := range groups {
				groups[i] = "g" + strconv.Itoa(i)
			}
			users := func(rng *rand.Rand, base time.Time) []membership.User {
				var us []membership.User
				for range 1 + rng.IntN(10) {
					u := membership.User{UID: nearEdgeUID(rng)}
					if rng.IntN(4) > 0 {
						u.Expiry = membership.Expiry{Set: true, At: base.Add(time.Duration(rng.IntN(5)) * time.Second)}
					}
					if rng.IntN(3) == 0 {
						u.Nickname, u.HasNickname = "n"+strconv.Itoa(rng.IntN(4)), true
					}
					us = append(us, u)
				}
				return us
			}
			for range 80 {
				_, err := d.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: groups[rng.IntN(len(groups))], Users: users(rng, t0)})
				require.NoError(t, err)
			}
			clock := &storetest.Clock{}
			for round := range 6 {
				now := t0.Add(time.Duration(round) * time.Second)
				clock.Set(now)
				if round%2 == 0 {
					// The expirer's writes in flight, beside adds of the
					// same users and removes.
					var wg sync.WaitGroup
					wg.Go(func() {
						_, err := expiry.New(d, clock.Now, nil).ExpireDue(ctx)
						if err != nil {
							panic(err)
						}
					})
					for w := range 3 {
						wg.Go(func() {
							rng := rand.New(rand.NewPCG(seed, uint64(round*10+w)))
							for range 20 {
								var err error
								if rng.IntN(3) == 0 {
									_, err = d.Write(ctx, membership.Write{Op: membership.OpRemove, GroupID: groups[rng.IntN(len(groups))], UIDs: []membership.UID{nearEdgeUID(rng)}})
								} else {
									_, err = d.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: groups[rng.IntN(len(groups))], Users: users(rng, now)})
								}
								if err != nil {
									panic(err)
								}
							}
						})
					}
					wg.Wait()
					continue
				}
				// Expires queued while the committer is held: one commit.
				due := d.DueExpiries(now, 1<<20)
				var ws []membership.Write
				for _, dd := range due {
					w := dd.Write
					ws = append(ws, w)
					if rng.IntN(2) == 0 { // the same again: a no-op once the first applied
						ws = append(ws, w)
					}
				}
				if len(ws) == 0 {
					continue
				}
				d.applyMu.Lock()
				held := true
				var wg sync.WaitGroup
				queued := 0
				for i, w := range ws {
					if i > 0 && rng.IntN(4) == 0 {
						add := membership.Write{Op: membership.OpAdd, GroupID: groups[rng.IntN(len(groups))], Users: users(rng, now.Add(-time.Second))}
						wg.Go(func() {
							if _, err := d.Write(ctx, add); err != nil {
								panic(err)
							}
						})
						queued++
						waitQueued(d, queued)
					}
					wg.Go(func() {
						if _, err := d.Write(ctx, w); err != nil {
							panic(err)
						}
					})
					queued++
					waitQueued(d, queued)
				}
				if held {
					d.applyMu.Unlock()
				}
				wg.Wait()
			}
			live := exportSorted(d)
			liveStats, liveExpiring := d.mem.Stats(), d.mem.ExpiryCount()
			d.log.Mark()
			crash(t, d)
			d = openTestDurable(t, dir, markedOpts())
			defer d.Close()
			replayed := exportSorted(d)
			require.Equal(t, live, replayed)
			stats := d.mem.Stats()
			require.Equal(t, [3]int64{liveStats.Groups, liveStats.Members, liveStats.Users}, [3]int64{stats.Groups, stats.Members, stats.Users})
			require.Equal(t, liveExpiring, d.mem.ExpiryCount())
			var expires int
			for _, c := range live.Changes {
				if c.Op == membership.OpExpire {
					expires++
				}
			}
			require.Positive(t, expires, fmt.Sprint("expires in the feed"))
		})
	}
}

// waitQueued waits until n changes are with the committer: the first
// is held at applyMu, the rest queued. A change that Check found would
// change nothing is answered at once and never queued, so it waits for
// whichever comes first. It yields, it does not sleep.
func waitQueued(d *Store, n int) {
	for i := 0; i < 100000; i++ {
		if len(d.changes) >= n-1 {
			return
		}
		runtime.Gosched()
	}
}
