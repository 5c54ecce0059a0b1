package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"example.com/groupmembership/bench/loadtest"
)

// Bounds every attack is held to.
const (
	maxRSSGrowth     = 256 << 20
	maxProbeP99      = 100 * time.Millisecond
	goroutineSlack   = 10
	maxSettle        = 30 * time.Second
	probeEvery       = 20 * time.Millisecond
	endpointEvery    = 50 * time.Millisecond
	probeTimeout     = 2 * time.Second
	rssEvery         = 100 * time.Millisecond
	goroutinesEvery  = 250 * time.Millisecond
	goroutineTimeout = time.Second
)

// recorder collects latencies and tallies outcomes. A request that failed
// is recorded at its client timeout, so a dead service shows as slow rather
// than dropping out of the percentiles.
type recorder struct {
	mu       sync.Mutex
	d        []time.Duration
	start    []time.Time // when each began, for the percentiles of a window
	outcomes map[string]int
}

func newRecorder() *recorder { return &recorder{outcomes: make(map[string]int)} }

func (r *recorder) add(d time.Duration, outcome string) {
	start := time.Now().Add(-d)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.d = append(r.d, d)
	r.start = append(r.start, start)
	r.outcomes[outcome]++
}

// addReply records rep, charging a failure the full timeout.
func (r *recorder) addReply(rep reply, timeout time.Duration) {
	d := rep.took
	if rep.err != nil {
		d = timeout
	}
	r.add(d, rep.outcome())
}

func (r *recorder) n() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.d)
}

func (r *recorder) count(outcome string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outcomes[outcome]
}

// pct is the p-th percentile (0 to 100), nearest rank; ok is false when
// nothing was recorded.
func (r *recorder) pct(p float64) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.d) == 0 {
		return 0, false
	}
	s := slices.Clone(r.d)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))], true
}

// pctIn is the p-th percentile of what began in [from, to), and how many
// that is; "-" when none.
func (r *recorder) pctIn(p float64, from, to time.Time) string {
	r.mu.Lock()
	in := &recorder{outcomes: make(map[string]int)}
	for i, d := range r.d {
		if !r.start[i].Before(from) && r.start[i].Before(to) {
			in.d = append(in.d, d)
		}
	}
	r.mu.Unlock()
	return fmt.Sprintf("%s of %d", in.pctString(p), in.n())
}

func (r *recorder) pctString(p float64) string {
	d, ok := r.pct(p)
	if !ok {
		return "-"
	}
	return fmtDur(d)
}

// tally is "200×98 timeout×2", outcomes in order.
func (r *recorder) tally() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmtTally(r.outcomes)
}

func fmtTally(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s×%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// openLoop issues call every interval, each in its own goroutine, until ctx
// ends, and waits for the calls in flight. Issuing on the clock rather than
// after the previous reply keeps a stalled service from slowing the
// measurement down with it (coordinated omission); inflight bounds the
// goroutines a dead service can pile up, and a skipped tick is recorded as a
// timeout by skip.
func openLoop(ctx context.Context, interval time.Duration, inflight int, call func(), skip func()) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, inflight)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.C:
		}
		select {
		case sem <- struct{}{}:
			spawn(&wg, func() {
				defer func() { <-sem }()
				call()
			})
		default:
			skip()
		}
	}
}

// startProbe issues GET path every interval, a new connection each, until
// the returned function is called; that function waits for the probes in
// flight and returns their latencies.
func startProbe(ctx context.Context, s *service, path string, every time.Duration) func() *recorder {
	rec := newRecorder()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer guard()
		// The probes themselves must not be cut short when the probing
		// stops: their own timeout bounds them.
		reqCtx := context.WithoutCancel(ctx)
		openLoop(ctx, every, 200, func() {
			rep := get(reqCtx, probeClient, s.base+path, probeTimeout)
			if rep.err == nil && rep.status != http.StatusOK {
				// A wrong answer is no faster than none.
				rep.took = probeTimeout
			}
			rec.addReply(rep, probeTimeout)
		}, func() { rec.add(probeTimeout, "skipped") })
	}()
	return func() *recorder {
		cancel()
		<-done
		return rec
	}
}

// sampler follows the service's RSS every rssEvery and its goroutines every
// goroutinesEvery, in two loops, so that a slow /metrics cannot delay the
// RSS samples.
type sampler struct {
	mu        sync.Mutex
	peakRSS   int64
	phaseRSS  int64 // peak since the last phasePeak call
	peakG     int   // -1: never read
	gSamples  int
	gFailures int
	// peaks is the highest value each series of /metrics took, from the
	// scrapes that read the goroutines.
	peaks map[string]float64

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// withGoroutines false skips the goroutine loop: a service without the gauge
// would only be scraped for nothing.
func startSampler(ctx context.Context, s *service, withGoroutines bool) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	sm := &sampler{peakG: -1, peaks: make(map[string]float64), cancel: cancel}
	spawnEvery(ctx, &sm.wg, rssEvery, func() {
		rss := s.rss()
		sm.mu.Lock()
		sm.peakRSS = max(sm.peakRSS, rss)
		sm.phaseRSS = max(sm.phaseRSS, rss)
		sm.mu.Unlock()
	})
	if !withGoroutines {
		return sm
	}
	spawnEvery(ctx, &sm.wg, goroutinesEvery, func() {
		m, err := s.metrics(ctx, goroutineTimeout)
		g, ok := m["go_goroutines"]
		sm.mu.Lock()
		defer sm.mu.Unlock()
		sm.gSamples++
		for k, v := range m {
			if old, seen := sm.peaks[k]; !seen || v > old {
				sm.peaks[k] = v
			}
		}
		if ok && err == nil {
			sm.peakG = max(sm.peakG, int(g))
		} else {
			sm.gFailures++
		}
	})
	return sm
}

// phasePeak returns the peak RSS since the previous call and starts a new
// phase.
func (sm *sampler) phasePeak() int64 {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	p := sm.phaseRSS
	sm.phaseRSS = 0
	return p
}

// peak is the highest value series took in the scrapes so far; ok is
// false when no scrape had it.
func (sm *sampler) peak(series string) (v float64, ok bool) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	v, ok = sm.peaks[series]
	return v, ok
}

// peakRSSNow is the highest RSS sampled so far.
func (sm *sampler) peakRSSNow() int64 {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return sm.peakRSS
}

func (sm *sampler) stop() {
	sm.cancel()
	sm.wg.Wait()
}

// bound is one pass/fail line of the report.
type bound struct {
	what string
	got  string
	ok   bool
}

// row is one attack's line of the table, its notes, and its bounds.
type row struct {
	name    string
	baseRSS int64
	peakRSS int64 // 0: not measured
	gBefore int   // -1: unknown
	gPeak   int
	gAfter  int
	probe   *recorder
	// endpoints are paths probed beside the probe GET, each on a new
	// connection every endpointEvery and held to the probe's bound; their
	// latencies, once measured, are in endpointRecs, in the same order.
	endpoints    []string
	endpointRecs []*recorder
	notes        []string
	bounds       []bound
	skipped      string
	err          error
	took         time.Duration
}

func newRow(name string) *row {
	return &row{name: name, gBefore: -1, gPeak: -1, gAfter: -1}
}

func (r *row) notef(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

func (r *row) check(what, got string, ok bool) {
	r.bounds = append(r.bounds, bound{what: what, got: got, ok: ok})
}

func (r *row) met() bool {
	if r.err != nil || r.skipped != "" {
		return false
	}
	for _, b := range r.bounds {
		if !b.ok {
			return false
		}
	}
	return true
}

// measure is the frame of every attack: it takes the baseline, runs load
// while the probe and the sampler run, then waits for the goroutines to come
// back, and checks the three common bounds. tail is the time the attack
// still needs after measure returns, which the wait for goroutines leaves it.
func measure(ctx context.Context, h *harness, s *service, r *row, tail time.Duration, load func(ctx context.Context, sm *sampler) error) error {
	r.baseRSS = s.rss()
	if g, ok := s.gauge(ctx, "go_goroutines", goroutineTimeout); ok {
		r.gBefore = int(g)
	}
	sm := startSampler(ctx, s, r.gBefore >= 0)
	stopProbe := startProbe(ctx, s, "/group-user/probe", probeEvery)
	var stopEndpoints []func() *recorder
	for _, path := range r.endpoints {
		stopEndpoints = append(stopEndpoints, startProbe(ctx, s, path, endpointEvery))
	}
	loadErr := load(ctx, sm)
	r.probe = stopProbe()
	for _, stop := range stopEndpoints {
		r.endpointRecs = append(r.endpointRecs, stop())
	}
	// The attack's clients go: their idle keep-alive connections too, which
	// the service would otherwise keep serving, idle, for its idle timeout.
	loadClient.CloseIdleConnections()

	// The attack's clients are gone: what the service still runs beyond its
	// baseline is what it leaked or is still stuck on.
	settled, waited := false, time.Duration(0)
	if r.gBefore >= 0 {
		start := time.Now()
		settleLimit := h.settleLimit(tail)
		deadline := start.Add(settleLimit)
		for {
			g, ok := s.gauge(ctx, "go_goroutines", goroutineTimeout)
			if ok {
				r.gAfter = int(g)
				if r.gAfter <= r.gBefore+goroutineSlack {
					settled = true
					break
				}
			}
			if time.Now().After(deadline) || sleepCtx(ctx, 200*time.Millisecond) != nil {
				break
			}
		}
		waited = time.Since(start)
		if !settled && settleLimit < maxSettle {
			r.notef("the wait for goroutines was cut to %s to keep the run in its time budget", fmtDur(settleLimit))
		}
	}
	sm.stop()
	r.peakRSS = sm.peakRSS
	r.gPeak = sm.peakG
	if sm.gFailures > 0 && r.gBefore >= 0 {
		r.notef("goroutine scrapes: %d of %d failed or timed out (%s)", sm.gFailures, sm.gSamples, goroutineTimeout)
	}

	growth := r.peakRSS - r.baseRSS
	r.check("RSS growth <= 256 MiB", "+"+loadtest.MiB(growth), r.peakRSS > 0 && growth <= maxRSSGrowth)
	p99, ok := r.probe.pct(99)
	r.check("probe p99 < 100ms", fmt.Sprintf("%s (%d probes: %s)", r.probe.pctString(99), r.probe.n(), r.probe.tally()), ok && p99 < maxProbeP99)
	for i, rec := range r.endpointRecs {
		p99, ok := rec.pct(99)
		r.check("GET "+r.endpoints[i]+" p99 < 100ms", fmt.Sprintf("%s (p50 %s, %d probes: %s)", rec.pctString(99), rec.pctString(50), rec.n(), rec.tally()), ok && p99 < maxProbeP99)
	}
	switch {
	case r.gBefore < 0:
		r.check("goroutines back to baseline+10", "unknown: no go_goroutines in /metrics", false)
	case settled:
		r.check("goroutines back to baseline+10", fmt.Sprintf("%d -> %d in %s", r.gBefore, r.gAfter, fmtDur(waited)), true)
	case r.gAfter < 0:
		r.check("goroutines back to baseline+10", fmt.Sprintf("%d -> unreadable after %s", r.gBefore, fmtDur(waited)), false)
	default:
		r.check("goroutines back to baseline+10", fmt.Sprintf("%d -> %d after waiting %s", r.gBefore, r.gAfter, fmtDur(waited)), false)
	}
	return loadErr
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
}
