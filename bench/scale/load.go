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
)

// loaded is what the loading measured.
type loaded struct {
	memberships int64
	requests    int64
	retries     int64 // 503s, sent again after their Retry-After
	took        time.Duration
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
	}
	requests := make(chan request, 2*conns)
	go func() {
		defer close(requests)
		for b := p.batch(); b != nil; b = p.batch() {
			select {
			case requests <- request{body: b.appendBody(nil), users: b.users()}:
			case <-ctx.Done():
				return
			}
		}
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}, Timeout: time.Minute}
	var done loaded
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range requests {
				retries, err := postBatch(ctx, client, s.base, r.body, r.users)
				if err != nil {
					cancel(err)
					return
				}
				atomic.AddInt64(&done.memberships, int64(r.users))
				atomic.AddInt64(&done.requests, 1)
				atomic.AddInt64(&done.retries, int64(retries))
			}
		}()
	}
	stopProgress := progress(s, start, &done.memberships, total)
	wg.Wait()
	stopProgress()
	done.took = time.Since(start)
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
					n, total, 100*float64(n)/float64(total), float64(n)/elapsed.Seconds()/1e6, mib(rss))
			}
		}
	}()
	return func() { close(quit); wg.Wait() }
}

// postBatch sends one POST /batch of adds, again after a 503 (the service
// asks for a second: its budgets or its commit queue are full), and checks
// that every user it sent was newly added.
func postBatch(ctx context.Context, client *http.Client, base string, body []byte, users int) (retries int, err error) {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/batch", bytes.NewReader(body))
		if err != nil {
			return retries, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return retries, err
		}
		reply, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return retries, err
		}
		switch resp.StatusCode {
		case http.StatusOK:
			return retries, checkAdded(reply, users)
		case http.StatusServiceUnavailable:
			retries++
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return retries, ctx.Err()
			}
		default:
			return retries, fmt.Errorf("POST /batch of %d users: %s %s", users, resp.Status, reply)
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
