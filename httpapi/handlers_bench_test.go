package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/internal/accesslog"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// benchHandler returns the API over a store holding group "g" with size
// random members, with a list cache of cacheBytes.
func benchHandler(b *testing.B, size int, cacheBytes int64) http.Handler {
	b.Helper()
	st := memory.New()
	rng := rand.New(rand.NewPCG(1, 2))
	users := make([]membership.User, size)
	for i := range users {
		users[i] = membership.User{UID: membership.UID(rng.Int64N(1e9) + 1)}
	}
	if _, err := storetest.Add(context.Background(), st, "g", users); err != nil {
		b.Fatal(err)
	}
	return httpapi.NewHandler(membership.NewService(st, membership.ServiceOptions{}), httpapi.Options{ListCacheBytes: cacheBytes})
}

// discardWriter is a ResponseWriter that keeps nothing, so that the benchmark
// measures the handler and not a recorder's buffer.
type discardWriter struct {
	header http.Header
	n      int
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// BenchmarkList reads a group of 10, 1000 and a million members, encoding
// it each time (cache=off) and from the cache of encoded lists (cache=on).
// ns/member compares the sizes; B/op against the body size (SetBytes) shows
// how many copies of the body one read holds.
func BenchmarkList(b *testing.B) {
	for _, tc := range []struct {
		name  string
		bytes int64
	}{{"off", 0}, {"on", httpapi.DefaultListCacheBytes}} {
		for _, size := range []int{10, 1000, 1000000} {
			h := benchHandler(b, size, tc.bytes)
			r := httptest.NewRequest("GET", "/group-user/g", nil)
			b.Run("cache="+tc.name+"/members="+strconv.Itoa(size), func(b *testing.B) {
				w := &discardWriter{header: http.Header{}}
				for b.Loop() {
					w.n = 0
					h.ServeHTTP(w, r)
				}
				b.SetBytes(int64(w.n))
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(size), "ns/member")
			})
		}
	}
}

// addThreeRequest returns a POST of 3 random users to one of 1000 groups,
// and its body, which the caller rewinds before each use.
func addThreeRequest(rng *rand.Rand) (*http.Request, *rewindBody) {
	body := "users=[" + strconv.FormatInt(rng.Int64N(1e9)+1, 10) + "," + strconv.FormatInt(rng.Int64N(1e9)+1, 10) + "," +
		strconv.FormatInt(rng.Int64N(1e9)+1, 10) + "]"
	r := httptest.NewRequest("POST", "/group-user/g"+strconv.Itoa(rng.IntN(1000)), nil)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rb := &rewindBody{body: body}
	r.Body, r.ContentLength = rb, int64(len(body))
	return r, rb
}

// rewindBody is a request body that can be read again, so that a benchmark
// measures the handler and not the building of requests.
type rewindBody struct {
	strings.Reader
	body string
}

func (rb *rewindBody) rewind()      { rb.Reset(rb.body) }
func (rb *rewindBody) Close() error { return nil }

func BenchmarkAdd3RoundTrip(b *testing.B) {
	postThreeUsers(b, benchHandler(b, 1000, 0))
}

// postThreeUsers runs POSTs of 3 random users to one of 1000 groups on h,
// from 1024 requests built before the clock starts.
func postThreeUsers(b *testing.B, h http.Handler) { postThreeUsersAs(b, h, "") }

// postThreeUsersAs is postThreeUsers with auth as each request's
// Authorization header ("" for none).
func postThreeUsersAs(b *testing.B, h http.Handler, auth string) {
	rng := rand.New(rand.NewPCG(3, 4))
	var reqs [1024]struct {
		r    *http.Request
		body *rewindBody
	}
	for i := range reqs {
		reqs[i].r, reqs[i].body = addThreeRequest(rng)
		if auth != "" {
			reqs[i].r.Header.Set("Authorization", auth)
		}
	}
	w := &discardWriter{header: http.Header{}}
	i := 0
	for b.Loop() {
		req := &reqs[i%len(reqs)]
		i++
		req.body.rewind()
		clear(w.header)
		h.ServeHTTP(w, req.r)
	}
}

// BenchmarkHandler measures the handler as the service runs it (metrics
// on, the access log written through package accesslog, the list cache)
// over a store whose adds keep nothing, as bench/nullstore's: what the two
// hot paths cost the service besides its store, before the network.
func BenchmarkHandler(b *testing.B) {
	opts := httpapi.Options{ListCacheBytes: httpapi.DefaultListCacheBytes, AccessLog: true,
		AccessLines: accesslog.New(io.Discard, false)}
	benchHotPaths(b, "service", httpapi.NewHandler(membership.NewService(&nullStore{Store: storeOfTen(b)}, membership.ServiceOptions{}), opts))
}

// nullStore is a memory.Store whose adds keep nothing and say that every
// user was added, at a new revision each time.
type nullStore struct {
	*memory.Store
	revision atomic.Uint64
}

func (s *nullStore) Write(ctx context.Context, w membership.Write) (membership.Result, error) {
	if w.Op == membership.OpAdd && w.If.IsZero() {
		return membership.Result{Count: len(w.Users), Revision: membership.Revision(s.revision.Add(1))}, nil
	}
	return s.Store.Write(ctx, w)
}

// BenchmarkHotPathMetrics measures what the request metrics cost the two
// hot paths, a cached GET of 10 members and a POST of 3 users, with the
// metrics on and off in the same run.
func BenchmarkHotPathMetrics(b *testing.B) {
	for _, off := range []bool{false, true} {
		h := httpapi.NewHandler(membership.NewService(storeOfTen(b), membership.ServiceOptions{}), httpapi.Options{ListCacheBytes: httpapi.DefaultListCacheBytes, NoMetrics: off})
		name := "metrics=on"
		if off {
			name = "metrics=off"
		}
		benchHotPaths(b, name, h)
	}
}

// BenchmarkHotPathAccessLog measures what the access log costs the two hot
// paths, written through slog and through package accesslog (the
// service's), side by side, with the lines going nowhere: the cost of
// encoding them.
func BenchmarkHotPathAccessLog(b *testing.B) {
	for _, via := range []string{"none", "slog", "accesslog"} {
		opts := httpapi.Options{ListCacheBytes: httpapi.DefaultListCacheBytes, AccessLog: via != "none"}
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		if via == "accesslog" {
			opts.AccessLines = accesslog.New(io.Discard, false)
		}
		benchHotPaths(b, "log="+via, httpapi.NewHandler(membership.NewService(storeOfTen(b), membership.ServiceOptions{}), opts))
	}
}

// storeOfTen returns a store whose group "g" has 10 members.
func storeOfTen(b *testing.B) *memory.Store {
	st := memory.New()
	users := make([]membership.User, 10)
	for i := range users {
		users[i] = membership.User{UID: membership.UID(i + 1)}
	}
	if _, err := storetest.Add(context.Background(), st, "g", users); err != nil {
		b.Fatal(err)
	}
	return st
}

// benchHotPaths runs the two hot paths on h: a GET of "g", cached, and a
// POST of 3 random users to one of 1000 groups.
func benchHotPaths(b *testing.B, name string, h http.Handler) { benchHotPathsAs(b, name, h, "") }

// benchHotPathsAs is benchHotPaths with auth as each request's
// Authorization header ("" for none).
func benchHotPathsAs(b *testing.B, name string, h http.Handler, auth string) {
	b.Run(name+"/GET10", func(b *testing.B) {
		r := httptest.NewRequest("GET", "/group-user/g", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := &discardWriter{header: http.Header{}}
		for b.Loop() {
			clear(w.header)
			h.ServeHTTP(w, r)
		}
	})
	b.Run(name+"/POST3", func(b *testing.B) { postThreeUsersAs(b, h, auth) })
}
