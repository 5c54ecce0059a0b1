package memory

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// expireAll sizes found by runtime.GOMAXPROCS(0), then parallel reads it
// again for its workers: a change of GOMAXPROCS in between (a call, or the
// runtime's own update to a new cgroup CPU limit since Go 1.25) gives a
// worker a number past found, and the round panics in a goroutine of its
// own, taking the process down. This test changes GOMAXPROCS beside
// rounds; it crashes (index out of range) when it finds the window.
func TestReviewRoundSurvivesAGOMAXPROCSChange(t *testing.T) {
	if testing.Short() {
		t.Skip("a stress test")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	ctx := context.Background()
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; !stop.Load(); i++ {
			runtime.GOMAXPROCS(1 + i%8)
		}
	}()
	defer func() { stop.Store(true); <-done }()
	for round := range 400 {
		m := NewWith(Options{Shards: 64})
		for g := range 4 {
			var us []membership.User
			for u := range 64 {
				us = append(us, membership.User{UID: membership.UID(1 + u + 64*g), Expiry: membership.Expiry{Set: true, At: at}})
			}
			_, err := m.Apply(membership.Write{Op: membership.OpAdd, GroupID: "g" + strconv.Itoa(g), Users: us, Time: at.Add(-time.Hour)})
			require.NoError(t, err)
		}
		var ws []membership.Write
		for _, d := range m.DueExpiries(at, 1<<20) {
			ws = append(ws, d.Write)
		}
		res, err := m.WriteExpiries(ctx, ws)
		require.NoError(t, err, "round %d", round)
		require.Len(t, res, len(ws))
	}
}
