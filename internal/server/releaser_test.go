package server

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"example.com/groupmembership/internal/memrelease"
)

// TestReleaserLogsEachReleaseAndStops drives the service's releaser with
// ticks of its own: 100 MiB allocated, then 30 s with none, then a
// release, logged with what it gave back; stop returns once it has
// stopped.
func TestReleaserLogsEachReleaseAndStops(t *testing.T) {
	var logged bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	ticks := make(chan time.Time)
	// Read by the releaser's goroutine alone: 0 at the first tick, 100 MiB
	// from the second on.
	reads := 0
	sample := func() memrelease.Sample {
		reads++
		if reads == 1 {
			return memrelease.Sample{}
		}
		return memrelease.Sample{Allocated: 100 << 20, Live: 10 << 20}
	}
	releases := 0
	release := func() int64 {
		releases++
		return 5 << 20
	}
	stop, _ := startReleaser(context.Background(), logger, releaser{ticks: ticks, sample: sample, release: release})
	t0 := time.Unix(1_000_000, 0)
	for s := 0; s <= 40; s += 5 {
		ticks <- t0.Add(time.Duration(s) * time.Second)
	}
	stop() // returns once the goroutine has stopped: what it wrote is ours to read
	assert.Equal(t, 1, releases, "one release: 30 s idle after 100 MiB, at 35 s")
	lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
	if assert.Len(t, lines, 1) {
		assert.Contains(t, lines[0], `level=INFO msg="idle after a burst of work: gave the free memory back to the system" returned_mib=5 took=`)
	}
}

// TestReleaserStopsWithoutTicks: a releaser that never saw a tick stops
// when told.
func TestReleaserStopsWithoutTicks(t *testing.T) {
	stop, _ := startReleaser(context.Background(), slog.New(slog.DiscardHandler), releaser{
		ticks:   make(chan time.Time),
		sample:  func() memrelease.Sample { panic("no tick came: nothing to read") },
		release: func() int64 { panic("no tick came: nothing to release") },
	})
	stop()
}

// TestReleaserStopsWhenItsContextEnds: the signal to stop ends the
// releaser at once, before the drain, though nobody has called stop yet.
func TestReleaserStopsWhenItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make(chan time.Time)
	stop, stopped := startReleaser(ctx, slog.New(slog.DiscardHandler), releaser{
		ticks:   ticks,
		sample:  func() memrelease.Sample { return memrelease.Sample{} },
		release: func() int64 { panic("no release after the signal") },
	})
	defer stop()
	ticks <- time.Unix(0, 0) // running
	cancel()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the releaser did not stop when its context ended")
	}
}
