// Package membershiptest runs the real group membership service in the
// test's process, for the tests of programs that use it: no server to
// start, no port to pick, no sleeping for expiries.
//
//	func TestInvite(t *testing.T) {
//		srv := membershiptest.NewServer(t)
//		// srv.URL is the service's base URL; srv.Client a client of it.
//		if _, err := srv.Client.Add(t.Context(), "admins", client.Users(1, 2)); err != nil {
//			t.Fatal(err)
//		}
//		...
//	}
//
// It is the service itself, not a mock: the handler, routes, errors,
// limits, middleware and auth of the membership binary, built by the same
// code, over its memory store, served by net/http/httptest. Options set a
// token (WithToken) and principals with their rights and groups
// (WithPrincipal), the binary's limits (WithFlags), HTTPS (WithTLS), and
// a fake clock for memberships that end by themselves (WithClock, then
// Server.Advance).
package membershiptest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"example.com/groupmembership/client"
	"example.com/groupmembership/internal/access"
	"example.com/groupmembership/internal/server"
)

// Server is the service, serving until the test ends.
type Server struct {
	// URL is the service's base URL, http://127.0.0.1:port, or
	// https://127.0.0.1:port with WithTLS.
	URL string
	// Client is a client of the service, made with the server's token and
	// the options of WithClientOptions.
	Client *client.Client

	t          testing.TB
	clientOpts []client.Option
	httpSrv    *httptest.Server
	embedded   *server.Embedded
	clock      *clock // nil without WithClock
	close      func()
}

// Option configures NewServer.
type Option func(*config)

type config struct {
	token      string
	acl        []string // lines of an ACL file
	flags      []string
	clockStart time.Time
	hasClock   bool
	listener   net.Listener
	tls        *tls.Config // WithTLS's; nil: plain HTTP
	middleware []func(http.Handler) http.Handler
	clientOpts []client.Option
	log        io.Writer
}

// WithToken gives the service a bearer token, as the binary's -token-file
// does: writes and /backup then need it (reads too with WithFlags
// ("-auth-reads")). Server.Client sends it.
func WithToken(token string) Option {
	return func(c *config) { c.token = token }
}

// WithPrincipal gives the service a principal, as a line of the binary's
// ACL file (-acl-file) does: name, whose credential is token, with rights
// ("read", "write", "admin", or several joined by commas: write reads too,
// admin does everything) on groups (each an id, a prefix ending in *, or
// * for every group; an admin's are *). Writes then need the token of a
// principal, and reach only its groups (403 forbidden past them, which
// client.IsForbidden tells); with WithFlags("-auth-reads"), reads too.
// Server.Client sends the token of WithToken, if any; ClientWithToken
// makes a client of a principal. The configuration is checked as the
// binary checks its ACL file.
func WithPrincipal(name, token, rights string, groups ...string) Option {
	return func(c *config) {
		fields := []string{name, access.HashToken(token), rights}
		for _, g := range groups {
			prefix, isPrefix := strings.CutSuffix(g, "*")
			f := strings.ReplaceAll(url.PathEscape(prefix), "*", "%2A")
			if isPrefix {
				f += "*"
			}
			fields = append(fields, f)
		}
		c.acl = append(c.acl, strings.Join(fields, " "))
	}
}

// WithFlags sets the binary's flags of limits and budgets, with their
// checks and defaults: "-max-body", "-max-users", "-max-checks",
// "-max-batch", "-max-depth", "-changes-keep", "-changes-keep-bytes",
// "-changes-reply-bytes", "-max-waiters", "-idempotency-retention",
// "-list-cache", "-auth-reads", ... (membership -h lists them). Flags of
// what an in-process service has not got (-data-dir, -admin-addr,
// -token-file, -restore, -probe, -tls-cert: see WithTLS) fail the test;
// -addr is ignored (see WithListener).
func WithFlags(args ...string) Option {
	return func(c *config) { c.flags = append(c.flags, args...) }
}

// WithLimits sets the most common limits (see Limits); the others are
// flags of WithFlags.
func WithLimits(l Limits) Option {
	return func(c *config) { c.flags = append(c.flags, l.flags()...) }
}

// Limits are the limits of WithLimits, each the flag of the binary named
// beside it. A field of 0 keeps the binary's default.
type Limits struct {
	MaxBodyBytes int64 // -max-body: the largest request body, in bytes
	MaxUsers     int   // -max-users: the most users in one request
	MaxChecks    int   // -max-checks: the most checks in one POST /check
	MaxBatch     int   // -max-batch: the most changes in one POST /batch
	MaxDepth     int   // -max-depth: the deepest chain of groups in groups
	MaxAncestors int   // -max-ancestors: the most groups a group may be below
	ChangesKeep  int   // -changes-keep: the changes the feed keeps
}

func (l Limits) flags() []string {
	var args []string
	add := func(name string, v int64) {
		if v > 0 {
			args = append(args, "-"+name, strconv.FormatInt(v, 10))
		}
	}
	add("max-body", l.MaxBodyBytes)
	add("max-users", int64(l.MaxUsers))
	add("max-checks", int64(l.MaxChecks))
	add("max-batch", int64(l.MaxBatch))
	add("max-depth", int64(l.MaxDepth))
	add("max-ancestors", int64(l.MaxAncestors))
	add("changes-keep", int64(l.ChangesKeep))
	return args
}

// WithClock gives the service a fake clock, at start: expiries are
// checked and come due on it, and changes are stamped with it. It moves
// only with Server.Advance, which then ends the memberships due, so that
// a test of expiries never sleeps. Without it, the service runs on the
// wall clock and ends memberships within about 100 ms of their expiry, as
// the binary does.
func WithClock(start time.Time) Option {
	return func(c *config) { c.clockStart, c.hasClock = start, true }
}

// WithListener serves on ln (closed when the server is) in place of a
// new listener on a free loopback port: to start a service again on the
// address of one stopped (Server.Close), say.
func WithListener(ln net.Listener) Option {
	return func(c *config) { c.listener = ln }
}

// WithTLS serves HTTPS with cfg, as the binary's -tls-cert does: its
// Certificates (none: net/http/httptest's, for 127.0.0.1), and its
// ClientAuth and ClientCAs for a service that asks for client
// certificates, as -tls-client-ca does (tls.VerifyClientCertIfGiven).
// Server.Client trusts the certificate served, and presents none: give
// WithClientOptions(client.WithTLSConfig(...)) for a client that does.
// Server.Certificate returns the certificate, for other clients.
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) {
		if cfg == nil {
			cfg = &tls.Config{}
		}
		c.tls = cfg.Clone()
	}
}

// WithMiddleware wraps the service's handler in mw, for tests of a
// client's handling of faults: a proxy that drops a connection, a 503 from
// a load balancer, a slow reply. The last one given is the outermost.
func WithMiddleware(mw func(http.Handler) http.Handler) Option {
	return func(c *config) { c.middleware = append(c.middleware, mw) }
}

// WithClientOptions makes Server.Client with opts too (after the token).
func WithClientOptions(opts ...client.Option) Option {
	return func(c *config) { c.clientOpts = append(c.clientOpts, opts...) }
}

// WithLog sends the service's log (one line per request, and more) to w;
// by default it is discarded.
func WithLog(w io.Writer) Option {
	return func(c *config) { c.log = w }
}

// NewServer starts the service, and stops it when the test ends. A
// configuration the service refuses fails the test at once.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := start(t, opts)
	if err != nil {
		t.Fatalf("membershiptest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start starts the service, for a program or an Example that has no
// testing.TB: Close it when done.
func Start(opts ...Option) (*Server, error) { return start(nil, opts) }

func start(t testing.TB, opts []Option) (*Server, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	s := &Server{t: t}
	eo := server.EmbeddedOptions{Args: cfg.flags, Token: cfg.token, Log: cfg.log}
	if len(cfg.acl) > 0 {
		eo.ACL = []byte(strings.Join(cfg.acl, "\n") + "\n")
	}
	if cfg.hasClock {
		s.clock = &clock{now: cfg.clockStart}
		eo.Now = s.clock.Now
	}
	e, err := server.NewEmbedded(eo)
	if err != nil {
		if cfg.listener != nil {
			_ = cfg.listener.Close()
		}
		return nil, fmt.Errorf("the service refused its configuration: %w", err)
	}
	s.embedded = e
	s.httpSrv = httptest.NewUnstartedServer(nil)
	s.httpSrv.Config = e.Server()
	for _, mw := range cfg.middleware {
		s.httpSrv.Config.Handler = mw(s.httpSrv.Config.Handler)
	}
	if cfg.listener != nil {
		_ = s.httpSrv.Listener.Close()
		s.httpSrv.Listener = cfg.listener
	}
	if cfg.tls != nil {
		s.httpSrv.TLS = cfg.tls
		s.httpSrv.StartTLS()
	} else {
		s.httpSrv.Start()
	}
	s.URL = s.httpSrv.URL
	s.close = sync.OnceFunc(func() {
		// Long polls end first: httptest waits for the requests in flight.
		e.Stopping()
		s.httpSrv.CloseClientConnections()
		s.httpSrv.Close()
		if err := e.Close(); err != nil {
			s.fail("closing the service: %v", err)
		}
	})
	clientOpts := cfg.clientOpts
	if cfg.token != "" {
		clientOpts = append([]client.Option{client.WithToken(cfg.token)}, clientOpts...)
	}
	if cfg.tls != nil {
		roots := x509.NewCertPool()
		roots.AddCert(s.httpSrv.Certificate())
		clientOpts = append([]client.Option{client.WithTLSConfig(&tls.Config{RootCAs: roots})}, clientOpts...)
	}
	c, err := client.New(s.URL, clientOpts...)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("making the client: %w", err)
	}
	s.Client = c
	s.clientOpts = cfg.clientOpts
	return s, nil
}

// ClientWithToken returns a client of the service that sends token (a
// principal's of WithPrincipal), with the options of WithClientOptions.
func (s *Server) ClientWithToken(token string) *client.Client {
	c, err := client.New(s.URL, append([]client.Option{client.WithToken(token)}, s.clientOpts...)...)
	if err != nil {
		s.fail("making a client with a token: %v", err)
	}
	return c
}

// fail reports a failure of the server: to the test, or, without one, by
// a panic.
func (s *Server) fail(format string, args ...any) {
	if s.t == nil {
		panic(fmt.Sprintf("membershiptest: "+format, args...))
	}
	s.t.Helper()
	s.t.Errorf("membershiptest: "+format, args...)
}

// Certificate returns the certificate the service serves with WithTLS, for
// a client to trust; nil without.
func (s *Server) Certificate() *x509.Certificate {
	if s.httpSrv.TLS == nil {
		return nil
	}
	return s.httpSrv.Certificate()
}

// Addr returns the address the server listens on.
func (s *Server) Addr() string { return s.httpSrv.Listener.Addr().String() }

// Close stops the service now, as a crash of a service without a data
// directory would: the connections are closed, requests in flight fail,
// and its data is gone. Another NewServer with WithListener on the same
// address starts it again, empty, with another epoch. The test's end
// closes it too; Close may be called more than once.
func (s *Server) Close() { s.close() }

// Advance moves the fake clock of WithClock forward by d, and then ends
// the memberships due at the new time, and the nestings of groups in
// groups, before it returns: a membership added with a TTL of an hour is
// gone after Advance(time.Hour). It
// returns how many memberships it ended. Without WithClock, it fails the
// test (or panics, without one: see Start).
func (s *Server) Advance(d time.Duration) int {
	return s.Set(s.Now().Add(d))
}

// Set sets the fake clock of WithClock to t (never backwards: an earlier
// t leaves it where it is), and ends the memberships due, as Advance.
func (s *Server) Set(t time.Time) int {
	if s.clock == nil {
		s.fail("Advance and Set need the fake clock: NewServer(t, membershiptest.WithClock(start))")
		return 0
	}
	s.clock.set(t)
	n, err := s.embedded.ExpireDue(context.Background())
	if err != nil {
		s.fail("ending the memberships due: %v", err)
	}
	return n
}

// Now returns the service's clock: the fake clock of WithClock, or the
// wall clock.
func (s *Server) Now() time.Time {
	if s.clock == nil {
		return time.Now()
	}
	return s.clock.Now()
}

// clock is a fake clock, safe for concurrent use.
type clock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}
