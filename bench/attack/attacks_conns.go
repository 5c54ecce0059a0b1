package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"example.com/groupmembership/bench/loadtest"
)

// Attacks on what a connection costs: a descriptor, and the memory of an
// idle connection, of headers being read, of a parked long poll. Each is
// held to the common bounds and, beside the probe GET, to probes of
// /healthz, /readyz and /metrics on the same port, which must never starve.

// probedEndpoints are what operators' probes and scrapers ask.
var probedEndpoints = []string{"/healthz", "/readyz", "/metrics"}

// idleConnsLimit is the descriptor limit the idle-conns attack gives the
// service: the limit this attack sets, and this machine's hard limit.
const idleConnsLimit = 20000

// attackIdleConns opens 20,000 keep-alive connections, each after one
// GET /healthz, and holds them idle, with the service's descriptor limit at
// 20,000: without a connection budget the service reaches its limit, its
// accept fails with EMFILE, and new clients, probes included, time out.
func attackIdleConns(ctx context.Context, h *harness, r *row) error {
	if err := canLimitNoFile(idleConnsLimit); err != nil {
		return err
	}
	s, log, err := startLogged(ctx, h, h.bin, "idle-conns", serviceOptions{nofile: idleConnsLimit})
	if err != nil {
		return err
	}
	defer s.kill()
	return idleConns(ctx, h, s, log, r)
}

// canLimitNoFile says why a service cannot be given a limit of n open
// descriptors here: a hard limit below n, which only a privileged process
// may raise.
func canLimitNoFile(n int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Max < uint64(n) {
		return errSkip(fmt.Sprintf("the hard limit of open files is %d, below the %d this attack gives the service (ulimit -Hn)", lim.Max, n))
	}
	return nil
}

// idleConns is the idle-conns attack on a started service whose output
// goes to the file log: the embedded service's, or membership-postgres's.
func idleConns(ctx context.Context, h *harness, s *service, log string, r *row) error {
	const (
		conns = 20000
		// first are opened, and held a while, before the rest: fewer than
		// the default -max-conns, so that what they cost is measured before
		// any is closed to make room.
		first     = 8000
		firstHold = 3 * time.Second
		holdFor   = 10 * time.Second
		// holders is the holder processes of each step: each may hold at
		// most 20,000 descriptors.
		holders = 2
	)
	limit := procLimit(s.pid, "Max open files")
	r.endpoints = probedEndpoints
	var phases []phase
	err := measure(ctx, h, s, r, 0, func(ctx context.Context, sm *sampler) error {
		start := time.Now()
		hs, opened, err := startHolders(ctx, holders, s.addr, "/healthz", first, h.openRate)
		if err != nil {
			return err
		}
		defer func() { closeHolders(hs) }()
		if err := sleepCtx(ctx, firstHold); err != nil {
			return err
		}
		m, _ := s.metrics(ctx, 5*time.Second)
		peak1, open1 := sm.phasePeak(), m[`membership_connections{listener="api"}`]
		r.notef("first %d connections opened in %s (%s), each with GET /healthz: %s; after %s: membership_connections{api} %s, closed_idle_total %s; peak RSS +%s",
			first, fmtDur(opened.Took), fmtRate(h.openRate), fmtTally(opened.Tally), firstHold, metricOr(m, `membership_connections{listener="api"}`),
			metricOr(m, `membership_connections_closed_idle_total{listener="api"}`), loadtest.MiB(peak1-r.baseRSS))
		if open1 > 0 {
			r.notef("RSS per idle connection, before any was closed to make room: +%s / %.0f connections = %.1f KiB",
				loadtest.MiB(peak1-r.baseRSS), open1, float64(peak1-r.baseRSS)/open1/1024)
		}

		more, opened2, err := startHolders(ctx, holders, s.addr, "/healthz", conns-first, h.openRate)
		hs = append(hs, more...)
		if err != nil {
			return err
		}
		opened.add(opened2)
		phases = append(phases, phase{"while they were opened", start, time.Now()})
		r.notef("%d connections in all, by %d holder processes (%d at a time each), the other %d opened in %s: %s; %d left open by the service after their reply%s",
			opened.Opened, len(hs), holderDialers, conns-first, fmtDur(opened2.Took), fmtTally(opened.Tally), opened.Held, lastErr(opened.Err))
		if err := sleepCtx(ctx, holdFor); err != nil {
			return err
		}
		phases = append(phases, phase{"while they were held", phases[0].to, time.Now()})
		m, _ = s.metrics(ctx, 5*time.Second)
		held, err := checkHolders(ctx, hs)
		if err != nil {
			return err
		}
		peakRSS, peakConns, seen := sm.peakRSSNow(), 0.0, false
		for _, v := range []float64{m[`membership_connections{listener="api"}`], peakOf(sm, `membership_connections{listener="api"}`)} {
			if v > peakConns {
				peakConns, seen = v, true
			}
		}
		r.notef("after holding them %s: of the %d kept after a 200, %s; of all %d: %d got 503 at once, %d were closed by the service (%d before their reply, %d idle after it), %d still open",
			holdFor, opened.Held, fmtTally(held.Tally), opened.Opened, opened.Tally["503"],
			opened.Tally["closed before a reply"]+held.Tally["closed by the service"], opened.Tally["closed before a reply"], held.Tally["closed by the service"], held.Held)
		r.notef("/metrics: membership_connections{api} %s (peak %s), limit %s, closed_idle_total %s, refused_total %s (503)",
			metricOr(m, `membership_connections{listener="api"}`), fmtPeak(peakConns, seen), metricOr(m, `membership_connections_limit{listener="api"}`),
			metricOr(m, `membership_connections_closed_idle_total{listener="api"}`), metricOr(m, `membership_connections_refused_total{listener="api"}`))
		if seen && peakConns > 0 {
			growth := peakRSS - r.baseRSS
			r.notef("RSS per idle connection, at the peak of the whole attack: +%s / %.0f connections held at the peak = %.1f KiB",
				loadtest.MiB(growth), peakConns, float64(growth)/peakConns/1024)
		}
		return nil
	})
	// The log goes out through a buffer of the service's: read it last.
	r.notes = append([]string{fmt.Sprintf("the service's start: %s; its limit of open files: %s", budgetLine(log), limit)}, r.notes...)
	return endConnAttack(r, phases, log, err)
}

// attackHeaderStall opens 4000 connections that each send 63 KB of request
// headers, under the default -max-header of 64 KiB, and stall before the
// blank line that ends them: the headers being read, each below its own
// limit, are memory that only a budget of all of them bounds.
func attackHeaderStall(ctx context.Context, h *harness, r *row) error {
	const (
		conns       = 4000
		dialers     = 64
		headerBytes = 63000
		// holdFor runs past the service's 5 s header timeout.
		holdFor = 8 * time.Second
	)
	s, log, err := startLogged(ctx, h, h.bin, "header-stall", serviceOptions{})
	if err != nil {
		return err
	}
	defer s.kill()
	r.endpoints = probedEndpoints
	var phases []phase
	err = measure(ctx, h, s, r, 0, func(ctx context.Context, sm *sampler) error {
		head := stalledHeaders(s.addr, headerBytes)
		held := &rawConns{}
		defer held.closeAll()
		start := time.Now()
		dialTook := openAll(ctx, conns, dialers, h.openRate, func() { held.writeAndHold(ctx, s.addr, head) })
		phases = append(phases, phase{"while they were opened", start, time.Now()})
		// The service reads what arrived; a moment later, what it holds.
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return err
		}
		atPeak := held.statuses()
		m, _ := s.metrics(ctx, 5*time.Second)
		open, failed, cut := held.count()
		r.notef("%d connections each sent %d bytes of headers and stalled, opened in %s (%s; %d failed to connect%s; on %d the service stopped taking bytes before all were sent)",
			open, headerBytes, fmtDur(dialTook), fmtRate(h.openRate), failed, lastErr(held.lastError()), cut)
		r.notef("%s after the last: %s; membership_memory_bytes{request_headers} %s of %s, refused_total %s; membership_connections{api} %s",
			fmtDur(time.Since(start)-dialTook), fmtTally(atPeak), bytesMetricOr(m, `membership_memory_bytes{budget="request_headers"}`),
			bytesMetricOr(m, `membership_memory_limit_bytes{budget="request_headers"}`), metricOr(m, `membership_memory_refused_total{budget="request_headers"}`),
			metricOr(m, `membership_connections{listener="api"}`))
		if err := sleepCtx(ctx, time.Until(start.Add(holdFor))); err != nil {
			return err
		}
		phases = append(phases, phase{"while they stalled, until the header timeout", phases[0].to, time.Now()})
		peakRSS := sm.peakRSSNow()
		end := held.statuses()
		r.notef("%s after the first: %s (the header timeout is 5 s)", fmtDur(time.Since(start)), fmtTally(end))
		if stalled := atPeak["nothing yet"]; stalled > 0 {
			r.notef("RSS per stalled connection: +%s / %d stalled at the peak (not refused) = %.1f KiB",
				loadtest.MiB(peakRSS-r.baseRSS), stalled, float64(peakRSS-r.baseRSS)/float64(stalled)/1024)
		}
		held.closeAll()
		return nil
	})
	return endConnAttack(r, phases, log, err)
}

// attackParkedPolls parks 8000 long polls of /changes (wait=60s) after the
// latest revision, so that none is answered while they are held: each holds
// a connection, a goroutine and a timer. The first 1000 (the default
// -max-waiters) are held alone for a while, to measure what one costs.
func attackParkedPolls(ctx context.Context, h *harness, r *row) error {
	const (
		first   = 1000
		total   = 8000
		dialers = 64
		hold1   = 4 * time.Second
		hold2   = 8 * time.Second
	)
	s, log, err := startLogged(ctx, h, h.bin, "parked-polls", serviceOptions{})
	if err != nil {
		return err
	}
	defer s.kill()
	latest := get(ctx, sideClient, s.base+"/changes?after=0&limit=1", 5*time.Second)
	if latest.err != nil || latest.status != http.StatusOK {
		return fmt.Errorf("GET /changes?after=0: %s", latest.outcome())
	}
	target := "/changes?after=" + latest.header.Get("X-Revision") + "&wait=60s"
	r.endpoints = probedEndpoints
	var phases []phase
	err = measure(ctx, h, s, r, 0, func(ctx context.Context, sm *sampler) error {
		polls := &rawConns{}
		defer polls.closeAll()
		req := getRequest(s.addr, target)
		openPolls := func(n int) time.Duration {
			return openAll(ctx, n, dialers, h.openRate, func() { polls.add(rawRequest(ctx, s.addr, req)) })
		}
		start := time.Now()
		took := openPolls(first)
		opened := time.Now()
		if err := sleepCtx(ctx, hold1); err != nil {
			return err
		}
		phases = append(phases, phase{"while the first 1000 were opened", start, opened}, phase{"with 1000 parked", opened, time.Now()})
		waiters1, _ := s.gauge(ctx, "membership_changes_waiters", 5*time.Second)
		peak1 := sm.phasePeak()
		tally1 := polls.statuses()
		r.notef("phase 1: %d polls GET %s opened in %s (%s); after %s: %s; membership_changes_waiters %.0f; peak RSS +%s",
			first, target, fmtDur(took), fmtRate(h.openRate), hold1, fmtTally(tally1), waiters1, loadtest.MiB(peak1-r.baseRSS))
		if waiters1 > 0 {
			r.notef("RSS per parked poll (its connection included): +%s / %.0f parked = %.1f KiB",
				loadtest.MiB(peak1-r.baseRSS), waiters1, float64(peak1-r.baseRSS)/waiters1/1024)
		}

		start = time.Now()
		took = openPolls(total - first)
		opened = time.Now()
		if err := sleepCtx(ctx, hold2); err != nil {
			return err
		}
		phases = append(phases, phase{"while 7000 more were opened", start, opened}, phase{"with 1000 parked and 7000 answered", opened, time.Now()})
		m, _ := s.metrics(ctx, 5*time.Second)
		peak2 := sm.phasePeak()
		open, failed, _ := polls.count()
		tally2 := polls.statuses()
		r.notef("phase 2: %d more opened in %s (%d held in all, %d failed to connect%s); after %s: %s",
			total-first, fmtDur(took), open, failed, lastErr(polls.lastError()), hold2, fmtTally(tally2))
		r.notef("parked (membership_changes_waiters) %s, peak %s, limit %s; answered at once (waiters_refused_total) %s; peak RSS +%s",
			metricOr(m, "membership_changes_waiters"), fmtPeak(peakOf(sm, "membership_changes_waiters"), true),
			metricOr(m, "membership_changes_waiters_limit"), metricOr(m, "membership_changes_waiters_refused_total"), loadtest.MiB(max(peak1, peak2)-r.baseRSS))
		polls.closeAll()
		return nil
	})
	return endConnAttack(r, phases, log, err)
}

// stalledHeaders is a GET whose headers come to size bytes, in lines of
// about 1000, without the blank line that would end them.
func stalledHeaders(addr string, size int) []byte {
	b := []byte("GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: attack\r\n")
	for i := 0; len(b) < size; i++ {
		line := fmt.Sprintf("X-Stall-%03d: ", i)
		n := min(1000, size-len(b)) - len(line) - 2
		if n < 1 {
			break
		}
		b = append(b, line...)
		b = append(b, strings.Repeat("a", n)...)
		b = append(b, "\r\n"...)
	}
	return b
}

// startLogged starts bin as startProbed does, with its stdout and stderr in
// a file of the harness's temporary directory, whose path it returns.
func startLogged(ctx context.Context, h *harness, bin, name string, opts serviceOptions) (*service, string, error) {
	path := filepath.Join(h.tmp, name+".log")
	f, err := os.Create(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close() // the service has its own copy
	opts.out = f
	s, err := startProbed(ctx, bin, opts)
	if err != nil {
		return nil, "", fmt.Errorf("%w; its output: %s", err, tailOf(path, 4))
	}
	return s, path, nil
}

// grepLog returns the lines of the file at path that hold any of words,
// case-insensitively.
func grepLog(path string, words ...string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return []string{"reading " + path + ": " + err.Error()}
	}
	var found []string
	for line := range strings.SplitSeq(string(b), "\n") {
		low := strings.ToLower(line)
		for _, w := range words {
			if strings.Contains(low, strings.ToLower(w)) {
				found = append(found, line)
				break
			}
		}
	}
	return found
}

// budgetLine is the attributes of the service's "connection budget" log
// line, or a word that it has none.
func budgetLine(log string) string {
	lines := grepLog(log, `msg="connection budget"`)
	if len(lines) == 0 {
		return `no "connection budget" line`
	}
	if m := regexp.MustCompile(`msg="connection budget" (.*)`).FindStringSubmatch(lines[0]); m != nil {
		return m[1]
	}
	return lines[0]
}

// procLimit is one line of /proc/PID/limits, trimmed to its figures.
func procLimit(pid int, name string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return "unknown"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 {
				return "soft " + f[0] + ", hard " + f[1]
			}
		}
	}
	return "unknown"
}

// tailOf is the last n lines of the file at path, on one line.
func tailOf(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(unreadable)"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

func peakOf(sm *sampler, series string) float64 {
	v, _ := sm.peak(series)
	return v
}

func fmtPeak(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}

func firstOf(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return fmt.Sprintf(", the first: %.200s", lines[0])
}

func lastErr(s string) string {
	if s == "" {
		return ""
	}
	return "; last error: " + s
}

// phase is a window of an attack, for the probes' percentiles in it.
type phase struct {
	name     string
	from, to time.Time
}

// endConnAttack ends an attack on connections whose measure returned err:
// it notes the p99 of each probe in each phase, and checks that the
// service's log, the file log, has no EMFILE. It returns err.
func endConnAttack(r *row, phases []phase, log string, err error) error {
	if r.probe != nil {
		recs := append([]*recorder{r.probe}, r.endpointRecs...)
		names := append([]string{"probe"}, r.endpoints...)
		for _, ph := range phases {
			var parts []string
			for i, rec := range recs {
				if i < len(names) {
					parts = append(parts, names[i]+" "+rec.pctIn(99, ph.from, ph.to))
				}
			}
			r.notef("p99 %s (%s): %s", ph.name, fmtDur(ph.to.Sub(ph.from)), strings.Join(parts, ", "))
		}
	}
	emfile := grepLog(log, "too many open files", "EMFILE")
	r.check("no EMFILE in the service's log", fmt.Sprintf("%d lines%s", len(emfile), firstOf(emfile)), len(emfile) == 0)
	return err
}

// openAll calls open n times, on dialers goroutines at once, at most
// perSecond times a second (0: as fast as they go), and returns how long
// that took.
func openAll(ctx context.Context, n, dialers, perSecond int, open func()) time.Duration {
	start := time.Now()
	p := newPacer(perSecond)
	inPool(ctx, n, dialers, func() {
		if p.wait(ctx) != nil {
			return
		}
		open()
	})
	return time.Since(start)
}

// inPool calls job up to n times, on workers goroutines at once, and
// returns when the calls are done. Once ctx ends, the calls left are
// handed out no longer (but for one now and then, that finds a worker
// ready as ctx ends).
func inPool(ctx context.Context, n, workers int, job func()) {
	var wg sync.WaitGroup
	jobs := make(chan struct{})
	for range workers {
		spawn(&wg, func() {
			for range jobs {
				job()
			}
		})
	}
	for range n {
		select {
		case jobs <- struct{}{}:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
}

// pacer spaces out the opening of connections: the i-th is due i/perSecond
// seconds after the first. A service takes new connections in the order
// they arrive, so a burst faster than it accepts and answers them makes
// every new connection, a probe's too, wait behind the burst: that is
// another attack (a flood of connections) than holding them, and
// -open-rate 0 runs it.
type pacer struct {
	perSecond int
	start     time.Time
	n         atomic.Int64
}

func newPacer(perSecond int) *pacer { return &pacer{perSecond: perSecond, start: time.Now()} }

// wait returns when the next opening is due.
func (p *pacer) wait(ctx context.Context) error {
	if p.perSecond <= 0 {
		return ctx.Err()
	}
	i := p.n.Add(1) - 1
	return sleepCtx(ctx, time.Until(p.start.Add(time.Duration(i)*time.Second/time.Duration(p.perSecond))))
}

func fmtRate(perSecond int) string {
	if perSecond <= 0 {
		return "as fast as they go"
	}
	return fmt.Sprintf("%d a second", perSecond)
}
