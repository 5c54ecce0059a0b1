package main

// The Go client (package client) against two instances of the command on
// one database: what a team behind a load balancer relies on.

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
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
