// Package server is the membership service as a program: its configuration
// and flags, the HTTP server and its lifecycle (listen, load, serve, drain),
// the store it opens, the log, and the -probe and -restore modes. A command
// is one call of Run; a second command (another store, a tool) reuses it.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/internal/access"
	"example.com/groupmembership/internal/accesslog"
	"example.com/groupmembership/internal/buildinfo"
	"example.com/groupmembership/internal/connlimit"
	"example.com/groupmembership/internal/expiry"
	"example.com/groupmembership/internal/fileutil"
	"example.com/groupmembership/internal/logsink"
	"example.com/groupmembership/internal/memrelease"
	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/durable"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/tlscert"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/directory"
)

// Server timeouts. A slow or stalled client holds a connection at most this
// long; shutdown waits at most -shutdown-timeout (defaultShutdownTimeout) for
// in-flight requests: under the 10 s that docker stop waits before SIGKILL.
const (
	readHeaderTimeout      = 5 * time.Second
	readTimeout            = 30 * time.Second
	writeTimeout           = 30 * time.Second
	idleTimeout            = 120 * time.Second
	defaultShutdownTimeout = 7 * time.Second
	// logCloseTimeout bounds the wait for stdout to take the last lines at
	// exit: a stalled stdout must not hold the process up.
	logCloseTimeout = 1 * time.Second
)

// Config is what the flags set.
type Config struct {
	addr              string
	adminAddr         string
	maxConns          int
	headerMemory      int64
	maxWaiters        int
	maxBodyBytes      int64
	bodyMemory        int64
	replyMemory       int64
	changesReplyBytes int
	changesKeepBytes  int64
	idemBytes         int64
	idemRetention     time.Duration
	commitTimeout     time.Duration
	commitQueueBytes  int64
	logBuffer         int
	connSendBuffer    int
	maxHeaderBytes    int
	maxUsers          int
	maxChecks         int
	maxBatch          int
	maxDepth          int
	maxAncestors      int
	listCache         int64
	logFormat         string
	accessLog         bool
	dataDir           string
	snapshotSize      int64
	repair            bool
	tokenFile         string
	aclFile           string
	hashToken         bool
	tlsCert           string
	tlsKey            string
	tlsClientCA       string
	authReads         bool
	shutdownDelay     time.Duration
	shutdownTimeout   time.Duration
	changesKeep       int
	metrics           bool
	pprof             bool
	probe             string
	restore           string
	version           bool
}

// Run starts the service and serves until ctx is cancelled, then drains the
// requests in flight and returns. It listens before the store has loaded, and
// answers /readyz with 503 until then and from the moment ctx is cancelled.
// Logs go to stdout through a buffer that never blocks (a stalled stdout
// drops lines, counted, instead of freezing requests); usage and flag errors
// go to stderr. lookupenv reads the environment (os.LookupEnv):
// MEMBERSHIP_TOKEN, MEMBERSHIP_ADMIN_ADDR, MEMBERSHIP_TLS_CERT,
// MEMBERSHIP_TLS_KEY, MEMBERSHIP_TLS_CLIENT_CA, and what a backend reads.
func Run(ctx context.Context, args []string, lookupenv func(string) (string, bool), stdout, stderr io.Writer) error {
	return run(ctx, nil, args, lookupenv, stdout, stderr)
}

// run is Run, or with a backend RunBackend.
func run(ctx context.Context, backend *Backend, args []string, lookupenv func(string) (string, bool), stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr, backend)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if cfg.version {
		_, err := io.WriteString(stdout, buildinfo.Read().Text(programName(backend)))
		return err
	}
	if cfg.hashToken {
		return hashToken(os.Stdin, stdout)
	}
	getenv := func(name string) string { v, _ := lookupenv(name); return v }
	if cfg.adminAddr == "" {
		cfg.adminAddr = getenv("MEMBERSHIP_ADMIN_ADDR")
		if err := checkAdminAddr(cfg); err != nil {
			return fmt.Errorf("MEMBERSHIP_ADMIN_ADDR: %w", err)
		}
	}
	if err := tlsFromEnv(&cfg, lookupenv); err != nil {
		return err
	}
	switch {
	case cfg.probe != "" && strings.HasPrefix(cfg.probe, "/"):
		return probeHere(ctx, cfg, stdout)
	case cfg.probe != "":
		return probe(ctx, cfg.probe, nil, stdout)
	case cfg.restore != "":
		return restore(cfg, stdout)
	}
	return serve(ctx, cfg, backend, lookupenv, stdout)
}

// serve serves as cfg says until ctx is cancelled: run's every mode but
// -version, -probe and -restore.
func serve(ctx context.Context, cfg Config, backend *Backend, lookupenv func(string) (string, bool), stdout io.Writer) error {
	getenv := func(name string) string { v, _ := lookupenv(name); return v }
	if cfg.pprof && cfg.adminAddr == "" {
		return errors.New("-pprof needs -admin-addr (or MEMBERSHIP_ADMIN_ADDR): the profiles are served on the admin listener only, out of the clients' reach")
	}
	if err := checkTLSFiles(cfg); err != nil {
		return err
	}
	live, err := openAccess(cfg, lookupenv)
	if err != nil {
		return err
	}
	if backend != nil && backend.Check != nil {
		if err := backend.Check(getenv); err != nil {
			return err
		}
	}
	var logger *slog.Logger
	logOut := logsink.New(stdout, logsink.Options{MaxBytes: cfg.logBuffer, Dropped: func(n uint64) {
		logger.Warn("log lines were dropped: the log's output did not take them in time", "dropped", n)
	}})
	defer logOut.Close(logCloseTimeout)
	logger = newLogger(cfg.logFormat, logOut)
	build := buildinfo.Read()
	logger.Info("starting", "version", build.Version, "revision", build.Revision, "goversion", build.GoVersion)
	var certs *tlscert.Loader
	if cfg.tlsCert != "" {
		if certs, err = tlscert.New(tlsFiles(cfg), logger); err != nil {
			return err
		}
	}
	plan, err := planConns(cfg, backend)
	if err != nil {
		return err
	}
	plan.log(logger)
	if live == nil {
		logger.Warn("no token: anyone who can reach the service can change memberships (see -token-file and -acl-file)")
	} else {
		logger.Info("principals in force", "principals", live.Rules().Len(), "auth_reads", cfg.authReads)
		ticker := time.NewTicker(accessPollEvery)
		defer ticker.Stop()
		defer watchAccess(ctx, live, ticker.C, logger)()
	}
	svc := newService(cfg, plan, live, certs, logger, logOut)
	var lock *fileutil.DirLock
	svc.bound = func() (err error) {
		lock, err = lockDataDir(cfg, backend)
		return err
	}
	svc.open = func(ctx context.Context) (Store, error) {
		owned := lock
		lock = nil // durable.Open owns it now, and releases it
		return openStore(cfg, owned, logger)
	}
	defer func() {
		if lock != nil {
			_ = lock.Release()
		}
	}()
	if backend != nil {
		svc.open = func(ctx context.Context) (Store, error) {
			return backend.Open(ctx, StoreOptions{
				ChangesKeep: cfg.changesKeep, ChangesKeepBytes: cfg.changesKeepBytes,
				IdempotencyBytes: cfg.idemBytes, IdempotencyRetention: cfg.idemRetention,
				CommitTimeout: cfg.commitTimeout, Logger: logger, Getenv: getenv,
			})
		}
	}
	return svc.run(ctx)
}

// programName is the name of the command that serves backend (nil: the
// built-in stores).
func programName(backend *Backend) string {
	if backend != nil {
		return backend.Name
	}
	return "membership"
}

// restore is the -restore mode.
func restore(cfg Config, stdout io.Writer) error {
	rev, err := durable.Restore(cfg.restore, cfg.dataDir)
	if err != nil {
		return fmt.Errorf("restoring %s: %w", cfg.restore, err)
	}
	fmt.Fprintf(stdout, "restored %s into %s, at revision %d: start the service with -data-dir %s\n", cfg.restore, cfg.dataDir, rev, cfg.dataDir)
	return nil
}

// service is one run of the service: its HTTP server and API, from listen
// to drain.
type service struct {
	cfg    Config
	plan   connPlan
	logger *slog.Logger
	// now is the clock expiries are due on and validated against.
	now   func() time.Time
	api   *httpapi.Handler
	srv   *http.Server
	admin *http.Server // nil without -admin-addr
	// tls is the certificate both listeners serve; nil: plain HTTP.
	tls       *tlscert.Loader
	serverLog *serverLog // both servers' ErrorLog
	// listeners are the API's, then the admin's, named by listenerNames;
	// set before either serves.
	listeners     []*connlimit.Listener
	listenerNames []string
	ready         atomic.Bool   // for /readyz: loaded, and not stopping
	stopping      chan struct{} // closed by stop when the drain starts: it ends long-polls
	stop          func()        // closes stopping, once
	served        chan error    // what srv.Serve returned
	// bound runs once the addresses are taken and before anything is
	// served or logged as listening: it locks the data directory, so that
	// neither a second process on it nor a taken port leaves a trace.
	bound func() error
	open  func(ctx context.Context) (Store, error)
}

func newService(cfg Config, plan connPlan, live *access.Live, certs *tlscert.Loader, logger *slog.Logger, logOut *logsink.Writer) *service {
	s := &service{cfg: cfg, plan: plan, logger: logger, now: time.Now, stopping: make(chan struct{}), served: make(chan error, 2),
		tls: certs, serverLog: &serverLog{logger: logger}}
	collectors := []func(*metrics.Writer){buildInfoMetric(buildinfo.Read()), func(w *metrics.Writer) {
		w.Gauge("membership_conn_send_buffer_bytes", "The kernel send buffer of each connection, in bytes (-conn-send-buffer).", float64(cfg.connSendBuffer))
		w.Gauge("membership_max_header_bytes", "The largest request line and headers accepted, in bytes (-max-header).", float64(cfg.maxHeaderBytes))
		connMetrics(w, s.listeners, s.listenerNames)
		s.tlsMetrics(w)
	}}
	var principals func() *access.Rules
	if live != nil {
		principals = live.Rules
		collectors = append(collectors, live.WriteMetrics)
	}
	s.api = httpapi.NewLoadingHandler(httpapi.Options{
		Logger:            logger,
		AccessLines:       accesslog.New(logOut, cfg.logFormat == "json"),
		AccessLog:         cfg.accessLog,
		MaxBodyBytes:      cfg.maxBodyBytes,
		BodyMemoryBytes:   cfg.bodyMemory,
		ReplyMemoryBytes:  cfg.replyMemory,
		ChangesReplyBytes: cfg.changesReplyBytes,
		MaxWaiters:        cfg.maxWaiters,
		ListCacheBytes:    cfg.listCache,
		Access:            principals,
		AuthReads:         cfg.authReads,
		Ready:             s.ready.Load,
		Stopping:          s.stopping,
		NoMetrics:         !cfg.metrics,
		Collectors:        collectors,
		Budgets: []func() []metrics.Budget{func() []metrics.Budget {
			return append([]metrics.Budget{{Name: "log_buffer", Used: int64(logOut.Buffered()), Limit: int64(logOut.MaxBytes()), Refused: logOut.Dropped()}},
				headerBudgets(s.listeners, s.listenerNames)...)
		}},
	})
	s.stop = sync.OnceFunc(func() { close(s.stopping) })
	s.srv = s.newServer(s.api)
	s.srv.RegisterOnShutdown(s.stop)
	if cfg.adminAddr != "" {
		s.admin = s.newServer(adminHandler(s.api.Admin(), cfg.pprof))
	}
	return s
}

// adminHandler returns admin, the admin listener's paths, with the
// runtime's profiles (net/http/pprof) beside them under /debug/pprof/ when
// withPprof. The profiles are served by a mux of their own: importing
// net/http/pprof registers them on http.DefaultServeMux too, which nothing
// serves. They are neither logged nor counted in /metrics.
func adminHandler(admin http.Handler, withPprof bool) http.Handler {
	if !withPprof {
		return admin
	}
	profiles := http.NewServeMux()
	profiles.HandleFunc("/debug/pprof/", pprof.Index)
	profiles.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	profiles.HandleFunc("/debug/pprof/profile", pprof.Profile)
	profiles.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	profiles.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
			profiles.ServeHTTP(w, r)
			return
		}
		admin.ServeHTTP(w, r)
	})
}

// buildInfoMetric returns the collector of membership_build_info: build's
// identity as the labels of a constant 1, as Prometheus's convention has it.
func buildInfoMetric(build buildinfo.Info) func(w *metrics.Writer) {
	return func(w *metrics.Writer) {
		w.Family("membership_build_info", "gauge", "The build that is running: its version, the commit it was built from and its Go version (-version), as labels of a constant 1.")
		w.Sample("membership_build_info", []metrics.Label{{Name: "version", Value: build.Version}, {Name: "revision", Value: build.Revision},
			{Name: "goversion", Value: build.GoVersion}}, 1)
	}
}

// newServer returns an HTTP server of h with the service's limits and
// timeouts.
func (s *service) newServer(h http.Handler) *http.Server {
	srv := &http.Server{
		Handler:        h,
		MaxHeaderBytes: s.cfg.maxHeaderBytes,
		ErrorLog:       s.serverLog.errorLog(),
	}
	SetTimeouts(srv)
	return srv
}

// SetTimeouts gives srv the service's timeouts: a client has
// readHeaderTimeout to send a request's line and headers, readTimeout for
// the whole request, writeTimeout to take the reply, and stays connected
// idle for idleTimeout. net/http sets a deadline on the connection for
// each, on every request; make bench measures what they cost a bare
// handler.
func SetTimeouts(srv *http.Server) {
	srv.ReadHeaderTimeout = readHeaderTimeout
	srv.ReadTimeout = readTimeout
	srv.WriteTimeout = writeTimeout
	srv.IdleTimeout = idleTimeout
}

// run listens first: while the data loads, the API routes as usual,
// /healthz answers, and /readyz and the data routes say 503 starting, so
// that an orchestrator can tell starting from stuck. Then it loads the
// store, serves until ctx is cancelled, and drains.
func (s *service) run(ctx context.Context) (err error) {
	api, admin, err := s.bind()
	if err != nil {
		return err
	}
	if err := s.bound(); err != nil {
		_ = api.Close()
		if admin != nil {
			_ = admin.Close()
		}
		return err
	}
	s.serve(api, admin)
	defer s.runTLSReloader(ctx)()
	st, expirer, err := s.load(ctx)
	if err != nil {
		s.close()
		return err
	}
	defer func() {
		// A store that cannot close (a disk that does not finish its last
		// write) makes the exit a failure, that an operator sees.
		if closeErr := st.Close(); closeErr != nil {
			s.logger.Error("closing the data directory", "err", closeErr)
			if err == nil {
				err = fmt.Errorf("closing the data directory: %w", closeErr)
			}
		}
	}()
	// The expirer stops before the store closes (defers run last first).
	defer runExpirer(ctx, expirer)()
	defer s.runReleaser(ctx)()
	select {
	case err := <-s.served:
		s.close()
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	return s.drain(ctx)
}

// runExpirer runs expirer until the function it returns is called, which
// returns once it has stopped; ctx's values are kept, not its end.
func runExpirer(ctx context.Context, expirer *expiry.Expirer) (stop func()) {
	stop, _ = runUntilStopped(context.WithoutCancel(ctx), expirer.Run)
	return stop
}

// runUntilStopped runs fn on a goroutine of its own with a context that
// ends with ctx or when stop is called; stop returns once fn has returned,
// and done is closed then.
func runUntilStopped(ctx context.Context, fn func(context.Context)) (stop func(), done <-chan struct{}) {
	running, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		fn(running)
	}()
	return func() {
		cancel()
		<-finished
	}, finished
}

// releaseEvery is how often the process's allocations are looked at, for
// memrelease.
const releaseEvery = 5 * time.Second

// runReleaser gives the memory a burst of work left free back to the
// system once the process is idle (memrelease), until the function it
// returns is called, which returns once it has stopped.
func (s *service) runReleaser(ctx context.Context) (stop func()) {
	ticker := time.NewTicker(releaseEvery)
	stopReleaser, _ := startReleaser(ctx, s.logger, releaser{ticks: ticker.C, sample: memrelease.ReadSample, release: memrelease.Release})
	return func() {
		stopReleaser()
		ticker.Stop()
	}
}

// releaser is what startReleaser needs of the runtime: the ticks at which
// it looks, a sample of the heap, and a release that returns the bytes it
// gave back.
type releaser struct {
	ticks   <-chan time.Time
	sample  func() memrelease.Sample
	release func() int64
}

// startReleaser runs memrelease with r and the default policy, logging
// each release, until ctx ends (the signal to stop: a process about to
// exit, idle during -shutdown-delay, is not worth a collection) or the
// function it returns is called, which returns once it has stopped;
// stopped is closed then.
func startReleaser(ctx context.Context, logger *slog.Logger, r releaser) (stop func(), stopped <-chan struct{}) {
	return runUntilStopped(ctx, func(releasing context.Context) {
		memrelease.Run(releasing, r.ticks, memrelease.DefaultPolicy, r.sample, func() {
			start := time.Now()
			returned := r.release()
			logger.Info("idle after a burst of work: gave the free memory back to the system",
				"returned_mib", returned/(1<<20), "took", time.Since(start).Round(time.Millisecond))
		})
	})
}

// bind opens the API's listener, and the admin's with -admin-addr (nil
// without).
func (s *service) bind() (ln, adminLn net.Listener, err error) {
	if ln, err = net.Listen("tcp", s.cfg.addr); err != nil {
		return nil, nil, err
	}
	if s.admin != nil {
		if adminLn, err = net.Listen("tcp", s.cfg.adminAddr); err != nil {
			_ = ln.Close()
			return nil, nil, fmt.Errorf("-admin-addr: %w", err)
		}
	}
	return ln, adminLn, nil
}

// serve serves the listeners bind opened, each with its connection budget,
// and TLS with -tls-cert.
func (s *service) serve(ln, adminLn net.Listener) {
	var tlsConfig *tls.Config
	if s.tls != nil {
		tlsConfig = s.tls.ServerConfig()
	}
	api := s.limit(s.srv, ln, connlimit.Options{Name: "api", Flag: "-max-conns", MaxConns: s.plan.maxConns, HeaderBytes: s.cfg.headerMemory,
		TLS: tlsConfig})
	s.logger.Info("listening", "addr", ln.Addr().String(), "tls", s.tls != nil, "max_body", s.cfg.maxBodyBytes, "max_users", s.cfg.maxUsers,
		"list_cache", s.cfg.listCache)
	if s.admin != nil {
		admin := s.limit(s.admin, adminLn, connlimit.Options{Name: "admin", Flag: "the admin address's budget", MaxConns: adminMaxConns,
			HeaderBytes: int64(2 * adminMaxConns * s.cfg.maxHeaderBytes), CloseBusy: true, TLS: tlsConfig})
		s.logger.Info("listening for probes and metrics", "admin_addr", adminLn.Addr().String(), "tls", s.tls != nil, "max_conns", adminMaxConns)
		go func() { s.served <- s.admin.Serve(admin) }()
	}
	go func() { s.served <- s.srv.Serve(api) }()
}

// limit returns ln with the connection budget o, told by srv of its
// connections' states.
func (s *service) limit(srv *http.Server, ln net.Listener, o connlimit.Options) *connlimit.Listener {
	o.Logger = s.logger
	limited := connlimit.NewListener(sendBufferListener{Listener: ln, bytes: s.cfg.connSendBuffer}, o)
	srv.ConnState, srv.ConnContext = limited.ConnState, limited.ConnContext
	srv.Handler = connlimit.Guard(srv.Handler)
	s.listeners = append(s.listeners, limited)
	s.listenerNames = append(s.listenerNames, o.Name)
	return limited
}

// close closes the servers at once, and waits for them to stop serving.
func (s *service) close() {
	_ = s.srv.Close()
	if s.admin != nil {
		_ = s.admin.Close()
	}
	for range s.servers() {
		<-s.served
	}
}

// servers counts the servers serving.
func (s *service) servers() int {
	if s.admin != nil {
		return 2
	}
	return 1
}

// load opens the store and hands it to the API, which then takes traffic.
func (s *service) load(ctx context.Context) (Store, *expiry.Expirer, error) {
	loaded := make(chan struct{})
	defer close(loaded)
	go func() { // a signal while the data loads is heard, and said so
		select {
		case <-ctx.Done():
			s.logger.Warn("told to stop while the data loads: stopping once it is loaded (a second signal exits at once)")
		case <-loaded:
		}
	}()
	st, err := s.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	// Memberships that expired while the service was down end now, each
	// group's in a change, before it answers a read.
	expirer := expiry.New(st, s.now, s.logger)
	if n, err := expirer.ExpireDue(context.WithoutCancel(ctx)); err != nil {
		s.logger.Warn("could not apply the expiries due at start; trying again while serving", "err", err)
	} else if n > 0 {
		s.logger.Info("ended the memberships that expired while the service was down", "memberships", n)
	}
	s.api.Load(membership.NewService(st, membership.ServiceOptions{MaxUsers: s.cfg.maxUsers, MaxChecks: s.cfg.maxChecks, MaxBatchWrites: s.cfg.maxBatch,
		MaxDepth: s.cfg.maxDepth, MaxAncestors: s.cfg.maxAncestors, Now: s.now}), httpapi.StoreExtras{
		Writable: st.Writable,
		Metrics: func(w *metrics.Writer) {
			st.WriteMetrics(w)
			expirer.WriteMetrics(w)
		},
		Budgets:   st.Budgets,
		Backup:    func() httpapi.Backup { return st.Backup() },
		Directory: st,
	})
	s.ready.Store(true)
	s.logger.Info("ready")
	return st, expirer, nil
}

// drain turns /readyz to 503, serves on for -shutdown-delay, then lets the
// requests in flight finish for up to -shutdown-timeout, and closes what is
// left, saying how much.
func (s *service) drain(ctx context.Context) error {
	s.ready.Store(false)
	if s.cfg.shutdownDelay > 0 {
		s.logger.Info("not ready: serving on for -shutdown-delay before draining", "delay", s.cfg.shutdownDelay)
		time.Sleep(s.cfg.shutdownDelay)
	}
	s.logger.Info("shutting down: draining requests in flight")
	// ctx is cancelled already; the drain gets its own deadline.
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.shutdownTimeout)
	defer cancel()
	if err := s.srv.Shutdown(shutdownCtx); err != nil {
		s.logger.Warn("-shutdown-timeout passed: closing the connections still open", "connections", s.listeners[0].Stats().Open, "shutdown_timeout", s.cfg.shutdownTimeout)
		_ = s.srv.Close()
	}
	if s.admin != nil { // probes and scrapes last no longer than a second
		adminCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if err := s.admin.Shutdown(adminCtx); err != nil {
			_ = s.admin.Close()
		}
	}
	for range s.servers() {
		if err := <-s.served; !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving: %w", err)
		}
	}
	s.logger.Info("stopped")
	return nil
}

// parseFlags parses args. -h prints the usage to stderr and returns
// flag.ErrHelp; any other error is returned alone, with a hint, for the
// caller to print once.
func parseFlags(args []string, stderr io.Writer, backend *Backend) (Config, error) {
	var cfg Config
	fs := NewFlagSet(&cfg, stderr)
	if backend != nil {
		var own []string
		if backend.AddFlags != nil {
			shared := map[string]bool{}
			fs.VisitAll(func(f *flag.Flag) { shared[f.Name] = true })
			backend.AddFlags(fs)
			fs.VisitAll(func(f *flag.Flag) {
				if !shared[f.Name] {
					own = append(own, f.Name)
				}
			})
		}
		fs.Init(backend.Name, flag.ContinueOnError)
		fs.Usage = func() {
			writeUsage(fs.Output(), fs, backend.Name, "Serves the group membership service over HTTP. "+backend.About, own, dataDirFlags)
		}
	}
	fs.SetOutput(io.Discard) // the flag package prints the error and the whole usage
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
		return Config{}, err
	}
	if err != nil {
		return Config{}, fmt.Errorf("%w (%s)", err, flagHint(fs, err))
	}
	if backend != nil {
		if err := checkBackendFlags(fs, backend); err != nil {
			return Config{}, err
		}
	}
	return cfg, checkFlags(fs, cfg)
}

// NewFlagSet returns the program's flags, which set cfg. A command may add
// its own before parsing.
func NewFlagSet(cfg *Config, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("membership", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// The descriptions are one line each for -h; docs/operating.md#flags
	// explains each flag in full. writeUsage orders them by flagSections.
	fs.StringVar(&cfg.addr, "addr", ":8080", "`address` to listen on, host:port")
	fs.StringVar(&cfg.dataDir, "data-dir", "", "keep the data durably in this `directory`; empty: in memory, lost at exit")
	fs.StringVar(&cfg.tokenFile, "token-file", "", "`file` of the token that writes and /backup need; empty: $MEMBERSHIP_TOKEN")
	fs.StringVar(&cfg.aclFile, "acl-file", "", "`file` of the principals, their rights and groups; empty: $MEMBERSHIP_ACL_FILE")
	fs.StringVar(&cfg.adminAddr, "admin-addr", "", "`address` for probes and /metrics only; empty: $MEMBERSHIP_ADMIN_ADDR or none")

	fs.StringVar(&cfg.tlsCert, "tls-cert", "", "serve HTTPS with this certificate `file` (PEM); empty: $MEMBERSHIP_TLS_CERT")
	fs.StringVar(&cfg.tlsKey, "tls-key", "", "the certificate's private key `file` (PEM); empty: $MEMBERSHIP_TLS_KEY")
	fs.StringVar(&cfg.tlsClientCA, "tls-client-ca", "", "CAs (`file`) that sign client certificates; empty: $MEMBERSHIP_TLS_CLIENT_CA")

	fs.Int64Var(&cfg.maxBodyBytes, "max-body", httpapi.DefaultMaxBodyBytes, "largest request body, in `bytes`")
	fs.IntVar(&cfg.maxUsers, "max-users", membership.DefaultMaxUsers, "most users in one request")
	fs.IntVar(&cfg.maxChecks, "max-checks", membership.DefaultMaxChecks, "most checks in one POST /check")
	fs.IntVar(&cfg.maxBatch, "max-batch", membership.DefaultMaxBatchWrites, "most changes in one POST /batch")
	fs.IntVar(&cfg.maxDepth, "max-depth", membership.DefaultMaxDepth, "deepest chain of groups in groups; a write past it is 409")
	fs.IntVar(&cfg.maxAncestors, "max-ancestors", membership.DefaultMaxAncestors, "most groups a group may be below; a write past it is 409")
	fs.IntVar(&cfg.maxHeaderBytes, "max-header", defaultMaxHeaderBytes, "largest request line and headers, in `bytes`; past it, 431")
	fs.IntVar(&cfg.maxConns, "max-conns", 0, "most client connections open at once; 0: from ulimit -n, at most 8192")
	fs.Int64Var(&cfg.headerMemory, "header-memory", defaultHeaderMemory, "memory for headers being read, in `bytes`; past it, 503")
	fs.Int64Var(&cfg.bodyMemory, "body-memory", httpapi.DefaultBodyMemoryBytes, "memory for bodies being read, in `bytes`; past it, 503")
	fs.Int64Var(&cfg.replyMemory, "reply-memory", httpapi.DefaultReplyMemoryBytes, "memory for replies being sent, in `bytes`; past it, 503")
	fs.Int64Var(&cfg.listCache, "list-cache", httpapi.DefaultListCacheBytes, "memory for cached member lists, in `bytes`; 0: none")
	fs.IntVar(&cfg.connSendBuffer, "conn-send-buffer", defaultConnSendBuffer, "the kernel's send buffer of a connection, in `bytes`")

	fs.Int64Var(&cfg.snapshotSize, "snapshot-bytes", durable.DefaultSnapshotBytes, "log size past which a snapshot is written, in `bytes`")
	fs.DurationVar(&cfg.commitTimeout, "commit-timeout", durable.DefaultCommitTimeout, "longest wait of a change to be written; past it, 503")
	fs.Int64Var(&cfg.commitQueueBytes, "commit-queue-bytes", durable.DefaultQueueBytes, "memory for changes waiting, in `bytes`; past it, 503")
	fs.BoolVar(&cfg.repair, "repair", false, "start past a damaged log or snapshot; what is cut is kept aside")

	fs.IntVar(&cfg.changesKeep, "changes-keep", membership.DefaultChangesKeep, "how many of the latest changes are kept; 0: none")
	fs.Int64Var(&cfg.changesKeepBytes, "changes-keep-bytes", memory.DefaultChangesKeepBytes, "memory for the changes kept, in `bytes`")
	fs.IntVar(&cfg.changesReplyBytes, "changes-reply-bytes", httpapi.DefaultChangesReplyBytes, "largest /changes reply, in `bytes`")
	fs.IntVar(&cfg.maxWaiters, "max-waiters", httpapi.DefaultMaxWaiters, "most long polls waiting at once")

	fs.Int64Var(&cfg.idemBytes, "idempotency-bytes", membership.DefaultIdempotencyBytes, "memory for the keys remembered, in `bytes`")
	fs.DurationVar(&cfg.idemRetention, "idempotency-retention", membership.DefaultIdempotencyRetention, "how long a key is remembered")

	fs.BoolVar(&cfg.authReads, "auth-reads", false, "make reads need the token, or a principal, too")
	fs.StringVar(&cfg.logFormat, "log-format", "text", "log `format`: text or json")
	fs.BoolVar(&cfg.accessLog, "access-log", true, "log every request; false: only the failed")
	fs.IntVar(&cfg.logBuffer, "log-buffer", logsink.DefaultMaxBytes, "memory for log lines waiting for stdout, in `bytes`")
	fs.BoolVar(&cfg.metrics, "metrics", true, "serve /metrics")
	fs.BoolVar(&cfg.pprof, "pprof", false, "serve /debug/pprof/ on the admin address (needs -admin-addr)")

	fs.DurationVar(&cfg.shutdownDelay, "shutdown-delay", 0, "serve on, not ready, this long before draining")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "then wait this long for the requests in flight")

	fs.StringVar(&cfg.probe, "probe", "", "GET `URL` (a path alone: this machine); exit 0 on a 200 within 1s")
	fs.StringVar(&cfg.restore, "restore", "", "write -data-dir from a backup `file` of GET /backup")
	fs.BoolVar(&cfg.version, "version", false, "print the version, the commit and the Go version")
	fs.BoolVar(&cfg.hashToken, "hash-token", false, "read a token on stdin, print its secret for -acl-file")
	fs.Usage = func() {
		writeUsage(fs.Output(), fs, "membership", "Serves the group membership service over HTTP.", nil, nil)
	}
	return fs
}

// flagHint says what to do about err, an error of fs.Parse: for a
// duration, that it needs a unit; otherwise, where the flags are listed.
func flagHint(fs *flag.FlagSet, err error) string {
	_, rest, _ := strings.Cut(err.Error(), " for flag -")
	name, _, _ := strings.Cut(rest, ":")
	if f := fs.Lookup(name); f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			if _, isDuration := g.Get().(time.Duration); isDuration {
				return "a duration needs a unit, such as 5s or 500ms"
			}
		}
	}
	return "membership -h lists the flags"
}

// checkFlags returns an error naming the first flag whose value cfg cannot
// run with, or a stray argument.
func checkFlags(fs *flag.FlagSet, cfg Config) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: membership takes only flags (see -h)", fs.Arg(0))
	}
	var emptyMode error
	fs.Visit(func(f *flag.Flag) { // given, but empty: never taken for "not given"
		what, mode := map[string]string{"restore": "a backup file", "probe": "a URL", "tls-cert": "a file", "tls-key": "a file", "tls-client-ca": "a file"}[f.Name]
		if mode && f.Value.String() == "" && emptyMode == nil {
			emptyMode = fmt.Errorf("-%s is empty: it needs %s (is a variable unset?)", f.Name, what)
		}
	})
	if emptyMode != nil {
		return emptyMode
	}
	for _, f := range []struct {
		name  string
		value int64
	}{
		{"max-body", cfg.maxBodyBytes}, {"reply-memory", cfg.replyMemory}, {"changes-reply-bytes", int64(cfg.changesReplyBytes)},
		{"changes-keep-bytes", cfg.changesKeepBytes}, {"commit-queue-bytes", cfg.commitQueueBytes}, {"idempotency-bytes", cfg.idemBytes},
		{"conn-send-buffer", int64(cfg.connSendBuffer)}, {"log-buffer", int64(cfg.logBuffer)}, {"max-users", int64(cfg.maxUsers)}, {"max-checks", int64(cfg.maxChecks)}, {"max-batch", int64(cfg.maxBatch)},
		{"snapshot-bytes", cfg.snapshotSize}, {"header-memory", cfg.headerMemory}, {"max-waiters", int64(cfg.maxWaiters)},
	} {
		if f.value <= 0 {
			return fmt.Errorf("-%s must be positive, got %d", f.name, f.value)
		}
	}
	for _, f := range []struct {
		name  string
		value time.Duration
	}{{"commit-timeout", cfg.commitTimeout}, {"shutdown-timeout", cfg.shutdownTimeout}, {"idempotency-retention", cfg.idemRetention}} {
		if f.value <= 0 {
			return fmt.Errorf("-%s must be positive, got %s", f.name, f.value)
		}
	}
	if err := checkAddr(cfg.addr); err != nil {
		return err
	}
	if err := checkAdminAddr(cfg); err != nil {
		return err
	}
	if cfg.restore != "" && cfg.dataDir == "" {
		return errors.New("-restore needs -data-dir: the directory to write (empty or new)")
	}
	switch {
	case cfg.bodyMemory < cfg.maxBodyBytes:
		return fmt.Errorf("-body-memory must be at least -max-body (%d), got %d", cfg.maxBodyBytes, cfg.bodyMemory)
	case cfg.maxHeaderBytes < minMaxHeaderBytes:
		return fmt.Errorf("-max-header must be at least %d, got %d", minMaxHeaderBytes, cfg.maxHeaderBytes)
	case cfg.maxDepth < 1 || cfg.maxDepth > membership.MaxMaxDepth:
		return fmt.Errorf("-max-depth must be from 1 to %d, got %d", membership.MaxMaxDepth, cfg.maxDepth)
	case cfg.maxAncestors < 1 || cfg.maxAncestors > membership.MaxMaxAncestors:
		return fmt.Errorf("-max-ancestors must be from 1 to %d, got %d", membership.MaxMaxAncestors, cfg.maxAncestors)
	case cfg.maxConns < 0:
		return fmt.Errorf("-max-conns must be 0 (from the descriptor limit) or more, got %d", cfg.maxConns)
	case cfg.maxConns > 0 && cfg.maxConns < minMaxConns:
		return fmt.Errorf("-max-conns must be at least %d, got %d", minMaxConns, cfg.maxConns)
	case cfg.headerMemory < 2*int64(cfg.maxHeaderBytes):
		return fmt.Errorf("-header-memory must be at least twice -max-header (%d: each header byte read counts twice), got %d", 2*cfg.maxHeaderBytes, cfg.headerMemory)
	case cfg.listCache < 0:
		return fmt.Errorf("-list-cache must be 0 or more, got %d", cfg.listCache)
	case cfg.changesKeep < 0:
		return fmt.Errorf("-changes-keep must be 0 or more, got %d", cfg.changesKeep)
	case cfg.shutdownDelay < 0:
		return fmt.Errorf("-shutdown-delay must not be negative, got %s", cfg.shutdownDelay)
	case cfg.logFormat != "text" && cfg.logFormat != "json":
		return fmt.Errorf("-log-format must be text or json, got %q", cfg.logFormat)
	case cfg.dataDir != "" && durable.LargestEntry(cfg.maxBodyBytes, cfg.maxUsers, cfg.maxBatch) > durable.MaxEntryBytes:
		return fmt.Errorf("with -data-dir, -max-body %d, -max-users %d and -max-batch %d allow a change of up to %d bytes, "+
			"more than one log record holds (%d): lower one of them", cfg.maxBodyBytes, cfg.maxUsers, cfg.maxBatch,
			durable.LargestEntry(cfg.maxBodyBytes, cfg.maxUsers, cfg.maxBatch), durable.MaxEntryBytes)
	}
	return nil
}

// checkAdminAddr returns an error unless the admin address is empty, or
// host:port and not the API's address.
func checkAdminAddr(cfg Config) error {
	if cfg.adminAddr == "" {
		return nil
	}
	if _, port, _ := net.SplitHostPort(cfg.adminAddr); cfg.adminAddr == cfg.addr && port != "0" {
		return fmt.Errorf("-admin-addr %q is -addr too: the admin listener needs an address of its own", cfg.adminAddr)
	}
	return checkAddrFlag("admin-addr", cfg.adminAddr)
}

// checkAddr returns an error, with a hint, unless addr, the value of -addr,
// is host:port.
func checkAddr(addr string) error { return checkAddrFlag("addr", addr) }

// checkAddrFlag returns an error, with a hint, unless addr, the value of the
// flag name, is host:port.
func checkAddrFlag(name, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if _, perr := strconv.ParseUint(port, 10, 16); perr != nil && port != "" {
			if _, named := net.LookupPort("tcp", port); named != nil {
				return fmt.Errorf("-%s %q: the port %q is not a number from 0 to 65535", name, addr, port)
			}
		}
	}
	if err != nil {
		if _, numErr := strconv.ParseUint(addr, 10, 16); numErr == nil {
			return fmt.Errorf("-%s %s is not host:port: did you mean :%s (every interface) or 127.0.0.1:%s (this machine only)?", name, addr, addr, addr)
		}
		return fmt.Errorf("-%s %q is not host:port, such as :8080 or 127.0.0.1:8080: %v", name, addr, err)
	}
	return nil
}

// defaultMaxHeaderBytes bounds a request's line and headers: net/http's own
// default, 1 MiB, lets every request hold a mebibyte. 64 KiB leaves room for
// long tokens and cookies. Below minMaxHeaderBytes, requests of the API
// itself would not fit.
const (
	defaultMaxHeaderBytes = 64 << 10
	minMaxHeaderBytes     = 4 << 10
)

// defaultConnSendBuffer is the default kernel send buffer of a connection.
// Linux grows a connection's buffer up to 4 MiB by itself: two hundred
// clients that ask for a large list and never read then pin 800 MB of
// kernel memory, and the copying into those buffers stalls every other
// request. 256 KiB still fills a 20 ms round trip at 100 Mbit/s.
const defaultConnSendBuffer = 256 << 10

// sendBufferListener sets the kernel send buffer of every connection it
// accepts.
type sendBufferListener struct {
	net.Listener
	bytes int
}

func (l sendBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(l.bytes) // best effort: a refused size leaves the kernel's default
	}
	return c, err
}

// Store is what the server needs of a store: the contract, and what it tells
// and how it stops.
type Store interface {
	store.Expiring
	// Writable returns why the store cannot take changes now, or nil.
	Writable() error
	// WriteMetrics writes the store's figures to /metrics, and Budgets
	// reports its memory budgets.
	WriteMetrics(w *metrics.Writer)
	Budgets() []metrics.Budget
	// Backup copies the whole state at one revision.
	Backup() *snap.Backup
	Close() error
	// Reader reads the accounts and the groups' attributes.
	directory.Reader
}

// lockDataDir locks -data-dir, if given, before the service says it
// listens: a second process on a directory in use leaves without a word of
// serving. It runs after the addresses are taken, so that a taken port
// leaves no LOCK in a new directory.
func lockDataDir(cfg Config, backend *Backend) (*fileutil.DirLock, error) {
	if cfg.dataDir == "" || backend != nil {
		return nil, nil
	}
	lock, err := durable.LockDataDir(cfg.dataDir)
	if errors.Is(err, fileutil.ErrLockUnsupported) {
		return nil, fmt.Errorf("-data-dir: %w; without -data-dir, the service keeps its data in memory on this platform", err)
	}
	return lock, err
}

// openStore opens the store the flags ask for, in the directory that lock
// holds.
func openStore(cfg Config, lock *fileutil.DirLock, logger *slog.Logger) (Store, error) {
	if cfg.dataDir == "" {
		logger.Info("keeping data in memory only: it is lost when the process exits (see -data-dir)")
		return memory.NewWith(memory.Options{ChangesKeep: cfg.changesKeep, ChangesKeepBytes: cfg.changesKeepBytes,
			IdempotencyBytes: cfg.idemBytes, IdempotencyRetention: cfg.idemRetention}), nil
	}
	start := time.Now()
	d, err := durable.Open(cfg.dataDir, durable.Options{
		SnapshotBytes:        cfg.snapshotSize,
		Repair:               cfg.repair,
		Logger:               logger,
		ChangesKeep:          cfg.changesKeep,
		ChangesKeepBytes:     cfg.changesKeepBytes,
		IdempotencyBytes:     cfg.idemBytes,
		IdempotencyRetention: cfg.idemRetention,
		CommitTimeout:        cfg.commitTimeout,
		QueueBytes:           cfg.commitQueueBytes,
		Lock:                 lock,
	})
	if err != nil {
		return nil, err
	}
	logger.Info("opened the data directory", "dir", cfg.dataDir, "took", time.Since(start))
	return d, nil
}

func newLogger(format string, w io.Writer) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}
