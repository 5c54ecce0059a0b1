// Package expiry applies the expiries of memberships (membership.OpExpire)
// and of nestings (membership.OpExpireGroups) as they come due: an Expirer asks its store what is due on its clock,
// and applies it with the store's Write, one change per group, as any
// writer would, so that every store logs, replays and shares expiries as
// it does every other change.
package expiry

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/membership"
)

// Interval is how often, at least, an Expirer looks for expiries due; it
// also looks when the earliest is due, so that a membership ends about when
// it expires while the store takes writes (the README's bound is 1 s).
const Interval = 100 * time.Millisecond

// roundMax bounds the memberships one round takes from the store: a round
// applies them and looks again, so that a million due at once are applied
// in rounds of at most this many, with other writes between them. A round
// holds its groups' shards, and the reverse index's, while the store
// applies it (about 25 ms for 50,000 on 2 cores under load), which a write
// beside it may wait. Larger rounds cost less a membership: their reverse
// pairs lie closer together, and with -data-dir a round is one commit. At
// 50,000, a million due at once end within the 1 s bound under make
// bench-expiry's load, memory-only and with -data-dir, with a write p99
// raised by tens of milliseconds meanwhile.
const roundMax = 50000

// Expirer applies a store's expiries as they come due.
type Expirer struct {
	store    store.Expiring
	now      func() time.Time
	logger   *slog.Logger
	interval time.Duration // Interval; a test's own

	applied atomic.Uint64 // memberships ended
	failed  atomic.Uint64 // rounds that could not apply what was due
	lag     *metrics.Histogram
}

// New returns an Expirer of s on the clock now (time.Now when nil).
func New(s store.Expiring, now func() time.Time, logger *slog.Logger) *Expirer {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Expirer{store: s, now: now, logger: logger, interval: Interval, lag: metrics.NewHistogram(lagBuckets)}
}

var lagBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60}

// ExpireDue applies every expiry due now, in rounds, and returns how many
// memberships it ended. It stops at the first write the store refuses,
// giving back what it had not applied, and returns the error.
func (e *Expirer) ExpireDue(ctx context.Context) (int, error) {
	ended := 0
	for {
		due := e.store.DueExpiries(e.now(), roundMax)
		if len(due) == 0 {
			return ended, nil
		}
		n, err := e.apply(ctx, due)
		ended += n
		if err != nil {
			return ended, err
		}
		if ctx.Err() != nil {
			return ended, ctx.Err()
		}
	}
}

// inFlight is how many of a round's changes the expirer has a store
// without a round writer (PostgreSQL) apply at once: a store that logs its
// writes commits those in flight together, so that a round costs one
// commit, not one for each of its groups.
const inFlight = 32

// roundWriter is a store that takes a round's expire writes in one call,
// each a change of its own, in the order given: the memory store applies
// them together, at about half the cost of one after another; the durable
// store logs them in one commit and applies them so. It answers each
// write it applied, and, when it could not apply them all, an error.
type roundWriter interface {
	WriteExpiries(ctx context.Context, ws []membership.Write) ([]membership.Result, error)
}

// apply applies due, a round from DueExpiries, and returns how many
// memberships it ended: in one call when the store is a roundWriter, else
// with up to inFlight writes at once. When the store refuses some, it
// gives back those it did not apply, and returns the error.
func (e *Expirer) apply(ctx context.Context, due []store.Due) (int, error) {
	if rw, ok := e.store.(roundWriter); ok {
		return e.applyRound(ctx, rw, due)
	}
	return e.applyInFlight(ctx, due)
}

// applyRound applies due with one call of rw's. When rw refuses some of
// it, the whole round is given back: those applied are no longer due, and
// stay ended.
func (e *Expirer) applyRound(ctx context.Context, rw roundWriter, due []store.Due) (int, error) {
	ws := make([]membership.Write, len(due))
	for i, d := range due {
		ws[i] = d.Write
	}
	results, err := rw.WriteExpiries(ctx, ws)
	ended := 0
	now := e.now()
	for i, res := range results {
		ended += res.Count
		if res.Count > 0 {
			e.lag.Observe(max(now.Sub(due[i].Earliest), 0))
		}
	}
	e.applied.Add(uint64(ended))
	if err != nil {
		e.store.RequeueExpiries(due)
		e.failed.Add(1)
	}
	return ended, err
}

// applyInFlight applies due with up to inFlight writes at once.
func (e *Expirer) applyInFlight(ctx context.Context, due []store.Due) (int, error) {
	var (
		next      atomic.Int64 // the index in due of the next write to start
		ended     atomic.Int64
		mu        sync.Mutex // guards firstErr and unapplied
		firstErr  error
		unapplied []store.Due
		wg        sync.WaitGroup
	)
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	for range min(inFlight, len(due)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(due) {
					return
				}
				d := due[i]
				if failed() {
					mu.Lock()
					unapplied = append(unapplied, d)
					mu.Unlock()
					continue
				}
				res, err := e.store.Write(ctx, d.Write)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					unapplied = append(unapplied, d)
					mu.Unlock()
					continue
				}
				ended.Add(int64(res.Count))
				e.applied.Add(uint64(res.Count))
				if res.Count > 0 {
					e.lag.Observe(max(e.now().Sub(d.Earliest), 0))
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		e.store.RequeueExpiries(unapplied)
		e.failed.Add(1)
	}
	return int(ended.Load()), firstErr
}

// Run applies expiries as they come due, until ctx is done: it looks when
// the earliest is due (the store tells it when one is set before the one
// it waits for), and at least every Interval. A round the store refuses (a
// stuck disk, a lost database) is logged and tried again an Interval
// later: the expiries wait, none is lost.
func (e *Expirer) Run(ctx context.Context) {
	t := time.NewTimer(e.wait())
	defer t.Stop()
	sooner := e.store.ExpiryWakeup()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sooner: // an expiry before the one waited for
			t.Stop()
			t.Reset(e.wait())
			continue
		case <-t.C:
		}
		wait := e.interval
		if next, ok := e.store.NextExpiry(); ok && !next.After(e.now()) {
			if _, err := e.ExpireDue(ctx); err != nil {
				if ctx.Err() == nil {
					e.logger.Warn("could not apply the expiries due; trying again", "err", err)
				}
			} else {
				wait = e.wait()
			}
		} else {
			wait = e.wait()
		}
		t.Reset(wait)
	}
}

// wait returns how long to wait before looking for expiries again: until
// the earliest is due, at least a millisecond (their unit), at most
// Interval.
func (e *Expirer) wait() time.Duration {
	next, ok := e.store.NextExpiry()
	if !ok {
		return e.interval
	}
	return min(max(next.Sub(e.now()), time.Millisecond), e.interval)
}

// WriteMetrics writes the expirer's figures: the memberships with an
// expiry, those it ended, and the lag from their expiry to their end.
func (e *Expirer) WriteMetrics(w *metrics.Writer) {
	w.Gauge("membership_expiring_members", "Memberships with an expiry (they end by themselves).", float64(e.store.ExpiryCount()))
	w.Counter("membership_expiries_total", "Memberships this instance ended at their expiry.", float64(e.applied.Load()))
	w.Counter("membership_expiry_failures_total", "Rounds of expiries the store refused (tried again at the next tick).", float64(e.failed.Load()))
	w.Family("membership_expiry_lag_seconds", "histogram", "For each change of expiries, the time from the earliest of their expiries to the change.")
	e.lag.Write(w, "membership_expiry_lag_seconds", nil)
}
