// Package httpapi serves the membership service over HTTP: the routes, the
// decoding of requests, and the one place where errors become statuses and
// JSON bodies.
package httpapi

import (
	"log/slog"
	"net/http"

	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/membership"
)

// Defaults for Options.
const (
	// DefaultMaxBodyBytes is the default limit on the size of a request
	// body.
	DefaultMaxBodyBytes = 1 << 20
	// DefaultBodyMemoryBytes is the default bound of the memory of all the
	// request bodies being read at once.
	DefaultBodyMemoryBytes = 64 << 20
	// DefaultReplyMemoryBytes is the default bound of the memory of all the
	// reply bodies being built and sent at once.
	DefaultReplyMemoryBytes = 64 << 20
	// DefaultChangesReplyBytes is the default bound of one /changes reply.
	DefaultChangesReplyBytes = 1 << 20
)

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
	// BodyMemoryBytes bounds the memory of all the request bodies being
	// read at once; past it, a new body is refused with 503.
	// DefaultBodyMemoryBytes when <= 0.
	BodyMemoryBytes int64
	// ReplyMemoryBytes bounds the memory of all the reply bodies being
	// built and sent at once (a list shared by many replies counts once);
	// past it, a new reply is refused with 503. DefaultReplyMemoryBytes
	// when <= 0.
	ReplyMemoryBytes int64
	// ChangesReplyBytes bounds one /changes reply: it holds fewer changes
	// (at least one). DefaultChangesReplyBytes when <= 0.
	ChangesReplyBytes int
	// ListCacheBytes bounds the cache of encoded member lists; 0 turns it
	// off. See DefaultListCacheBytes.
	ListCacheBytes int64
	// Token, when set, is the bearer token that POST and DELETE need.
	Token string
	// AuthReads makes every GET need the token as well, but /healthz and
	// /readyz.
	AuthReads bool
	// Ready reports whether the service takes traffic, for /readyz: false
	// once it is shutting down. Nil: always.
	Ready func() bool
	// Writable returns why the store cannot take changes now, or nil, for
	// /readyz and the membership_store_writable gauge. Nil: always
	// writable.
	Writable func() error
	// Stopping, when closed, ends the waits of /changes long-polls, so that
	// they do not hold up a shutdown. Nil: never.
	Stopping <-chan struct{}
	// NoMetrics turns the request metrics off, and /metrics answers 404;
	// for measuring what they cost.
	NoMetrics bool
	// Collectors write more families to /metrics: the store's figures.
	Collectors []func(*metrics.Writer)
	// Budgets report more memory budgets for /metrics, beside the handler's
	// own: the store's, the log's.
	Budgets []func() []metrics.Budget
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
	if opts.BodyMemoryBytes <= 0 {
		opts.BodyMemoryBytes = DefaultBodyMemoryBytes
	}
	if opts.ReplyMemoryBytes <= 0 {
		opts.ReplyMemoryBytes = DefaultReplyMemoryBytes
	}
	if opts.ChangesReplyBytes <= 0 {
		opts.ChangesReplyBytes = DefaultChangesReplyBytes
	}
	if opts.Ready == nil {
		opts.Ready = func() bool { return true }
	}
	if opts.Writable == nil {
		opts.Writable = func() error { return nil }
	}
	d := deps{
		svc:     svc,
		opts:    opts,
		bodies:  budget.New(opts.BodyMemoryBytes),
		replies: budget.New(opts.ReplyMemoryBytes),
	}
	d.lists = newLists(newListCache(opts.ListCacheBytes), d.replies)
	if !opts.NoMetrics {
		d.metrics = newRequestMetrics()
	}
	mux := http.NewServeMux()
	addRoutes(mux, routes(d), opts.Token, opts.AuthReads, d.metrics)
	return observe(opts.Logger, opts.AccessLog, d.metrics, canonicalPaths(mux))
}

// deps are what the handlers share.
type deps struct {
	svc     *membership.Service
	opts    Options
	bodies  *budget.Bytes // request bodies being read
	replies *budget.Bytes // reply bodies being built and sent
	lists   *lists
	metrics *requestMetrics // nil with NoMetrics
}

// budgets reports the handler's memory budgets, then those of opts.Budgets.
func (d deps) budgets() []metrics.Budget {
	bs := []metrics.Budget{
		{Name: "request_bodies", Used: d.bodies.Used(), Limit: d.bodies.Limit(), Refused: d.bodies.Refused()},
		{Name: "replies", Used: d.replies.Used(), Limit: d.replies.Limit(), Refused: d.replies.Refused()},
		{Name: "list_cache", Used: d.lists.cacheBytes(), Limit: d.lists.cache.maxBytes},
	}
	for _, f := range d.opts.Budgets {
		bs = append(bs, f()...)
	}
	return bs
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
