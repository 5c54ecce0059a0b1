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

// A round sizes what its workers find by the number of workers it read
// once (shards.Workers), and shards.Parallel gives each a number below it:
// a change of GOMAXPROCS meanwhile (a call, or the runtime's own update to
// a new cgroup CPU limit) gives no worker a number past them. This test
// changes GOMAXPROCS beside rounds; a worker past them would crash the
// process (index out of range).
func TestARoundSurvivesAGOMAXPROCSChange(t *testing.T) {
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
