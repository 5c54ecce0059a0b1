package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/bench/loadtest"
)

// Attacks on memory: what a client can make the service hold.

// attackFeedChurn fills the change feed with large changes, then has three
// clients ask for as much of it as one reply may carry and never read: the
// feed's memory and the replies built from it are both the client's choice.
func attackFeedChurn(ctx context.Context, h *harness, r *row) error {
	const (
		churnFor = 18 * time.Second
		holdFor  = 12 * time.Second
		uids     = 10000
		clients  = 3
	)
	s, err := startProbed(ctx, h.bin, serviceOptions{})
	if err != nil {
		return err
	}
	defer s.kill()
	return measure(ctx, h, s, r, 0, func(ctx context.Context, sm *sampler) error {
		body := loadtest.UsersBody(1, uids)
		url := s.base + "/group-user/churn"
		ops := newRecorder()
		churnCtx, cancel := context.WithTimeout(ctx, churnFor)
		defer cancel()
		// Requests finish on their own timeout: cutting the last one short
		// would count a timeout that the service did not cause.
		reqCtx := context.WithoutCancel(ctx)
		var wg sync.WaitGroup
		for range clients {
			spawn(&wg, func() {
				for churnCtx.Err() == nil {
					for _, method := range []string{http.MethodPost, http.MethodDelete} {
						rep := do(reqCtx, loadClient, method, url, body, formType, 10*time.Second)
						d := rep.took
						if rep.err != nil {
							d = 10 * time.Second
						}
						ops.add(d, method+" "+rep.outcome())
					}
				}
			})
		}
		wg.Wait()
		churnPeak := sm.phasePeak()
		r.notef("churn: %d clients, add/remove of the same %d uids in %s: %s; request p50 %s p99 %s",
			clients, uids, fmtDur(churnFor), ops.tally(), ops.pctString(50), ops.pctString(99))
		m, err := s.metrics(ctx, 5*time.Second)
		if err != nil {
			return fmt.Errorf("reading /metrics after the churn: %w", err)
		}
		r.notef("after the churn: membership_changes_kept %s, membership_changes_kept_bytes %s, membership_revision %s; peak RSS +%s during the churn",
			metricOr(m, "membership_changes_kept"), bytesMetricOr(m, "membership_changes_kept_bytes"), metricOr(m, "membership_revision"), loadtest.MiB(churnPeak-r.baseRSS))

		after, err := oldestAfter(ctx, s)
		if err != nil {
			return err
		}
		target := fmt.Sprintf("/changes?after=%d&limit=10000", after)
		conns := &rawConns{}
		for range clients {
			conns.add(rawRequest(ctx, s.addr, getRequest(s.addr, target)))
		}
		defer conns.closeAll()
		if err := sleepCtx(ctx, holdFor); err != nil {
			return err
		}
		open, failed, _ := conns.count()
		answered := conns.answered()
		conns.closeAll()
		r.notef("never-read GET %s: %d held %s (%d failed to connect); by then the service had written: %s; peak RSS +%s while held",
			target, open, fmtDur(holdFor), failed, fmtTally(answered), loadtest.MiB(sm.phasePeak()-r.baseRSS))
		return nil
	})
}

// oldestAfter is the after= that asks for the oldest change the feed keeps:
// 0, or one before the oldest_revision of a 410.
func oldestAfter(ctx context.Context, s *service) (uint64, error) {
	rep := get(ctx, sideClient, s.base+"/changes?after=0&limit=1", 10*time.Second)
	switch {
	case rep.err != nil:
		return 0, fmt.Errorf("GET /changes?after=0: %w", rep.err)
	case rep.status == http.StatusOK:
		return 0, nil
	case rep.status == http.StatusGone:
		var e errorBody
		if err := json.Unmarshal(rep.body, &e); err != nil || e.Error.OldestRevision == 0 {
			return 0, fmt.Errorf("GET /changes?after=0: 410 without a readable oldest_revision: %.200s", rep.body)
		}
		return e.Error.OldestRevision - 1, nil
	default:
		return 0, fmt.Errorf("GET /changes?after=0: %d %.200s", rep.status, rep.body)
	}
}

func metricOr(m map[string]float64, name string) string {
	v, ok := m[name]
	if !ok {
		return "- (absent)"
	}
	return fmt.Sprintf("%.0f", v)
}

func bytesMetricOr(m map[string]float64, name string) string {
	v, ok := m[name]
	if !ok {
		return "- (absent)"
	}
	return loadtest.MiB(int64(v))
}

// attackSlowBodies opens 2000 connections that each announce a 1 MiB form
// body and send it 10 bytes at a time: every byte the service reserves for
// a body that has not arrived is memory a client got for free. Meanwhile an
// honest client posts small bodies, to see what the service tells it.
func attackSlowBodies(ctx context.Context, h *harness, r *row) error {
	const (
		conns      = 2000
		dialers    = 50
		attackFor  = 26 * time.Second
		trickleFor = 16 * time.Second
		fatConns   = 150
		fatSent    = 900 << 10
		trickle    = 3 * time.Second
		tick       = 250 * time.Millisecond
		chunk      = 10
		bodyLength = 1 << 20
	)
	s, err := startProbed(ctx, h.bin, serviceOptions{})
	if err != nil {
		return err
	}
	defer s.kill()
	return measure(ctx, h, s, r, 0, func(ctx context.Context, sm *sampler) error {
		ctx, cancel := context.WithTimeout(ctx, attackFor)
		defer cancel()
		head := []byte("POST /group-user/slow HTTP/1.1\r\nHost: " + s.addr + "\r\nUser-Agent: attack\r\n" +
			"Content-Type: " + formType + "\r\nContent-Length: " + fmt.Sprint(bodyLength) + "\r\n\r\nusers=[1,")

		// The honest client, throughout.
		var wg sync.WaitGroup
		other, retryAfter := postHonestly(ctx, &wg, s)

		held := &rawConns{}
		defer held.closeAll()
		dialStart := time.Now()
		inPool(ctx, conns, dialers, func() { held.add(rawRequest(ctx, s.addr, head)) })
		open, failed, _ := held.count()
		dialTook := time.Since(dialStart)

		// One goroutine feeds them all: each connection gets its next bytes
		// every trickle, a slice of them on each tick.
		sent, writeErrs := trickleInto(ctx, held, trickle, tick, trickleFor)
		answered := held.answered()
		held.closeAll()
		honestBefore := other.tally()

		// Then fat bodies that stall: each client sends most of its mebibyte
		// at once and stops. Their memory is real, so the bodies' shared
		// budget must refuse the ones past it, and the honest client gets
		// 503 with Retry-After meanwhile.
		fat := &rawConns{}
		defer fat.closeAll()
		payload := append(append([]byte(nil), head...), bytes.Repeat([]byte("1,"), fatSent/2)...)
		inPool(ctx, fatConns, dialers, func() { fat.writeAndHold(ctx, s.addr, payload) })
		fatOpen, _, fatCut := fat.count()
		_ = sleepCtx(ctx, time.Until(deadlineOr(ctx, time.Now()).Add(-time.Second)))
		m, _ := s.metrics(context.WithoutCancel(ctx), 900*time.Millisecond)
		<-ctx.Done()
		fatAnswered := fat.answered()
		fat.closeAll()
		wg.Wait()
		r.notef("%d connections each announcing %d-byte bodies (%d failed to connect, opened in %s); %d bytes of body sent, %d B per connection every %s; %d connections closed by the service mid-body",
			open, bodyLength, failed, fmtDur(dialTook), sent, chunk, trickle, writeErrs)
		r.notef("what the slow connections had been answered at the end: %s", fmtTally(answered))
		r.notef("%d fat bodies (%d KiB of 1 MiB sent at once, then nothing): %d sent whole, %d cut by the service; answered: %s; "+
			"membership_memory_bytes{budget=\"request_bodies\"} %s, refused %s",
			fatConns, fatSent>>10, fatOpen-fatCut, fatCut, fmtTally(fatAnswered),
			metricOr(m, `membership_memory_bytes{budget="request_bodies"}`), metricOr(m, `membership_memory_refused_total{budget="request_bodies"}`))
		r.notef("honest POST of 3 users every 100ms: %s (before the fat bodies: %s; %d with Retry-After); p50 %s p99 %s",
			other.tally(), honestBefore, retryAfter.Load(), other.pctString(50), other.pctString(99))
		return nil
	})
}

// toggleMember starts, on wg, the writer of attackBigList: it adds uid
// 2000001 to group big and removes it again, in turn, one write every
// every, until ctx ends. It returns what the writes were answered.
func toggleMember(ctx context.Context, wg *sync.WaitGroup, s *service, every time.Duration) *recorder {
	writes := newRecorder()
	add := true
	spawnEvery(ctx, wg, every, func() {
		method := http.MethodDelete
		if add {
			method = http.MethodPost
		}
		add = !add
		rep := do(context.WithoutCancel(ctx), loadClient, method, s.base+"/group-user/big", []byte("users=[2000001]"), formType, 2*time.Second)
		writes.addReply(rep, 2*time.Second)
	})
	return writes
}

// postHonestly starts, on wg, the honest client of attackSlowBodies: a
// POST of 3 users every 100ms until ctx ends. It returns what the client
// was answered, and how many replies asked it to retry after a while.
func postHonestly(ctx context.Context, wg *sync.WaitGroup, s *service) (*recorder, *atomic.Int64) {
	other := newRecorder()
	var retryAfter atomic.Int64
	spawn(wg, func() {
		reqCtx := context.WithoutCancel(ctx)
		openLoop(ctx, 100*time.Millisecond, 50, func() {
			rep := do(reqCtx, loadClient, http.MethodPost, s.base+"/group-user/other", loadtest.UsersBody(1, 3), formType, 2*time.Second)
			other.addReply(rep, 2*time.Second)
			if rep.err == nil && rep.header.Get("Retry-After") != "" {
				retryAfter.Add(1)
			}
		}, func() { other.add(2*time.Second, "skipped") })
	})
	return other, &retryAfter
}

// trickleInto feeds every connection held its next bytes of a body every
// trickle, a slice of them on each tick, until trickleFor has passed or
// ctx ends, and returns the bytes sent and the writes that failed.
func trickleInto(ctx context.Context, held *rawConns, trickle, tick, trickleFor time.Duration) (int64, int) {
	held.mu.Lock()
	cs := append([]net.Conn(nil), held.conns...)
	held.mu.Unlock()
	dead := make([]bool, len(cs))
	sent, writeErrs := int64(0), 0
	groups := int(trickle / tick)
	next := int64(2)
	t := time.NewTicker(tick)
	trickleEnd := time.Now().Add(trickleFor)
	for n := 0; ctx.Err() == nil && time.Now().Before(trickleEnd); n++ {
		for i := n % groups; i < len(cs); i += groups {
			if dead[i] {
				continue
			}
			b := fmt.Appendf(nil, "%09d,", next)
			next++
			_ = cs[i].SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
			if _, err := cs[i].Write(b); err != nil {
				dead[i] = true
				writeErrs++
				continue
			}
			sent += int64(len(b))
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	t.Stop()
	return sent, writeErrs
}

// deadlineOr returns ctx's deadline, or t when it has none.
func deadlineOr(ctx context.Context, t time.Time) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return t
}

// attackBigList lists a group of a million members to clients that never
// read: each reply the service builds ahead of a stalled reader is tens of
// megabytes it cannot free. Paged reads (after=) are not cached, so every
// client costs a fresh reply; in the second phase a writer changes the group
// every 50 ms, so that plain reads cannot share the cached one either.
func attackBigList(ctx context.Context, h *harness, r *row) error {
	const (
		members     = 1_000_000
		phase1Conns = 200
		phase1Hold  = 12 * time.Second
		phase2Conns = 100
		phase2Every = 100 * time.Millisecond
		phase2Hold  = 3 * time.Second
		writerEvery = 50 * time.Millisecond
	)
	s, err := startProbed(ctx, h.bin, serviceOptions{})
	if err != nil {
		return err
	}
	defer s.kill()
	seedStart := time.Now()
	if err := seed(ctx, s, "big", 1, members); err != nil {
		return err
	}
	seedTook := time.Since(seedStart)
	m, err := s.metrics(ctx, 5*time.Second)
	if err != nil {
		return err
	}
	r.notef("seeded %d members in %s (membership_members %s); RSS after seeding %s", members, fmtDur(seedTook), metricOr(m, "membership_members"), loadtest.MiB(s.rss()))
	return measure(ctx, h, s, r, 0, func(ctx context.Context, sm *sampler) error {
		// Phase 1: paged reads of nearly the whole group, never read.
		p1 := &rawConns{}
		defer p1.closeAll()
		req := getRequest(s.addr, "/group-user/big?after=1")
		phaseEnd := time.Now().Add(phase1Hold)
		inPool(ctx, phase1Conns, 20, func() { p1.add(rawRequest(ctx, s.addr, req)) })
		if err := sleepCtx(ctx, time.Until(phaseEnd)); err != nil {
			return err
		}
		open, failed, _ := p1.count()
		answered := p1.answered()
		p1.closeAll()
		r.notef("phase 1: %d never-read GET /group-user/big?after=1 held %s (%d failed to connect); written to them: %s; peak RSS +%s",
			open, phase1Hold, failed, fmtTally(answered), loadtest.MiB(sm.phasePeak()-r.baseRSS))

		// Phase 2: a writer keeps invalidating the cached list while stalled
		// readers arrive one after another.
		wctx, stopWriter := context.WithCancel(ctx)
		defer stopWriter()
		var wwg sync.WaitGroup
		writes := toggleMember(wctx, &wwg, s, writerEvery)
		p2 := &rawConns{}
		defer p2.closeAll()
		req = getRequest(s.addr, "/group-user/big")
		for range phase2Conns {
			p2.add(rawRequest(ctx, s.addr, req))
			if err := sleepCtx(ctx, phase2Every); err != nil {
				break
			}
		}
		_ = sleepCtx(ctx, phase2Hold)
		stopWriter()
		wwg.Wait()
		open, failed, _ = p2.count()
		answered = p2.answered()
		p2.closeAll()
		r.notef("phase 2: %d never-read GET /group-user/big, one every %s (%d failed to connect), while uid 2000001 was added/removed every %s (%s, p99 %s); written to them: %s; peak RSS +%s",
			open, phase2Every, failed, writerEvery, writes.tally(), writes.pctString(99), fmtTally(answered), loadtest.MiB(sm.phasePeak()-r.baseRSS))
		return ctx.Err()
	})
}
