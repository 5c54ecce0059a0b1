// Package httpapi serves the membership service over HTTP: the routes, the
// decoding of requests, and the one place where errors become statuses and
// JSON bodies.
package httpapi

import (
	"log/slog"
	"net/http"

	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/membership"
)

// DefaultMaxBodyBytes is the default limit on the size of a request body.
const DefaultMaxBodyBytes = 1 << 20

// Options configure NewHandler.
type Options struct {
	// Logger gets the access log and internal errors and panics. Nil
	// discards them.
	Logger *slog.Logger
	// AccessLog logs one line per request. Without it, only requests that
	// fail on the service's side are logged.
	AccessLog bool
	// MaxBodyBytes limits request bodies; DefaultMaxBodyBytes when <= 0.
	MaxBodyBytes int64
	// ListCacheBytes bounds the cache of encoded member lists; 0 turns it
	// off. See DefaultListCacheBytes.
	ListCacheBytes int64
	// Token, when set, is the bearer token that POST and DELETE need.
	Token string
	// AuthReads makes every GET need the token as well, but /healthz and
	// /readyz.
	AuthReads bool
	// Ready reports whether the service takes traffic, for /readyz. Nil:
	// always.
	Ready func() bool
	// Stopping, when closed, ends the waits of /changes long-polls, so that
	// they do not hold up a shutdown. Nil: never.
	Stopping <-chan struct{}
	// NoMetrics turns the request metrics off, and /metrics answers 404;
	// for measuring what they cost.
	NoMetrics bool
	// Collectors write more families to /metrics: the store's figures.
	Collectors []func(*metrics.Writer)
}

// DefaultListCacheBytes is the default bound of the cache of encoded lists.
const DefaultListCacheBytes = 64 << 20

// NewHandler returns the handler of the whole HTTP API over svc.
func NewHandler(svc *membership.Service, opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Ready == nil {
		opts.Ready = func() bool { return true }
	}
	var m *requestMetrics
	if !opts.NoMetrics {
		m = newRequestMetrics()
	}
	mux := http.NewServeMux()
	addRoutes(mux, routes(svc, opts, newListCache(opts.ListCacheBytes), m), opts.Token, opts.AuthReads, m)
	return observe(opts.Logger, opts.AccessLog, m, mux)
}

// NewStartingHandler returns the handler to serve while the store loads:
// /healthz answers 200, /readyz and everything else 503 unavailable.
func NewStartingHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
			return
		}
		writeError(w, r, membership.Errorf(membership.CodeUnavailable, "the service is starting: its data is loading"))
	})
}
