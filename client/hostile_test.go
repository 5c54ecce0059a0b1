package client_test

import (
	"fmt"
	"math"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/client"
)

// A 2xx that is not the service's (no X-Revision, or a body of the wrong
// shape) is an error, never a write or a check reported done.
func TestRepliesOfTheWrongShapeAreErrors(t *testing.T) {
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch r.URL.Path {
		case "/check":
			writeJSON(w, 200, `{"results":[true]}`)
		default:
			writeJSON(w, 200, `1`) // no X-Revision
		}
	})
	c := newClient(t, f.URL, newFakeTime())
	res, err := c.Add(t.Context(), "g", client.Users(1))
	assert.ErrorContains(t, err, "X-Revision")
	assert.Len(t, res.IdempotencyKey, 32, "the key comes back with the error, to retry with")
	_, err = c.Check(t.Context(), []client.Check{{Group: "g", UID: 1}, {Group: "g", UID: 2}, {Group: "h", UID: 3}})
	assert.ErrorContains(t, err, "1 results for 3 checks")
}

// A keyed write whose reply is lost returns its key with the error, so
// that the caller can send it again, applied at most once.
func TestAFailedKeyedWriteReturnsItsKey(t *testing.T) {
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeJSON(w, 500, `{"error":{"code":"internal","message":"boom"}}`)
	})
	c := newClient(t, f.URL, newFakeTime())
	res, err := c.Replace(t.Context(), "g", client.Users(1))
	require.Error(t, err)
	assert.Equal(t, f.Requests()[0].Header.Get("Idempotency-Key"), res.IdempotencyKey)
	bres, err := c.Batch(t.Context(), []client.BatchChange{})
	require.Error(t, err)
	assert.NotEmpty(t, bres.IdempotencyKey)
}

// The list cache counts what it keeps, headers included, and keeps only
// the headers a page is read from: a server's big headers cannot make it
// hold more than its bound.
func TestTheCacheBoundCountsHeaders(t *testing.T) {
	pad := strings.Repeat("x", 32<<10)
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("ETag", `"e-1"`)
		w.Header().Set("X-Pad", pad)
		writeJSON(w, 200, `[]`)
	})
	c := newClient(t, f.URL, newFakeTime(), client.WithListCacheBytes(64<<10))
	for i := range 200 {
		_, err := c.ListPage(t.Context(), fmt.Sprintf("g%03d", i), client.ListOptions{})
		require.NoError(t, err)
	}
	entries, bytes := client.CacheStats(c)
	assert.LessOrEqual(t, bytes, int64(64<<10))
	assert.Less(t, entries, 200, "each entry costs its overhead: 200 cannot fit in 64 KiB")
	assert.Greater(t, entries, 10)
}

// Follow never polls faster than a second a poll while nothing happens,
// whatever wait it is given, and refuses a reply that goes backwards.
func TestFollowDoesNotBusyLoop(t *testing.T) {
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) {
		assert.Equal(t, "1s", r.URL.Query().Get("wait"))
		if n < 3 {
			writeJSON(w, 200, `[]`) // at once, with no Retry-After
			return
		}
		writeJSON(w, 200, `[{"rev":1,"op":"add","group":"g","uids":[1]}]`)
	})
	ft := newFakeTime()
	c := newClient(t, f.URL, ft)
	var errs []error
	for _, err := range c.Follow(t.Context(), 5, client.FollowWait(0)) {
		errs = append(errs, err)
		if err != nil {
			break
		}
	}
	require.Len(t, errs, 1)
	assert.ErrorContains(t, errs[0], "gave revision 1, not after it")
	assert.Len(t, ft.Sleeps(), 2, "a pause after each empty page that came at once")
	for _, d := range ft.Sleeps() {
		assert.Greater(t, d, time.Duration(0))
	}
}

// An endless reply costs the client about twice its bound at most, never
// the several times that reading with growing appends would allocate.
func TestAnEndlessReplyCostsAtMostTwiceTheBound(t *testing.T) {
	const bound = 8 << 20
	chunk := []byte(strings.Repeat("[1,", 1024))
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		for sent := 0; sent < 2*bound; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	c := newClient(t, f.URL, newFakeTime(), client.WithMaxReplyBytes(bound))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := c.ListPage(t.Context(), "g", client.ListOptions{})
	runtime.ReadMemStats(&after)
	assert.ErrorIs(t, err, client.ErrReplyTooLarge)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(3*bound), "bytes allocated reading it")
}

// A Content-Length is a claim: a reply that announces 32 MiB and sends 2
// bytes costs the client no 32 MiB buffer; a bound of MaxInt64 is no
// overflow.
func TestAContentLengthIsNotTakenOnTrust(t *testing.T) {
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Length", strconv.Itoa(32<<20))
		w.WriteHeader(200)
		_, _ = w.Write([]byte("[]"))
	})
	c := newClient(t, f.URL, newFakeTime(), client.WithMaxReplyBytes(32<<20))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := c.ListPage(t.Context(), "g", client.ListOptions{})
	runtime.ReadMemStats(&after)
	assert.Error(t, err, "the body ended before its length")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20))

	ok := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) { writeJSON(w, 200, `[]`) })
	huge := newClient(t, ok.URL, newFakeTime(), client.WithMaxReplyBytes(math.MaxInt64))
	_, err = huge.ListPage(t.Context(), "g", client.ListOptions{})
	assert.NoError(t, err)
}
