package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/bench/loadtest"
)

// attackMetricsScale checks that a scrape costs the same at two million
// memberships as at ten, and that scrapers in a loop do not slow writes or
// reads down: a scrape that walks the data would hold what writers need.
func attackMetricsScale(ctx context.Context, h *harness, r *row) error {
	const (
		groups    = 200
		perGroup  = 10000
		scrapes   = 40
		scrapers  = 4
		loadFor   = 15 * time.Second
		postEvery = 10 * time.Millisecond
		postLimit = 2 * time.Second
	)
	s, err := startProbed(ctx, h.bin, serviceOptions{})
	if err != nil {
		return err
	}
	defer s.kill()
	small, smallSize, err := scrapeMedian(ctx, s, scrapes)
	if err != nil {
		return err
	}
	rssSmall := s.rss()
	posts := make([]post, groups)
	for g := range posts {
		// Distinct users in every group: the most users, and the largest
		// index of users' groups, for the memberships.
		posts[g] = post{fmt.Sprintf("g%03d", g), int64(g)*perGroup + 1, perGroup}
	}
	seedStart := time.Now()
	if err := seedPosts(ctx, s, posts); err != nil {
		return err
	}
	seedTook := time.Since(seedStart)
	big, bigSize, err := scrapeMedian(ctx, s, scrapes)
	if err != nil {
		return err
	}
	m, err := s.metrics(ctx, 10*time.Second)
	if err != nil {
		return err
	}
	r.notef("seeded %d memberships (%d groups of %d) in %s (membership_members %s); RSS %s at 10, %s at %d",
		groups*perGroup, groups, perGroup, fmtDur(seedTook), metricOr(m, "membership_members"), loadtest.MiB(rssSmall), loadtest.MiB(s.rss()), groups*perGroup)
	ratio := float64(big) / float64(small)
	r.check("scrape median at 2M < 3x at 10 + 1ms",
		fmt.Sprintf("%s at 10 (%d B), %s at 2M (%d B): x%.2f", fmtDur(small), smallSize, fmtDur(big), bigSize, ratio),
		big < 3*small+time.Millisecond)

	var postRec *recorder
	err = measure(ctx, h, s, r, 0, func(ctx context.Context, sm *sampler) error {
		loadCtx, cancel := context.WithTimeout(ctx, loadFor)
		defer cancel()
		reqCtx := context.WithoutCancel(ctx)
		scrapeRec := newRecorder()
		var wg sync.WaitGroup
		for range scrapers {
			spawn(&wg, func() {
				for loadCtx.Err() == nil {
					scrapeRec.addReply(get(reqCtx, loadClient, s.base+"/metrics", 10*time.Second), 10*time.Second)
				}
			})
		}
		postRec = newRecorder()
		var uid atomic.Int64
		uid.Store(5_000_000)
		spawn(&wg, func() {
			openLoop(loadCtx, postEvery, 200, func() {
				rep := do(reqCtx, loadClient, http.MethodPost, s.base+"/group-user/metrics-post", loadtest.UsersBody(uid.Add(3), 3), formType, postLimit)
				postRec.addReply(rep, postLimit)
			}, func() { postRec.add(postLimit, "skipped") })
		})
		wg.Wait()
		r.notef("%d scrapers for %s: %d scrapes (%s), p50 %s p99 %s", scrapers, loadFor, scrapeRec.n(), scrapeRec.tally(), scrapeRec.pctString(50), scrapeRec.pctString(99))
		r.notef("POST of 3 users every %s meanwhile: %s; p50 %s p99 %s", postEvery, postRec.tally(), postRec.pctString(50), postRec.pctString(99))
		return nil
	})
	if postRec != nil {
		p99, ok := postRec.pct(99)
		r.check("POST p99 < 100ms while scraped", fmt.Sprintf("%s (%d POSTs)", postRec.pctString(99), postRec.n()), ok && p99 < 100*time.Millisecond)
	}
	return err
}

// scrapeMedian scrapes /metrics n times, one after another, and returns the
// median time and the size of the last reply.
func scrapeMedian(ctx context.Context, s *service, n int) (time.Duration, int, error) {
	var d []time.Duration
	size := 0
	for range n {
		rep := get(ctx, sideClient, s.base+"/metrics", 10*time.Second)
		if rep.err != nil || rep.status != http.StatusOK {
			return 0, 0, fmt.Errorf("scraping /metrics: %s", rep.outcome())
		}
		d = append(d, rep.took)
		size = len(rep.body)
	}
	slices.Sort(d)
	return d[len(d)/2], size, nil
}
