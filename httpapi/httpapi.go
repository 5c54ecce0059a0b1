// Package httpapi serves the membership service over HTTP: the routes, the
// decoding of requests, and the one place where errors become statuses and
// JSON bodies.
package httpapi

import (
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"example.com/groupmembership/httpapi/lists"
	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/internal/access"
	"example.com/groupmembership/internal/accesslog"
	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/directory"
	"example.com/groupmembership/membership/nestreads"
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
	// DefaultMaxWaiters is the default bound of the /changes long polls
	// waiting at once.
	DefaultMaxWaiters = 1000
)

// Options configure NewLoadingHandler.
type Options struct {
	// Logger gets the access log and internal errors and panics. Nil
	// discards them.
	Logger *slog.Logger
	// AccessLines, when set, writes the access log's lines instead of
	// Logger: the same lines, with no allocation (see package accesslog),
	// whatever Logger's level. Logger still gets everything else.
	AccessLines *accesslog.Logger
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
	// MaxWaiters bounds the /changes long polls waiting at once; past it,
	// a poll is answered at once, as if it asked for no wait, with
	// Retry-After: 1. DefaultMaxWaiters when <= 0.
	MaxWaiters int
	// ListCacheBytes bounds the cache of encoded member lists; 0 turns it
	// off. See DefaultListCacheBytes.
	ListCacheBytes int64
	// MinRevisionWait is the longest a read waits for the revision it asks
	// for in X-Min-Revision; DefaultMinRevisionWait when <= 0.
	MinRevisionWait time.Duration
	// Access, when set, returns the principals in force, which every
	// write (POST, PUT, DELETE) needs one of, within its scope, and
	// /backup an admin; a request reads it once. Nil: no credential, and
	// everything is open.
	Access func() *access.Rules
	// AuthReads makes every read need a principal as well (every GET, but
	// /healthz and /readyz, and POST /check), within its scope.
	AuthReads bool
	// Ready reports whether the service takes traffic, for /readyz: false
	// once it is shutting down. Nil: always.
	Ready func() bool
	// Stopping, when closed, ends the waits of /changes long-polls, so that
	// they do not hold up a shutdown. Nil: never.
	Stopping <-chan struct{}
	// NoMetrics turns the request metrics off, and /metrics answers 404;
	// for measuring what they cost.
	NoMetrics bool
	// Collectors write more families to /metrics, after the store's.
	Collectors []func(*metrics.Writer)
	// Budgets report more memory budgets for /metrics, after the handler's
	// own and the store's: the log's.
	Budgets []func() []metrics.Budget
}

// StoreExtras are what the loaded store gives beyond membership.Store: what
// it tells /readyz and /metrics, and its backups. A nil field reports
// nothing (Writable: always writable; Backup: /backup answers 503).
type StoreExtras struct {
	// Writable returns why the store cannot take changes now, or nil, for
	// /readyz and the membership_store_writable gauge.
	Writable func() error
	// Metrics writes the store's own families to /metrics, after the
	// handler's and before Options.Collectors.
	Metrics func(*metrics.Writer)
	// Budgets reports the store's memory budgets for /metrics, after the
	// handler's own.
	Budgets func() []metrics.Budget
	// Backup copies the whole state at one revision, for /backup.
	Backup func() Backup
	// Directory reads the store's accounts and groups' attributes, for
	// /scim/v2, whose routes of users and groups fail without it (500):
	// every store of this service has one.
	Directory directory.Reader
}

// DefaultListCacheBytes is the default bound of the cache of encoded lists.
const DefaultListCacheBytes = 64 << 20

// Handler is the whole HTTP API. It starts loading: until Load gives it the
// service, it routes every request as it will then (a JSON 404 for an
// unknown path, 405 with Allow for a method, 401 without a credential), answers
// /healthz, /openapi.json and /metrics, and answers the routes that need the
// data, and /readyz, with 503 starting and Retry-After. Every reply, loading
// or not, gets its X-Request-ID, its access-log line and its count.
type Handler struct {
	serve http.Handler
	admin http.Handler
	base  shared // what loading and loaded share: no service yet
	mux   atomic.Pointer[http.ServeMux]
}

// NewLoadingHandler returns the API in its loading state.
func NewLoadingHandler(opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	positiveOr(&opts.MaxBodyBytes, DefaultMaxBodyBytes)
	positiveOr(&opts.BodyMemoryBytes, DefaultBodyMemoryBytes)
	positiveOr(&opts.ReplyMemoryBytes, DefaultReplyMemoryBytes)
	positiveOr(&opts.ChangesReplyBytes, DefaultChangesReplyBytes)
	positiveOr(&opts.MaxWaiters, DefaultMaxWaiters)
	positiveOr(&opts.MinRevisionWait, DefaultMinRevisionWait)
	if opts.Ready == nil {
		opts.Ready = func() bool { return true }
	}
	d := shared{
		opts:    opts,
		bodies:  budget.New(opts.BodyMemoryBytes),
		replies: budget.New(opts.ReplyMemoryBytes),
		backups: &backups{},
		waiters: &waiters{limit: int64(opts.MaxWaiters)},
	}
	d.encodedLists = lists.NewEncodedLists(lists.NewCache(opts.ListCacheBytes), d.replies)
	if !opts.NoMetrics {
		d.metrics = middleware.NewRequestMetrics()
	}
	h := &Handler{base: d}
	h.mux.Store(h.newMux(d))
	observe := func(next http.HandlerFunc) http.Handler {
		return middleware.Observe(middleware.RequestLog{Logger: opts.Logger, Lines: opts.AccessLines}, opts.AccessLog, d.metrics, middleware.CanonicalPaths(next))
	}
	h.serve = observe(func(w http.ResponseWriter, r *http.Request) {
		h.mux.Load().ServeHTTP(w, r)
	})
	h.admin = observe(func(w http.ResponseWriter, r *http.Request) {
		if !adminPaths[r.URL.Path] {
			middleware.WriteError(w, r, membership.Errorf(middleware.CodeNotFound, "the admin address serves /healthz, /readyz and /metrics only: the API is on the other address"))
			return
		}
		h.mux.Load().ServeHTTP(w, r)
	})
	return h
}

// positiveOr sets *v to def unless it is positive.
func positiveOr[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// adminPaths are the paths the admin address serves.
var adminPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// Admin returns the API's probes and metrics alone (/healthz, /readyz,
// /metrics), for an address of their own; every other path is a 404.
func (h *Handler) Admin() http.Handler { return h.admin }

// Load ends the loading state: from now on the data routes serve svc, and
// /readyz, /metrics and /backup use extras. Call it once.
func (h *Handler) Load(svc *membership.Service, extras StoreExtras) {
	d := h.base
	d.svc = svc
	d.nest = nestreads.NewService(svc)
	d.store = extras
	if extras.Directory != nil {
		d.dir = directory.NewService(extras.Directory)
	}
	if d.store.Writable == nil {
		d.store.Writable = func() error { return nil }
	}
	h.mux.Store(h.newMux(d))
}

// newMux returns the mux of the routes over d: loading when d has no
// service.
func (h *Handler) newMux(d shared) *http.ServeMux {
	mux := http.NewServeMux()
	addRoutes(mux, routes(d), d.loading(), d.opts.Access, d.opts.AuthReads, d.metrics)
	return mux
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.serve.ServeHTTP(w, r)
}

// shared is what every handler uses: the service and its store's extras
// once loaded, the options, the memory budgets, and the state of backups,
// long polls, encoded lists and request metrics.
type shared struct {
	svc          *membership.Service // nil while loading
	nest         *nestreads.Service  // nil while loading: svc's reads of groups in groups
	dir          *directory.Service  // nil while loading, and without StoreExtras.Directory
	store        StoreExtras         // the loaded store's
	opts         Options
	bodies       *budget.Bytes // request bodies being read
	replies      *budget.Bytes // reply bodies being built and sent
	backups      *backups      // one at a time, spaced
	waiters      *waiters      // /changes long polls waiting
	encodedLists *lists.EncodedLists
	metrics      *middleware.RequestMetrics // nil with NoMetrics
}

// loading reports whether the handler is loading: it has no service yet.
func (d shared) loading() bool { return d.svc == nil }

// budgets reports the handler's memory budgets, then the store's, then
// those of opts.Budgets.
func (d shared) budgets() []metrics.Budget {
	bs := []metrics.Budget{
		{Name: "request_bodies", Used: d.bodies.Used(), Limit: d.bodies.Limit(), Refused: d.bodies.Refused()},
		{Name: "replies", Used: d.replies.Used(), Limit: d.replies.Limit(), Refused: d.replies.Refused()},
		{Name: "list_cache", Used: d.encodedLists.CacheBytes(), Limit: d.encodedLists.CacheLimit()},
	}
	if d.store.Budgets != nil {
		bs = append(bs, d.store.Budgets()...)
	}
	for _, f := range d.opts.Budgets {
		bs = append(bs, f()...)
	}
	return bs
}
