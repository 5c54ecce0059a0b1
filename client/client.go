package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Client calls the service. Make one with New; it is safe for concurrent
// use, and meant to be kept and shared (it holds the list cache and, with
// WithReadYourWrites, the revision of its last write).
type Client struct {
	base          *url.URL
	http          *http.Client
	tlsConfig     *tls.Config // WithTLSConfig's; nil without
	token         string
	userAgent     string
	retry         RetryPolicy
	readOwnWrites bool
	maxReply      int64
	cache         *listCache

	// lastWrite is the highest revision a write returned, for
	// WithReadYourWrites.
	lastWrite atomic.Uint64
}

// Option configures New.
type Option func(*Client) error

// WithToken sends the bearer token on every request (Authorization:
// Bearer token): the service's writes and /backup need it when it has
// one, and its reads too with -auth-reads.
func WithToken(token string) Option {
	return func(c *Client) error {
		if token == "" || strings.ContainsAny(token, " \t\r\n") {
			return errors.New("membership: WithToken: a token is one non-empty line without spaces")
		}
		c.token = token
		return nil
	}
}

// WithHTTPClient makes the client send its requests with hc, for its
// transport, proxy or TLS settings; http.DefaultClient by default. Leave
// hc.Timeout at 0, or above the longest wait of Follow (30 s): bound calls
// with their context instead.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("membership: WithHTTPClient: nil *http.Client")
		}
		c.http = hc
		return nil
	}
}

// WithTLSConfig makes the client speak TLS with cfg to the service at an
// https:// base URL: cfg's RootCAs trust the service's certificate (nil:
// the system's roots), and its Certificates, for a service that asks for
// client certificates (its -tls-client-ca), say who the client is. The
// client then sends its requests with a transport of its own, as
// http.DefaultTransport's but for cfg; with WithHTTPClient, set cfg in
// that client's transport instead (New refuses both).
func WithTLSConfig(cfg *tls.Config) Option {
	return func(c *Client) error {
		if cfg == nil {
			return errors.New("membership: WithTLSConfig: nil *tls.Config")
		}
		c.tlsConfig = cfg.Clone()
		return nil
	}
}

// WithRetry sets the retry policy (see RetryPolicy); its zero fields take
// their defaults.
func WithRetry(p RetryPolicy) Option {
	return func(c *Client) error {
		c.retry = p.withDefaults()
		return nil
	}
}

// WithUserAgent sets the User-Agent of the requests. By default it is
// groupmembership-go-client/ and the version of the module the client was
// built from (v1.2.0; "devel" when the build information has none).
func WithUserAgent(ua string) Option {
	return func(c *Client) error {
		c.userAgent = ua
		return nil
	}
}

// WithReadYourWrites makes the client remember the highest revision its
// writes returned, and send it in X-Min-Revision on its reads (lists, a
// member, Check, a user's groups, Groups), so that a read after a write
// sees it on whichever instance behind a load balancer it reaches. An
// instance waits up to 2 s for a revision it has not got yet, then
// answers 503, which the client retries.
//
// A revision counts in one history of the store: after the service's
// epoch changed (a restart without its data, a restore), call
// ForgetWrites, or the reads wait for a revision that may never come.
func WithReadYourWrites() Option {
	return func(c *Client) error {
		c.readOwnWrites = true
		return nil
	}
}

// DefaultListCacheBytes is the default bound of the list cache.
const DefaultListCacheBytes = 4 << 20

// WithListCacheBytes bounds the cache of list replies (member lists and
// Groups), in bytes of their bodies: DefaultListCacheBytes by default; 0
// turns it off. A list is asked for with the ETag of the last reply for
// the same URL in If-None-Match, and a 304 is served from the cache. A
// reply larger than the bound is not cached; the least recently used go
// first.
func WithListCacheBytes(n int64) Option {
	return func(c *Client) error {
		if n < 0 {
			return fmt.Errorf("membership: WithListCacheBytes: %d is negative", n)
		}
		c.cache = newListCache(n)
		return nil
	}
}

// DefaultMaxReplyBytes is the default bound of a reply's body.
const DefaultMaxReplyBytes = 64 << 20

// WithMaxReplyBytes bounds the body of a reply the client reads (but a
// backup's, which is streamed): a longer one is an error wrapping
// ErrReplyTooLarge. DefaultMaxReplyBytes by default.
func WithMaxReplyBytes(n int64) Option {
	return func(c *Client) error {
		if n <= 0 {
			return fmt.Errorf("membership: WithMaxReplyBytes: %d is not positive", n)
		}
		c.maxReply = n
		return nil
	}
}

// modulePath is the path of the module the client is in.
const modulePath = "example.com/groupmembership"

// defaultUserAgent is the User-Agent of a client without WithUserAgent.
var defaultUserAgent = readUserAgent()

// readUserAgent returns the User-Agent of the running binary's client.
func readUserAgent() string {
	bi, _ := debug.ReadBuildInfo() // nil when the binary has none
	return userAgentOf(bi)
}

// userAgentOf returns the client's User-Agent in a binary of build
// information bi (nil: none): its module's version, as the main module or
// as a dependency.
func userAgentOf(bi *debug.BuildInfo) string {
	version := ""
	if bi != nil && bi.Main.Path == modulePath {
		version = bi.Main.Version
	} else if bi != nil {
		for _, m := range bi.Deps {
			if m.Path != modulePath {
				continue
			}
			version = m.Version
			if m.Replace != nil && m.Replace.Version != "" {
				version = m.Replace.Version
			}
		}
	}
	if version == "" || version == "(devel)" {
		version = "devel" // a product version is a token: no parentheses
	}
	return "groupmembership-go-client/" + version
}

// New returns a client of the service at baseURL (http:// or https://,
// with a host, and optionally a path prefix that every route goes under).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("membership: the base URL %q: %w", baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("membership: the base URL %q is not http:// or https://, a host, and an optional path", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = strings.TrimSuffix(u.RawPath, "/")
	c := &Client{base: u, http: http.DefaultClient, userAgent: defaultUserAgent,
		retry: RetryPolicy{}.withDefaults(), maxReply: DefaultMaxReplyBytes, cache: newListCache(DefaultListCacheBytes)}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	if err := c.useTLSConfig(); err != nil {
		return nil, err
	}
	return c, nil
}

// useTLSConfig gives the client a transport of WithTLSConfig's
// configuration, if any.
func (c *Client) useTLSConfig() error {
	switch {
	case c.tlsConfig == nil:
		return nil
	case c.base.Scheme != "https":
		return fmt.Errorf("membership: WithTLSConfig: the base URL %s is not https://", c.base.Redacted())
	case c.http != http.DefaultClient:
		return errors.New("membership: WithTLSConfig and WithHTTPClient: set the TLS configuration in the http.Client's transport")
	}
	t := &http.Transport{Proxy: http.ProxyFromEnvironment}
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		t = dt.Clone()
	}
	t.TLSClientConfig = c.tlsConfig
	c.http = &http.Client{Transport: t}
	return nil
}

// MinRevision returns the revision the client's reads ask for with
// WithReadYourWrites: the highest its writes returned; 0 for none.
func (c *Client) MinRevision() Revision { return Revision(c.lastWrite.Load()) }

// ForgetWrites makes the client forget the revisions its writes returned:
// its reads no longer ask for them (see WithReadYourWrites).
func (c *Client) ForgetWrites() { c.lastWrite.Store(0) }

// noteWrite remembers rev, if higher than the highest seen.
func (c *Client) noteWrite(rev Revision) {
	for {
		cur := c.lastWrite.Load()
		if uint64(rev) <= cur || c.lastWrite.CompareAndSwap(cur, uint64(rev)) {
			return
		}
	}
}

// RetryPolicy says which failed requests are sent again, and how often.
//
// A reply 503 with Retry-After (the service is starting, stopping, or
// short of memory or disk), a 409 idempotency_key_in_flight (the first
// attempt with the key is still being applied), and a connection error
// (refused, reset, closed before the reply) are retried; nothing else is.
// Reads (GET, and POST /check) are always retried so. A write is retried
// only when it carries an Idempotency-Key, which the client makes for
// every write unless told otherwise (WithIdempotencyKey,
// WithoutIdempotencyKey): the service then applies it at most once,
// however many attempts reach it.
//
// The waits between attempts grow exponentially from BaseDelay with full
// jitter (a random wait from 0 to BaseDelay×2^n, at most MaxDelay); a
// Retry-After is waited for instead, up to MaxDelay. No attempt starts
// after MaxAttempts, nor a wait that would end past MaxElapsed since the
// first attempt, nor after the context ended.
type RetryPolicy struct {
	// MaxAttempts is the most attempts of one call, the first included:
	// DefaultMaxAttempts when 0; 1 turns retries off.
	MaxAttempts int
	// MaxElapsed bounds the time from the first attempt to the end of the
	// last wait: DefaultMaxElapsed when 0.
	MaxElapsed time.Duration
	// BaseDelay is the bound of the first wait: DefaultBaseDelay when 0.
	BaseDelay time.Duration
	// MaxDelay bounds each wait, a Retry-After's included:
	// DefaultMaxDelay when 0.
	MaxDelay time.Duration

	// sleep and now are the clock, for tests: a timer and time.Now when
	// nil. rand draws the jitter, from 0 to n (excluded).
	sleep func(ctx context.Context, d time.Duration) error
	now   func() time.Time
	rand  func(n int64) int64
}

// The defaults of RetryPolicy.
const (
	DefaultMaxAttempts = 4
	DefaultMaxElapsed  = 5 * time.Second
	DefaultBaseDelay   = 100 * time.Millisecond
	DefaultMaxDelay    = 2 * time.Second
)

func (p RetryPolicy) withDefaults() RetryPolicy {
	positiveOr(&p.MaxAttempts, DefaultMaxAttempts)
	positiveOr(&p.MaxElapsed, DefaultMaxElapsed)
	positiveOr(&p.BaseDelay, DefaultBaseDelay)
	positiveOr(&p.MaxDelay, DefaultMaxDelay)
	if p.sleep == nil {
		p.sleep = sleepCtx
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.rand == nil {
		p.rand = mrand.Int64N
	}
	return p
}

// positiveOr sets *v to def unless it is positive.
func positiveOr[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// sleepCtx waits d, or until ctx ends, and then returns its error.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backoff returns the wait before attempt n+1 (n from 1), after a
// failure that asked for retryAfter (0: none).
func (p RetryPolicy) backoff(n int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, p.MaxDelay)
	}
	ceiling := p.MaxDelay
	if shift := n - 1; shift < 30 && p.BaseDelay<<shift < p.MaxDelay {
		ceiling = p.BaseDelay << shift
	}
	return time.Duration(p.rand(int64(ceiling) + 1))
}

// request is one call of the API, which may be sent several times.
type request struct {
	method string
	// path is the escaped path under the base URL, and query its query.
	path  string
	query url.Values
	// body is sent with every attempt, as contentType.
	body        []byte
	contentType string
	header      http.Header
	// retry says that the request may be sent again: a read, or a write
	// with an Idempotency-Key.
	retry bool
	// read sends X-Min-Revision with WithReadYourWrites; cache uses and
	// fills the list cache.
	read, cache bool
	// maxAttempts, when set, replaces the policy's (Follow retries on its
	// own).
	maxAttempts int
}

// reply is a reply of status 2xx or 304, its body read.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// url returns the URL of r.
func (c *Client) url(r *request) string {
	u := *c.base
	u.RawPath = c.base.EscapedPath() + r.path
	p, err := url.PathUnescape(u.RawPath)
	if err != nil { // the paths built here are escaped right
		p = u.RawPath
	}
	u.Path = p
	u.RawQuery = r.query.Encode()
	return u.String()
}

// do sends r, retrying as the policy says, and returns its reply, its body
// read: 2xx, or 304 turned into the cached reply.
func (c *Client) do(ctx context.Context, r *request) (reply, error) {
	resp, err := c.send(ctx, r)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	key := ""
	if r.cache {
		key = c.url(r)
	}
	if resp.StatusCode == http.StatusNotModified && r.cache {
		if e, ok := c.cache.get(key, resp.Header.Get("ETag")); ok {
			return reply{status: http.StatusOK, header: e.header, body: e.body}, nil
		}
		// Evicted between the request and now: ask again, without the
		// condition.
		r2 := *r
		r2.cache = false
		return c.do(ctx, &r2)
	}
	body, err := readLimitedSized(resp.Body, c.maxReply, resp.ContentLength)
	if err != nil {
		return reply{}, fmt.Errorf("membership: %s %s: reading the reply: %w", r.method, r.path, err)
	}
	if r.cache && resp.StatusCode == http.StatusOK {
		c.cache.put(key, resp.Header.Get("ETag"), resp.Header, body)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// readLimitedSized reads body, at most limit bytes, of size bytes (-1: unknown,
// as a chunked reply's). It reads a body of a known size into one buffer,
// and one of unknown size into a buffer that grows by doubling up to the
// limit, never past it: a reply over the bound costs at most about twice
// the bound, not the several times that io.ReadAll's growth allocates.
func readLimitedSized(body io.Reader, limit, size int64) ([]byte, error) {
	if size > limit {
		return nil, fmt.Errorf("%w: over %d bytes", ErrReplyTooLarge, limit)
	}
	limit = min(limit, math.MaxInt64-1) // limit+1 below must not overflow
	// A Content-Length is a claim, not bytes come: the first buffer is
	// at most 64 KiB whatever it says, and grows as bytes arrive.
	if size < 0 || size > 64<<10 {
		size = min(max(size, 512), 64<<10)
	}
	b := make([]byte, 0, min(size+1, limit+1))
	for {
		if len(b) == cap(b) {
			if int64(len(b)) > limit {
				break
			}
			grown := make([]byte, len(b), min(int64(2*cap(b)), limit+1))
			copy(grown, b)
			b = grown
		}
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if cap(b) > len(b)+len(b)/4+512 {
		// Doubling left room unused: the reply may be cached, and the
		// cache counts its length.
		b = append([]byte(nil), b...)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: over %d bytes", ErrReplyTooLarge, limit)
	}
	return b, nil
}

// send sends r until it gets a reply that is not an error, or an error
// that is not retried, and returns the reply with its body unread: 2xx,
// or 304 when r.cache.
func (c *Client) send(ctx context.Context, r *request) (*http.Response, error) {
	p := c.retry
	attempts := p.MaxAttempts
	if r.maxAttempts > 0 {
		attempts = r.maxAttempts
	}
	start := p.now()
	for n := 1; ; n++ {
		resp, err := c.attempt(ctx, r)
		if err == nil {
			return resp, nil
		}
		if !r.retry || !retryable(ctx, err) || n >= attempts {
			return nil, err
		}
		var retryAfter time.Duration
		if e := asError(err); e != nil {
			retryAfter = e.RetryAfter
		}
		wait := p.backoff(n, retryAfter)
		if p.now().Add(wait).Sub(start) > p.MaxElapsed {
			return nil, err
		}
		if serr := p.sleep(ctx, wait); serr != nil {
			return nil, fmt.Errorf("membership: %s %s: %w, while waiting to retry after: %w", r.method, r.path, serr, err)
		}
	}
}

// attempt sends r once. An error reply is returned as an *Error.
func (c *Client) attempt(ctx context.Context, r *request) (*http.Response, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.url(r), body)
	if err != nil {
		return nil, fmt.Errorf("membership: %s %s: %w", r.method, r.path, err)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	req.Header.Set("Accept", "application/json")
	if r.read && c.readOwnWrites {
		if rev := c.lastWrite.Load(); rev > 0 {
			req.Header.Set("X-Min-Revision", strconv.FormatUint(rev, 10))
		}
	}
	if r.cache {
		if etag := c.cache.etag(c.url(r)); etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("membership: %s %s: %w", r.method, r.path, err)
	}
	if resp.StatusCode < 300 || (resp.StatusCode == http.StatusNotModified && r.cache) {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return nil, newError(r.method, r.path, resp.StatusCode, resp.Header, b)
}

// retryable reports whether err, the error of an attempt, may go away
// when the request is sent again: a 503 with Retry-After, a 409
// idempotency_key_in_flight, or a connection error; never once ctx ended.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if e := asError(err); e != nil {
		return (e.StatusCode == http.StatusServiceUnavailable && e.RetryAfter > 0) || e.Code == CodeIdempotencyKeyInFlight
	}
	return connectionError(err)
}

// connectionError reports whether err is one of a connection: refused,
// reset, closed or timed out before the reply.
func connectionError(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// newIdempotencyKey returns a random key: 128 bits, in hex.
func newIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}
