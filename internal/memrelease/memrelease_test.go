package memrelease

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var testPolicy = Policy{Idle: 30 * time.Second, IdleBytes: 4 << 20, MinBytes: 64 << 20}

// at is the time of a test's observations: t0 plus s seconds.
func at(s int) time.Time { return time.Unix(1_000_000, 0).Add(time.Duration(s) * time.Second) }

func TestWatcherReleasesOnceIdleAfterABurst(t *testing.T) {
	w := NewWatcher(testPolicy)
	assert.False(t, w.Observe(at(0), Sample{Allocated: 0}), "the first observation only starts the count")
	assert.False(t, w.Observe(at(5), Sample{Allocated: 500 << 20}), "busy")
	// Idle from 5 s on: less than IdleBytes a tick.
	for s := 10; s < 35; s += 5 {
		assert.False(t, w.Observe(at(s), Sample{Allocated: 500<<20 + uint64(s)<<10}), "idle for %d s only", s-5)
	}
	assert.True(t, w.Observe(at(35), Sample{Allocated: 500<<20 + 35<<10}), "idle for 30 s after 500 MiB")
	// Released: no second release while nothing more is allocated.
	for s := 40; s < 200; s += 5 {
		assert.False(t, w.Observe(at(s), Sample{Allocated: 500<<20 + 36<<10}), "at %d s", s)
	}
}

func TestWatcherDoesNotReleaseWhileBusy(t *testing.T) {
	w := NewWatcher(testPolicy)
	w.Observe(at(0), Sample{Allocated: 0})
	var allocated uint64
	for s := 5; s < 300; s += 5 {
		allocated += 4 << 20 // exactly IdleBytes a tick: busy
		assert.False(t, w.Observe(at(s), Sample{Allocated: allocated}), "at %d s", s)
	}
}

func TestWatcherBusyTickRestartsTheIdleTime(t *testing.T) {
	w := NewWatcher(testPolicy)
	w.Observe(at(0), Sample{Allocated: 0})
	w.Observe(at(5), Sample{Allocated: 100 << 20})
	assert.False(t, w.Observe(at(30), Sample{Allocated: 100 << 20}))
	w.Observe(at(31), Sample{Allocated: 110 << 20}) // busy again
	assert.False(t, w.Observe(at(60), Sample{Allocated: 110 << 20}), "idle for 29 s since the last busy tick")
	assert.True(t, w.Observe(at(61), Sample{Allocated: 110 << 20}), "idle for 30 s")
}

func TestWatcherNeedsMinBytesSinceTheLastRelease(t *testing.T) {
	w := NewWatcher(testPolicy)
	w.Observe(at(0), Sample{Allocated: 0})
	// Less than MinBytes allocated in all, in small steps (each an idle
	// tick): no release until the 64th MiB.
	var allocated uint64
	s := 0
	for allocated < 63<<20 {
		s += 5
		allocated += 1 << 20
		assert.False(t, w.Observe(at(s), Sample{Allocated: allocated}), "at %d s, %d MiB allocated", s, allocated>>20)
	}
	allocated += 1 << 20
	assert.True(t, w.Observe(at(s+5), Sample{Allocated: allocated}), "64 MiB allocated, idle all along")
	// Another MinBytes, then idle: released again, counted from the last.
	s += 5
	allocated += 64 << 20
	assert.False(t, w.Observe(at(s+5), Sample{Allocated: allocated}), "busy")
	assert.False(t, w.Observe(at(s+34), Sample{Allocated: allocated}))
	assert.True(t, w.Observe(at(s+35), Sample{Allocated: allocated}))
}

func TestWatcherCountsFromTheProcessStart(t *testing.T) {
	// A process that allocated 1 GiB before the watcher started (loading
	// its data at a restart, say), and little since: released once idle.
	w := NewWatcher(testPolicy)
	assert.False(t, w.Observe(at(0), Sample{Allocated: 1 << 30}))
	for s := 5; s < 30; s += 5 {
		assert.False(t, w.Observe(at(s), Sample{Allocated: 1 << 30}), "idle for %d s only", s)
	}
	assert.True(t, w.Observe(at(30), Sample{Allocated: 1 << 30}))
	assert.False(t, w.Observe(at(35), Sample{Allocated: 1 << 30}))
}

func TestRunReleasesWhenTheWatcherSaysAndStopsWithItsContext(t *testing.T) {
	ticks := make(chan time.Time)
	released := make(chan struct{}, 2)
	// The counter at each tick, read by Run's goroutine alone: 100 MiB in
	// the first 5 s, then nothing.
	counts := []uint64{0, 100 << 20, 100 << 20, 100 << 20, 100 << 20, 100 << 20, 100 << 20, 100 << 20, 100 << 20}
	read := 0
	sample := func() Sample {
		v := counts[min(read, len(counts)-1)]
		read++
		return Sample{Allocated: v}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, ticks, testPolicy, sample, func() { released <- struct{}{} })
	}()
	for s := 0; s < 35; s += 5 {
		ticks <- at(s)
	}
	assert.Empty(t, released, "idle for 25 s only")
	ticks <- at(35) // idle for 30 s: Run releases before it takes the next tick
	ticks <- at(40)
	assert.Len(t, released, 1, "released once, after 30 s idle")
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return when its context ended")
	}
}

func TestReleaseReturnsFreedMemory(t *testing.T) {
	// 64 MiB allocated and dropped: after a release, the heap has returned
	// memory to the system (at least part of it: the runtime may keep some
	// for its next allocations).
	before := ReadSample().Allocated
	garbage := make([][]byte, 64)
	for i := range garbage {
		garbage[i] = make([]byte, 1<<20)
		garbage[i][0] = 1
	}
	require.GreaterOrEqual(t, ReadSample().Allocated-before, uint64(64<<20), "the sample counts the allocations")
	runtime.KeepAlive(garbage)
	garbage = nil
	assert.GreaterOrEqual(t, Release(), int64(32<<20), "a release returns the freed 64 MiB, or most of it")
	assert.Positive(t, ReadSample().Live, "the sample has the live heap")
}

func TestWatcherNeedsHalfTheLiveHeapWhenThatIsMore(t *testing.T) {
	// A heap of 1 GiB live: a burst of 100 MiB, then idle, is no reason
	// to release (the collector would let the heap grow by 512 MiB before
	// it collects); 512 MiB is.
	w := NewWatcher(testPolicy)
	live := uint64(1 << 30)
	w.Observe(at(0), Sample{Allocated: 0, Live: live})
	w.Observe(at(5), Sample{Allocated: 100 << 20, Live: live})
	for s := 10; s < 100; s += 5 {
		assert.False(t, w.Observe(at(s), Sample{Allocated: 100 << 20, Live: live}), "at %d s", s)
	}
	w.Observe(at(100), Sample{Allocated: 512 << 20, Live: live})
	for s := 105; s < 130; s += 5 {
		assert.False(t, w.Observe(at(s), Sample{Allocated: 512 << 20, Live: live}), "idle for %d s only", s-100)
	}
	assert.True(t, w.Observe(at(130), Sample{Allocated: 512 << 20, Live: live}))
}
