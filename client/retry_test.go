package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/client"
	"example.com/groupmembership/membershiptest"
)

// busy answers 503 with Retry-After, as the service does.
func busy(w http.ResponseWriter, retryAfter string) {
	w.Header().Set("Retry-After", retryAfter)
	writeJSON(w, 503, `{"error":{"code":"unavailable","message":"busy"}}`)
}

func TestA503WithRetryAfterIsRetriedAfterIt(t *testing.T) {
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			busy(w, "1")
			return
		}
		writeJSON(w, 200, `[{"uid":1,"nickname":""}]`)
	})
	ft := newFakeTime()
	c := newClient(t, f.URL, ft)
	page, err := c.ListPage(t.Context(), "g", client.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, page.Items, 1)
	assert.Equal(t, []time.Duration{time.Second}, ft.Sleeps(), "Retry-After: 1 is waited for, no more, no less")
}

func TestRetryAfterIsCappedByThePolicy(t *testing.T) {
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) { busy(w, "3600") })
	ft := newFakeTime()
	c := newClient(t, f.URL, ft, client.WithRetry(client.RetryPolicy{MaxDelay: 500 * time.Millisecond, MaxAttempts: 3}))
	_, err := c.ListPage(t.Context(), "g", client.ListOptions{})
	assert.True(t, client.IsUnavailable(err), "got %v", err)
	assert.Equal(t, []time.Duration{500 * time.Millisecond, 500 * time.Millisecond}, ft.Sleeps())
	assert.Len(t, f.Requests(), 3)
}

func TestA503WithoutRetryAfterIsNotRetried(t *testing.T) {
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeJSON(w, 503, `{"error":{"code":"unavailable","message":"busy"}}`)
	})
	ft := newFakeTime()
	c := newClient(t, f.URL, ft)
	_, err := c.ListPage(t.Context(), "g", client.ListOptions{})
	assert.True(t, client.IsUnavailable(err))
	assert.Len(t, f.Requests(), 1)
}

func TestRetriesRunOutOfAttempts(t *testing.T) {
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) { busy(w, "1") })
	ft := newFakeTime()
	c := newClient(t, f.URL, ft)
	_, err := c.Add(t.Context(), "g", client.Users(1))
	var e *client.Error
	require.ErrorAs(t, err, &e, "the last attempt's error")
	assert.Equal(t, 503, e.StatusCode)
	assert.Len(t, f.Requests(), client.DefaultMaxAttempts)
	assert.Len(t, ft.Sleeps(), client.DefaultMaxAttempts-1)
}

func TestRetriesRunOutOfTime(t *testing.T) {
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) { busy(w, "1") })
	ft := newFakeTime()
	c := newClient(t, f.URL, ft, client.WithRetry(client.RetryPolicy{MaxAttempts: 100, MaxElapsed: 3500 * time.Millisecond}))
	_, err := c.Add(t.Context(), "g", client.Users(1))
	assert.True(t, client.IsUnavailable(err))
	assert.Equal(t, []time.Duration{time.Second, time.Second, time.Second}, ft.Sleeps(), "a fourth wait would end past 3.5 s")
	assert.Len(t, f.Requests(), 4)
}

func TestConnectionErrorsBackOffExponentially(t *testing.T) {
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) { hangUp(w) })
	ft := newFakeTime()
	c := newClient(t, f.URL, ft, client.WithRetry(client.RetryPolicy{MaxAttempts: 6, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second, MaxElapsed: time.Minute}))
	_, err := c.ListPage(t.Context(), "g", client.ListOptions{})
	require.Error(t, err)
	assert.Nil(t, asClientError(err), "a connection error, not a reply")
	// The jitter drawn here is always the largest: the bounds of full jitter.
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second}, ft.Sleeps())
}

func TestAConnectionRefusedIsRetried(t *testing.T) {
	ln := freeListener(t)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	var served atomic.Int32
	ft := newFakeTime()
	ft.onSleep = func(ctx context.Context, n int) {
		if n == 2 { // the service comes up during the second wait
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return
			}
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				served.Add(1)
				writeJSON(w, 200, `[]`)
			}))
			srv.Listener = ln
			srv.Start()
			t.Cleanup(srv.Close)
		}
	}
	c := newClient(t, "http://"+addr, ft)
	_, err := c.UserGroupsPage(t.Context(), 1, client.PageOptions{})
	require.NoError(t, err)
	assert.Len(t, ft.Sleeps(), 2)
	assert.Equal(t, int32(1), served.Load())
}

func TestContextCancelledMidRetry(t *testing.T) {
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) { busy(w, "1") })
	ft := newFakeTime()
	ctx, cancel := context.WithCancel(t.Context())
	ft.onSleep = func(context.Context, int) { cancel() }
	c := newClient(t, f.URL, ft)
	_, err := c.Add(ctx, "g", client.Users(1))
	assert.ErrorIs(t, err, context.Canceled)
	assert.True(t, client.IsUnavailable(err), "the failure that was being retried stays in the chain")
	assert.Len(t, f.Requests(), 1, "no attempt after the context ended")
}

func TestAWriteWithoutAKeyIsNeverRetried(t *testing.T) {
	for _, tt := range []struct {
		name  string
		serve func(w http.ResponseWriter)
	}{
		{"503", func(w http.ResponseWriter) { busy(w, "1") }},
		{"409", func(w http.ResponseWriter) {
			writeJSON(w, 409, `{"error":{"code":"idempotency_key_in_flight","message":"wait"}}`)
		}},
		{"a connection closed", hangUp},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) { tt.serve(w) })
			ft := newFakeTime()
			c := newClient(t, f.URL, ft)
			_, err := c.Add(t.Context(), "g", client.Users(1), client.WithoutIdempotencyKey())
			require.Error(t, err)
			reqs := f.Requests()
			require.Len(t, reqs, 1)
			assert.Empty(t, reqs[0].Header.Get("Idempotency-Key"))
			assert.Empty(t, ft.Sleeps())
		})
	}
}

func TestAKeyIsMadePerCallAndKeptAcrossRetries(t *testing.T) {
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n%2 == 1 {
			busy(w, "1")
			return
		}
		w.Header().Set("X-Revision", strconv.Itoa(n))
		writeJSON(w, 200, `1`)
	})
	ft := newFakeTime()
	c := newClient(t, f.URL, ft)
	first, err := c.Add(t.Context(), "g", client.Users(1))
	require.NoError(t, err)
	second, err := c.Remove(t.Context(), "g", []int64{1})
	require.NoError(t, err)
	mine, err := c.Add(t.Context(), "g", client.Users(1), client.WithIdempotencyKey("my-key-1"))
	require.NoError(t, err)

	keys := []string{}
	for _, r := range f.Requests() {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
	}
	require.Len(t, keys, 6)
	assert.Regexp(t, `^[0-9a-f]{32}$`, keys[0])
	assert.Equal(t, keys[0], keys[1], "a retry sends the key again")
	assert.Equal(t, keys[2], keys[3])
	assert.NotEqual(t, keys[0], keys[2], "each call has its own key")
	assert.Equal(t, []string{"my-key-1", "my-key-1"}, keys[4:])
	assert.Equal(t, keys[0], first.IdempotencyKey)
	assert.Equal(t, keys[2], second.IdempotencyKey)
	assert.Equal(t, "my-key-1", mine.IdempotencyKey)
}

func TestAKeyInFlightIsRetried(t *testing.T) {
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			writeJSON(w, 409, `{"error":{"code":"idempotency_key_in_flight","message":"wait"}}`)
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		w.Header().Set("X-Revision", "12")
		writeJSON(w, 200, `2`)
	})
	ft := newFakeTime()
	c := newClient(t, f.URL, ft)
	res, err := c.Add(t.Context(), "g", client.Users(1, 2))
	require.NoError(t, err)
	assert.Equal(t, client.WriteResult{Revision: 12, Count: 2, Replayed: true, IdempotencyKey: res.IdempotencyKey}, res)
	assert.Len(t, ft.Sleeps(), 1)
}

// TestAKeyedWriteRetriedAfterAKilledConnectionAppliesOnce kills the
// connection of the first attempt after the service applied the write:
// the client cannot tell whether it was, and sends it again with its key,
// which the service answers with the first reply.
func TestAKeyedWriteRetriedAfterAKilledConnectionAppliesOnce(t *testing.T) {
	var posts atomic.Int32
	killFirstPost := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || posts.Add(1) > 1 {
				next.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(httptest.NewRecorder(), r) // applied, its reply lost
			hangUp(w)
		})
	}
	srv := membershiptest.NewServer(t, membershiptest.WithMiddleware(killFirstPost))
	ft := newFakeTime()
	c := newClient(t, srv.URL, ft)
	res, err := c.Add(t.Context(), "g", client.Users(1, 2))
	require.NoError(t, err)
	assert.True(t, res.Replayed, "the retry got the first attempt's reply")
	assert.Equal(t, 2, res.Count, "the first attempt's count")
	assert.Equal(t, client.Revision(1), res.Revision)
	assert.Equal(t, int32(2), posts.Load())

	feed, err := c.Changes(t.Context(), client.ChangesOptions{})
	require.NoError(t, err)
	assert.Len(t, feed.Changes, 1, "applied once")

	// Without a key, the same loss is the caller's to handle.
	posts.Store(0)
	_, err = c.Add(t.Context(), "h", client.Users(1), client.WithoutIdempotencyKey())
	require.Error(t, err)
	assert.Equal(t, int32(1), posts.Load())
}

// TestARestartedServiceIsRetried stops the service and starts another on
// its address during the client's wait: the write that found the service
// gone is applied once, by the new one.
func TestARestartedServiceIsRetried(t *testing.T) {
	first := membershiptest.NewServer(t)
	addr := first.Addr()
	ft := newFakeTime()
	c := newClient(t, first.URL, ft)
	_, err := c.Add(t.Context(), "g", client.Users(1))
	require.NoError(t, err)
	first.Close()

	var second *membershiptest.Server
	ft.onSleep = func(ctx context.Context, n int) {
		if n == 1 {
			ln, err := net.Listen("tcp", addr)
			if err == nil {
				second = membershiptest.NewServer(t, membershiptest.WithListener(ln))
			}
		}
	}
	res, err := c.Add(t.Context(), "g", client.Users(2))
	require.NoError(t, err)
	require.NotNil(t, second, "the service came back on its address")
	assert.Equal(t, client.Revision(1), res.Revision, "the new service starts a new history")
	page, err := c.ListPage(t.Context(), "g", client.ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, []int64{2}, uidsOf(page.Items), "a service without a data directory comes back empty")
}

func asClientError(err error) *client.Error {
	var e *client.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
