package httpapi_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/membership"
)

// benchHandler returns the API over a store holding group "g" with size
// random members.
func benchHandler(b *testing.B, size int) http.Handler {
	b.Helper()
	st := store.NewMemory()
	rng := rand.New(rand.NewPCG(1, 2))
	users := make([]membership.User, size)
	for i := range users {
		users[i] = membership.User{UID: membership.UID(rng.Int64N(1e9) + 1)}
	}
	if _, err := st.AddMembers(context.Background(), "g", users); err != nil {
		b.Fatal(err)
	}
	return httpapi.NewHandler(membership.NewService(st, 0), httpapi.Options{})
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

func BenchmarkList(b *testing.B) {
	for _, size := range []int{10, 1000, 1000000} {
		h := benchHandler(b, size)
		r := httptest.NewRequest("GET", "/group-user/g", nil)
		b.Run("members="+strconv.Itoa(size), func(b *testing.B) {
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

func BenchmarkAdd3RoundTrip(b *testing.B) {
	h := benchHandler(b, 1000)
	rng := rand.New(rand.NewPCG(3, 4))
	w := &discardWriter{header: http.Header{}}
	for b.Loop() {
		body := "users=[" + strconv.FormatInt(rng.Int64N(1e9)+1, 10) + "," + strconv.FormatInt(rng.Int64N(1e9)+1, 10) + "," +
			strconv.FormatInt(rng.Int64N(1e9)+1, 10) + "]"
		r := httptest.NewRequest("POST", "/group-user/g"+strconv.Itoa(rng.IntN(1000)), strings.NewReader(body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		clear(w.header)
		h.ServeHTTP(w, r)
	}
}
