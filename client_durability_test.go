package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	mclient "example.com/groupmembership/client"
)

// The Go client's keyed write, applied by the program with -data-dir,
// whose reply is lost because the program is killed with SIGKILL right
// after it answered: the program starts again on the same directory and
// address, and the client's retry of the call, with the same key, is a
// replay of the first attempt, which is in the feed once.
func TestTheClientRetriesAKeyedWriteAcrossAKill(t *testing.T) {
	dir := t.TempDir()
	p := startProcess(t, "-data-dir", dir)
	addr := strings.TrimPrefix(p.base, "http://")

	// A proxy between the client and the program: the first write is
	// forwarded and answered, then held until the program is restarted,
	// and its connection closed without the reply.
	applied := make(chan *httptest.ResponseRecorder, 1)
	restarted := make(chan struct{})
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(&url.URL{Scheme: "http", Host: addr}) },
		Transport: &http.Transport{DisableKeepAlives: true}, // no connection outlives the program
	}
	var writes atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || writes.Add(1) > 1 {
			rp.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		applied <- rec
		<-restarted
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(proxy.Close)
	var release sync.Once
	restart := func() { release.Do(func() { close(restarted) }) }
	t.Cleanup(restart) // before proxy.Close, which waits for the handler

	c, err := mclient.New(proxy.URL, mclient.WithRetry(mclient.RetryPolicy{MaxElapsed: time.Minute}))
	require.NoError(t, err)
	type result struct {
		res mclient.WriteResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := c.Add(t.Context(), "g", mclient.Users(1, 2), mclient.WithIdempotencyKey("kill-9-1"))
		done <- result{res, err}
	}()
	var first *httptest.ResponseRecorder
	select {
	case first = <-applied:
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the write never reached the program")
	}
	require.Equal(t, http.StatusOK, first.Code, first.Body.String())
	require.NoError(t, p.cmd.Process.Kill()) // SIGKILL: no flush, no goodbye
	_ = p.cmd.Wait()
	p = startProcess(t, "-data-dir", dir, "-addr", addr)
	restart()

	var r result
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		require.FailNow(t, "the call did not end within a minute of the restart")
	}
	require.NoError(t, r.err)
	assert.Equal(t, mclient.WriteResult{Revision: 1, Count: 2, Replayed: true, IdempotencyKey: "kill-9-1"}, r.res,
		"the first attempt's reply, replayed")
	assert.Equal(t, first.Header().Get("X-Revision"), strconv.FormatUint(uint64(r.res.Revision), 10))
	assert.Equal(t, int32(2), writes.Load(), "two attempts")

	// The call made again, as a program restarted itself would: a replay too.
	again, err := c.Add(t.Context(), "g", mclient.Users(1, 2), mclient.WithIdempotencyKey("kill-9-1"))
	require.NoError(t, err)
	assert.Equal(t, r.res, again)

	feed, err := c.Changes(t.Context(), mclient.ChangesOptions{})
	require.NoError(t, err)
	require.Len(t, feed.Changes, 1, "applied once")
	assert.Equal(t, mclient.OpAdd, feed.Changes[0].Op)
	assert.Equal(t, []int64{1, 2}, feed.Changes[0].UIDs)
	assert.Equal(t, map[int64]bool{1: true, 2: true}, members(t, p.base, "g"))
}
