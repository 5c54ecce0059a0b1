package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/bench/loadtest"
)

// loaded is what the loading measured.
type loaded struct {
	memberships int64
	requests    int64
	took        time.Duration
	slowest     time.Duration // the longest a request took, its retries included
	batchStats
}

// batchStats counts what the batches met beside a first 200.
type batchStats struct {
	unavailable int64 // 503s (full budgets or queue, or a commit that waited past -commit-timeout): sent again
	inFlight    int64 // 409s: the key's first attempt was still being applied: sent again
	replayed    int64 // replies replayed from a first attempt that was applied after all
}

func (b *batchStats) add(o batchStats) {
	atomic.AddInt64(&b.unavailable, o.unavailable)
	atomic.AddInt64(&b.inFlight, o.inFlight)
	atomic.AddInt64(&b.replayed, o.replayed)
}

// load adds every group's members to s through POST /batch, from conns
// connections at once, the batches built by one goroutine ahead of them.
// It prints its progress every 10 s.
func load(ctx context.Context, s *service, p *batcher, conns int, total int64) (loaded, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	type request struct {
		body  []byte
		users int
		key   string
	}
	requests := make(chan request, 2*conns)
	go func() {
		defer close(requests)
		for n := 0; ; n++ {
			b := p.batch()
			if b == nil {
				return
			}
			select {
			case requests <- request{body: b.appendBody(nil), users: b.users(), key: fmt.Sprintf("bench-scale-%d", n)}:
			case <-ctx.Done():
				return
			}
		}
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}, Timeout: time.Minute}
	var done loaded
	var slowest atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range requests {
				sent := time.Now()
				stats, err := postBatch(ctx, client, s.base, r.body, r.users, r.key)
				if err != nil {
					cancel(err)
					return
				}
				took := int64(time.Since(sent))
				for old := slowest.Load(); took > old && !slowest.CompareAndSwap(old, took); old = slowest.Load() {
				}
				atomic.AddInt64(&done.memberships, int64(r.users))
				atomic.AddInt64(&done.requests, 1)
				done.add(stats)
			}
		}()
	}
	stopProgress := progress(s, start, &done.memberships, total)
	wg.Wait()
	stopProgress()
	done.took, done.slowest = time.Since(start), time.Duration(slowest.Load())
	if err := context.Cause(ctx); err != nil {
		return done, err
	}
	if done.memberships != total {
		return done, fmt.Errorf("loaded %d memberships, want %d", done.memberships, total)
	}
	return done, nil
}

// progress prints, every 10 s until stopped, how far the loading is.
func progress(s *service, start time.Time, count *int64, total int64) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				n := atomic.LoadInt64(count)
				rss, _, _ := s.rss()
				elapsed := time.Since(start)
				fmt.Printf("  %6s  %11d of %d memberships (%4.1f%%), %5.2f M/s, RSS %s\n", elapsed.Round(time.Second),
					n, total, 100*float64(n)/float64(total), float64(n)/elapsed.Seconds()/1e6, loadtest.MiB(rss))
			}
		}
	}()
	return func() { close(quit); wg.Wait() }
}

// postBatch sends one POST /batch of adds with its Idempotency-Key, and
// again with the same key after a 503 (the service asks for a second: its
// budgets or its commit queue are full, or the change waited for the disk
// past -commit-timeout and may still be applied) or a 409 (the first
// attempt is still being applied): the key makes a retry of an applied
// batch a replay of its reply. It checks that every user it sent was newly
// added.
func postBatch(ctx context.Context, client *http.Client, base string, body []byte, users int, key string) (stats batchStats, err error) {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/batch", bytes.NewReader(body))
		if err != nil {
			return stats, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			return stats, err
		}
		reply, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return stats, err
		}
		switch resp.StatusCode {
		case http.StatusOK:
			if resp.Header.Get("Idempotent-Replayed") == "true" {
				stats.replayed++
			}
			return stats, checkAdded(reply, users)
		case http.StatusServiceUnavailable:
			stats.unavailable++
		case http.StatusConflict:
			stats.inFlight++
		default:
			return stats, fmt.Errorf("POST /batch of %d users: %s %s", users, resp.Status, reply)
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return stats, ctx.Err()
		}
	}
}

// checkAdded checks that a batch's reply counts users added in all.
func checkAdded(reply []byte, users int) error {
	var r struct {
		Results []struct{ Added int }
	}
	if err := json.Unmarshal(reply, &r); err != nil {
		return fmt.Errorf("POST /batch: a reply that does not decode: %v: %.200s", err, reply)
	}
	added := 0
	for _, res := range r.Results {
		added += res.Added
	}
	if added != users {
		return fmt.Errorf("POST /batch of %d users added %d", users, added)
	}
	return nil
}
