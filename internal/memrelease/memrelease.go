// Package memrelease gives back to the system the memory that a burst of
// work left free, once the process has been idle for a while.
//
// The runtime returns free memory by itself, gradually, and keeps some room
// above what its last collection found in use: after a load of a hundred
// million memberships, the process still held 1.4 to 1.6 GB after four
// minutes idle, by run. A release (debug.FreeOSMemory: a collection, then
// every free page returned) brings it down to the live heap and what the
// runtime needs beside it: 1.3 GB there, a minute after the load.
// It costs a collection (1.9 s of one core at a hundred million
// memberships), so it is made only when the process has allocated little
// for a while after it allocated a lot.
package memrelease

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Policy says when a release is made: once the process has allocated less
// than IdleBytes in each observation for Idle, and, since the last release
// (or its start), at least MinBytes and at least half its live heap: what
// the collector lets the heap grow by before it collects at GOGC=50, so
// that releases come no more often than the collections the runtime makes
// anyway, whatever a client's bursts.
type Policy struct {
	Idle      time.Duration
	IdleBytes uint64
	MinBytes  uint64
}

// DefaultPolicy is the service's: 30 s of less than 1 MiB allocated between
// observations (5 s apart, see Run: probes, metric scrapes and a trickle of
// reads allocate less), after 64 MiB allocated since the last release. A
// load under 1 MiB in 5 s counts as idle, and then takes at least 5 min 20 s
// to allocate the 64 MiB of a release.
var DefaultPolicy = Policy{Idle: 30 * time.Second, IdleBytes: 1 << 20, MinBytes: 64 << 20}

// Sample is what the Watcher observes of the heap.
type Sample struct {
	// Allocated is the bytes the process has allocated since it started, a
	// counter that only grows; Live, the heap the last collection found
	// live.
	Allocated, Live uint64
}

// Watcher applies a Policy to Samples.
type Watcher struct {
	policy Policy
	// started is false until the first observation, which sets the others.
	started bool
	// last is the counter at the last observation, idleSince when the
	// observations began to grow by less than IdleBytes, released the
	// counter at the last release (0 before the first: what the process
	// allocated before the Watcher started, loading its data say, counts).
	last, released uint64
	idleSince      time.Time
}

// NewWatcher returns a Watcher of p.
func NewWatcher(p Policy) *Watcher { return &Watcher{policy: p} }

// Observe takes the sample s, taken at now, and reports whether a release
// is due now. When it reports true, the caller releases, and the Watcher
// counts from s.Allocated on.
func (w *Watcher) Observe(now time.Time, s Sample) bool {
	if !w.started {
		w.started, w.last, w.idleSince = true, s.Allocated, now
		return false
	}
	grew := s.Allocated - w.last
	w.last = s.Allocated
	if grew >= w.policy.IdleBytes {
		w.idleSince = now // busy: the idle time starts again
		return false
	}
	if now.Sub(w.idleSince) < w.policy.Idle || s.Allocated-w.released < max(w.policy.MinBytes, s.Live/2) {
		return false
	}
	w.released = s.Allocated
	return true
}

// Run samples the heap at every tick until ctx ends, and calls release
// when the Watcher of p says a release is due. It returns when ctx ends,
// after a release under way has finished.
func Run(ctx context.Context, ticks <-chan time.Time, p Policy, sample func() Sample, release func()) {
	w := NewWatcher(p)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticks:
			if w.Observe(now, sample()) {
				release()
			}
		}
	}
}

// ReadSample reads the heap's Sample from runtime/metrics
// (/gc/heap/allocs:bytes, /gc/heap/live:bytes).
func ReadSample() Sample {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return Sample{Allocated: s[0].Value.Uint64(), Live: s[1].Value.Uint64()}
}

// Release collects the garbage and returns every free page of the heap to
// the system, and returns how many bytes more the heap had returned to it
// after than before (runtime/metrics' /memory/classes/heap/released:bytes).
func Release() (returned int64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	debug.FreeOSMemory()
	metrics.Read(s)
	return int64(s[0].Value.Uint64()) - int64(before)
}
