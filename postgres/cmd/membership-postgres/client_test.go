package main

// The Go client (package client) against two instances of the command on
// one database: what a team behind a load balancer relies on.

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	mclient "example.com/groupmembership/client"
	"example.com/groupmembership/postgres/internal/pgtest"
)

// newClient returns a client of base, with transport hc (nil: a transport
// of its own, so that tests share no connections).
func newClient(t *testing.T, base string, hc *http.Client, opts ...mclient.Option) *mclient.Client {
	t.Helper()
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		t.Cleanup(tr.CloseIdleConnections)
		hc = &http.Client{Transport: tr}
	}
	c, err := mclient.New(base, append([]mclient.Option{mclient.WithHTTPClient(hc)}, opts...)...)
	require.NoError(t, err)
	return c
}

// hostOf returns the host:port of an instance's base URL.
func hostOf(base string) string { return strings.TrimPrefix(base, "http://") }

// splitter is a load balancer in a RoundTripper: it sends the reads (GET)
// to the instance reads, and the rest where the client sent them. It
// records the X-Min-Revision of each read.
type splitter struct {
	next  http.RoundTripper
	reads string // host:port

	mu sync.Mutex
	// minRevisions are the X-Min-Revision of the reads, in order.
	minRevisions []string
}

func (s *splitter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet {
		r = r.Clone(r.Context())
		r.URL.Host, r.Host = s.reads, s.reads
		s.mu.Lock()
		s.minRevisions = append(s.minRevisions, r.Header.Get("X-Min-Revision"))
		s.mu.Unlock()
	}
	return s.next.RoundTrip(r)
}

func (s *splitter) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.minRevisions)
}

// A client with WithReadYourWrites whose writes go to one instance and
// reads to another reads every write it made: it sends the write's
// revision in X-Min-Revision, and the reading instance waits for it.
func TestClientReadsItsWritesAcrossInstances(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a, b := start(t, url), start(t, url)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	lb := &splitter{next: tr, reads: hostOf(b.base)}
	c := newClient(t, a.base, &http.Client{Transport: lb}, mclient.WithReadYourWrites())
	ctx := t.Context()

	const n = 20
	var want []string
	for uid := int64(1); uid <= n; uid++ {
		res, err := c.Add(ctx, "g", mclient.Users(uid))
		require.NoError(t, err)
		require.Equal(t, 1, res.Count)
		m, ok, err := c.Member(ctx, "g", uid)
		require.NoError(t, err)
		assert.True(t, ok, "instance B has the member instance A just added (uid %d)", uid)
		assert.Equal(t, uid, m.UID)
		page, err := c.ListPage(ctx, "g", mclient.ListOptions{})
		require.NoError(t, err)
		assert.Len(t, page.Items, int(uid), "instance B lists every member added through A")
		rev := strconv.FormatUint(uint64(res.Revision), 10)
		want = append(want, rev, rev)
	}
	assert.Equal(t, want, lb.seen(), "every read, on B, asked for the revision of the write just made on A")
}

// Two clients sync one group with Replace and If-Match, with the same
// ETag, one through each instance, at once: exactly one wins, the other
// gets 412 with the winner's ETag, and both instances list the winner's
// users.
func TestClientSyncRaceAcrossInstances(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a, b := start(t, url), start(t, url)
	clients := []*mclient.Client{newClient(t, a.base, nil), newClient(t, b.base, nil)}
	ctx := t.Context()
	res, err := clients[0].Add(ctx, "sync", mclient.Users(1))
	require.NoError(t, err)
	last := res.Revision

	for round := range 10 {
		// Each round reads the ETag through A, as of the last round's
		// write, as a syncer would.
		_, etag := list(t, a.base, "sync", int64(last))
		require.NotEmpty(t, etag)
		var (
			results [2]mclient.WriteResult
			errs    [2]error
			ready   sync.WaitGroup
			done    sync.WaitGroup
			fire    = make(chan struct{})
		)
		for i, c := range clients {
			ready.Add(1)
			done.Go(func() {
				users := mclient.Users(int64(100*round + 10 + i))
				ready.Done()
				<-fire
				results[i], errs[i] = c.Replace(ctx, "sync", users, mclient.IfMatch(etag))
			})
		}
		ready.Wait()
		close(fire)
		done.Wait()

		winner, loser := 0, 1
		if errs[0] != nil {
			winner, loser = 1, 0
		}
		require.NoError(t, errs[winner], "round %d: one of the two wins", round)
		require.True(t, mclient.IsPreconditionFailed(errs[loser]), "round %d: the other gets 412, not %v", round, errs[loser])
		wantUID := int64(100*round + 10 + winner)
		assert.Equal(t, 1, results[winner].Count, "round %d", round)
		last = results[winner].Revision
		for _, inst := range []*instance{a, b} {
			uids, etag := list(t, inst.base, "sync", int64(last))
			assert.Equal(t, []int64{wantUID}, uids, "round %d: %s lists the winner's users", round, inst.base)
			var e *mclient.Error
			if errors.As(errs[loser], &e) {
				assert.Equal(t, etag, e.ETag, "round %d: the 412 names the group's ETag, the winner's", round)
			}
		}
	}
}

// Follow on instance B yields every change written through instance A,
// by concurrent writers, in revision order, each once.
func TestClientFollowsOnOneInstanceWhatAnotherWrites(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a, b := start(t, url), start(t, url)
	writer, follower := newClient(t, a.base, nil), newClient(t, b.base, nil)
	ctx, cancel := context.WithCancel(t.Context())
	pos, err := follower.Latest(ctx)
	require.NoError(t, err)

	type followed struct {
		change mclient.Change
		err    error
	}
	feed := make(chan followed)
	var following sync.WaitGroup
	defer func() { cancel(); following.Wait() }()
	following.Go(func() {
		for ch, err := range follower.Follow(ctx, pos.Revision, mclient.FromEpoch(pos.Epoch)) {
			select {
			case feed <- followed{ch, err}:
			case <-ctx.Done():
				return
			}
		}
	})

	// Four writers, each its own group, through A: adds, removes and a
	// replace, each a change.
	type written struct {
		op    mclient.Op
		group string
	}
	var (
		mu      sync.Mutex
		wrote   = map[mclient.Revision]written{}
		writers sync.WaitGroup
	)
	for w := range 4 {
		group := string(rune('a' + w))
		writers.Go(func() {
			for i := range int64(10) {
				var res mclient.WriteResult
				var err error
				op := mclient.OpAdd
				switch {
				case i == 9:
					op = mclient.OpReplace
					res, err = writer.Replace(ctx, group, mclient.Users(1000))
				case i%3 == 2:
					op = mclient.OpRemove
					res, err = writer.Remove(ctx, group, []int64{i})
				default:
					res, err = writer.Add(ctx, group, mclient.Users(i+1))
				}
				if !assert.NoError(t, err) || !assert.Positive(t, res.Count, "%s %s %d changes something", op, group, i) {
					return
				}
				mu.Lock()
				wrote[res.Revision] = written{op, group}
				mu.Unlock()
			}
		})
	}
	writers.Wait()
	require.Len(t, wrote, 40, "every write acknowledged, each with a revision of its own")
	want := slices.Sorted(func(yield func(mclient.Revision) bool) {
		for rev := range wrote {
			if !yield(rev) {
				return
			}
		}
	})

	next := func() mclient.Change {
		t.Helper()
		select {
		case f := <-feed:
			require.NoError(t, f.err)
			return f.change
		case <-time.After(time.Minute):
			require.FailNow(t, "Follow on B yielded nothing for a minute")
			return mclient.Change{}
		}
	}
	var got []mclient.Revision
	for range want {
		ch := next()
		got = append(got, ch.Revision)
		assert.Equal(t, wrote[ch.Revision], written{ch.Op, ch.Group}, "revision %d", ch.Revision)
	}
	assert.Equal(t, want, got, "every change, in order, each once")
	// A last write: the next change Follow yields is it, not one again.
	res, err := writer.Add(ctx, "last", mclient.Users(1))
	require.NoError(t, err)
	assert.Equal(t, res.Revision, next().Revision)
}

// loseFirstWrite serves target through a reverse proxy, but for the first
// request that is not a GET: that one is forwarded, and applied, and its
// reply is lost: the client's connection is closed without it. applied
// receives that reply's X-Revision. target gives the instance of each
// request.
func loseFirstWrite(t *testing.T, target func() string, applied chan<- string) *httptest.Server {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true} // no connection outlives an instance
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(&url.URL{Scheme: "http", Host: target()}) },
		Transport: tr,
	}
	var writes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || writes.Add(1) > 1 {
			rp.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		applied <- rec.Header().Get("X-Revision")
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A keyed write whose reply is lost after the service applied it is sent
// again by the client, to the same instance or, through a load balancer,
// to the other one: the retry is a replay of the first, and the feed holds
// one change.
func TestClientRetriesAWriteWhoseReplyWasLost(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a, b := start(t, url), start(t, url)
	reader := newClient(t, b.base, nil)
	for _, tt := range []struct {
		name  string
		group string
		retry *instance // where the retry goes
	}{
		{"to the same instance", "same", a},
		{"to the other instance", "other", b},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var sent atomic.Int32
			applied := make(chan string, 1)
			proxy := loseFirstWrite(t, func() string {
				if sent.Add(1) == 1 {
					return hostOf(a.base)
				}
				return hostOf(tt.retry.base)
			}, applied)
			c := newClient(t, proxy.URL, nil)
			ctx := t.Context()
			before, err := reader.Latest(ctx)
			require.NoError(t, err)

			res, err := c.Add(ctx, tt.group, mclient.Users(1, 2))
			require.NoError(t, err)
			firstRev := <-applied
			assert.True(t, res.Replayed, "the retry got the first attempt's reply")
			assert.Equal(t, 2, res.Count, "the first attempt's count")
			assert.Equal(t, firstRev, strconv.FormatUint(uint64(res.Revision), 10), "the first attempt's revision")
			assert.Equal(t, int32(2), sent.Load(), "two attempts")

			feed, err := reader.Changes(ctx, mclient.ChangesOptions{After: before.Revision, Wait: 10 * time.Second})
			require.NoError(t, err)
			require.Len(t, feed.Changes, 1, "applied once")
			assert.Equal(t, res.Revision, feed.Changes[0].Revision)
			assert.Equal(t, mclient.OpAdd, feed.Changes[0].Op)
			assert.Equal(t, []int64{1, 2}, feed.Changes[0].UIDs)
			uids, _ := list(t, b.base, tt.group, int64(res.Revision))
			assert.Equal(t, []int64{1, 2}, uids)
		})
	}
}

// refusedOnce is a dialer that, the first time a dial is refused while
// armed, tells refused and waits for release before it returns the
// refusal: the test restarts the service in between, deterministically
// before the client's next attempt.
type refusedOnce struct {
	armed    atomic.Bool
	dials    atomic.Int32
	refused  chan struct{}
	release  chan struct{}
	notified atomic.Bool
}

func (d *refusedOnce) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.dials.Add(1)
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil && d.armed.Load() && errors.Is(err, syscall.ECONNREFUSED) && d.notified.CompareAndSwap(false, true) {
		close(d.refused)
		select {
		case <-d.release:
		case <-ctx.Done():
		}
	}
	return conn, err
}

// An instance stopped (kill -9) while a client calls it, and started again
// on its address before the client's retries run out: the call succeeds,
// applied once, and the other instance sees it.
func TestClientRetriesAcrossARestartedInstance(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a, b := start(t, url), start(t, url)
	d := &refusedOnce{refused: make(chan struct{}), release: make(chan struct{})}
	tr := &http.Transport{DialContext: d.dial}
	t.Cleanup(tr.CloseIdleConnections)
	// A restart takes a while: the wait bounds it, not the attempts.
	c := newClient(t, a.base, &http.Client{Transport: tr}, mclient.WithRetry(mclient.RetryPolicy{MaxElapsed: time.Minute}))
	ctx := t.Context()
	first, err := c.Add(ctx, "r", mclient.Users(1))
	require.NoError(t, err)

	require.NoError(t, a.cmd.Process.Signal(syscall.SIGKILL))
	_ = a.cmd.Wait()
	tr.CloseIdleConnections() // the next attempt dials
	d.armed.Store(true)
	dialsBefore := d.dials.Load()
	type result struct {
		res mclient.WriteResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := c.Add(ctx, "r", mclient.Users(2))
		done <- result{res, err}
	}()
	select {
	case <-d.refused:
	case r := <-done:
		require.FailNow(t, "the call ended before its first dial was refused", "%+v", r)
	case <-time.After(time.Minute):
		require.FailNow(t, "no dial was refused within a minute")
	}
	a = start(t, url, "-addr", hostOf(a.base))
	close(d.release)
	var r result
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		require.FailNow(t, "the call did not end within a minute of the restart")
	}
	require.NoError(t, r.err, "the retry reached the restarted instance")
	assert.False(t, r.res.Replayed, "the first attempt reached no one")
	assert.Equal(t, 1, r.res.Count)
	assert.Greater(t, r.res.Revision, first.Revision)
	assert.Equal(t, int32(2), d.dials.Load()-dialsBefore, "one refused attempt, one retry")

	feed, err := newClient(t, b.base, nil).Changes(ctx, mclient.ChangesOptions{After: first.Revision, Wait: 10 * time.Second})
	require.NoError(t, err)
	require.Len(t, feed.Changes, 1, "applied once")
	assert.Equal(t, r.res.Revision, feed.Changes[0].Revision)
	for _, inst := range []*instance{a, b} {
		uids, _ := list(t, inst.base, "r", int64(r.res.Revision))
		assert.Equal(t, []int64{1, 2}, uids, "%s", inst.base)
	}
}
