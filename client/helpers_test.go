package client_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/client"
)

// fakeTime is the clock of a client's retries: sleeping moves it, at once.
type fakeTime struct {
	mu      sync.Mutex
	now     time.Time
	sleeps  []time.Duration
	onSleep func(ctx context.Context, n int) // called with the sleep's number, from 1, unlocked
}

func newFakeTime() *fakeTime { return &fakeTime{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (f *fakeTime) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	f.sleeps = append(f.sleeps, d)
	f.now = f.now.Add(d)
	n, on := len(f.sleeps), f.onSleep
	f.mu.Unlock()
	if on != nil {
		on(ctx, n)
	}
	return ctx.Err()
}

func (f *fakeTime) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeTime) Sleeps() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.sleeps...)
}

// option returns the client option of f, the jitter always its largest.
func (f *fakeTime) option() client.Option {
	return client.WithFakeClock(f.sleep, f.Now, func(n int64) int64 { return n - 1 })
}

// newClient returns a client of url on the fake clock ft.
func newClient(t *testing.T, url string, ft *fakeTime, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, append(opts, ft.option())...)
	require.NoError(t, err)
	return c
}

// fakeService serves h on httptest, and counts its requests.
type fakeService struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request // clones, bodies not kept
}

func newFakeService(t *testing.T, h func(w http.ResponseWriter, r *http.Request, n int)) *fakeService {
	f := &fakeService{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, r.Clone(context.Background()))
		n := len(f.requests)
		f.mu.Unlock()
		h(w, r, n)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeService) Requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.requests...)
}

// hangUp closes the connection of r without a reply.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// writeJSON answers status and body as the service does.
func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// freeAddr returns a listener on a free loopback port.
func freeListener(t *testing.T) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return ln
}

// collect returns the items of seq, and the error that ended it.
func collect[T any](seq func(func(T, error) bool)) ([]T, error) {
	var items []T
	for item, err := range seq {
		if err != nil {
			return items, err
		}
		items = append(items, item)
	}
	return items, nil
}

// uidsOf returns the uids of members.
func uidsOf(members []client.Member) []int64 {
	uids := make([]int64, len(members))
	for i, m := range members {
		uids[i] = m.UID
	}
	return uids
}
