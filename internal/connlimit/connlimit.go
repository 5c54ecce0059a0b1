// Package connlimit bounds what clients' connections cost the service: how
// many are open at once, and the bytes of the request headers being read on
// all of them. A Listener admits a connection while its budget has room.
// When the budget is spent it closes the connections that have been idle
// the longest to make room, so that clients who hoard idle keep-alive
// connections cannot lock out clients who send requests; when none is idle,
// it answers the new connection with a short 503 and closes it. The process
// never runs out of descriptors on accept, and no connection hangs.
//
// A connection is idle between requests (and before its first one) while
// the server waits for it to send something. Closing such a connection
// never loses a request: a request whose first bytes arrive as it is closed
// is dropped unread, never served, as when a keep-alive connection times
// out, and an HTTP client retries it on a new connection.
//
// With Options.TLS the listener serves TLS: it admits a connection, then
// hands it to the server as a *tls.Conn, whose handshake the server makes
// (and bounds with its own deadline). A connection is idle until its first
// request's headers are read, its handshake included, so that one that
// stalls its handshake is closed first to make room, and the handshake's
// bytes count against the headers' budget.
package connlimit

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/internal/budget"
)

// MaxRefusing bounds the connections being refused at once: each gets its
// 503 and lingers up to lingerTimeout so that its request's bytes do not
// turn the close into a reset that could lose the reply. Past it, a refused
// connection gets its reply and is closed at once.
const MaxRefusing = 64

// MaxClosing bounds the idle connections being closed at once to make
// room, whose descriptors are not yet free: with them, a Listener's
// connections hold at most MaxConns + MaxClosing + MaxRefusing + 1
// descriptors.
const MaxClosing = 64

// lingerTimeout bounds how long a refused connection is held after its 503,
// reading what the client sent, before it is closed.
const lingerTimeout = time.Second

// lingerBytes bounds what is read from a refused connection before it is
// closed.
const lingerBytes = 64 << 10

// logEvery spaces the warnings about refused and closed connections: under
// an attack, one line every logEvery, with the counts.
const logEvery = 10 * time.Second

// Options configure NewListener.
type Options struct {
	// MaxConns is how many connections may be open at once.
	MaxConns int
	// HeaderBytes bounds the memory of the request headers being read on
	// all connections at once: each byte read costs two (the byte, and its
	// copy in the request's header map). A connection whose headers would
	// take more is answered 503 and closed.
	HeaderBytes int64
	// Name names the listener in its log lines ("api", "admin").
	Name string
	// Flag is the flag that sets MaxConns, for the 503's message
	// ("-max-conns").
	Flag string
	// CloseBusy lets the listener, when its budget is spent and no
	// connection is idle, close the connections open the longest, busy or
	// not, rather than refuse the new one: for a listener whose requests
	// are all short (probes and scrapes), where a connection open long is
	// one that stalls.
	CloseBusy bool
	// Logger gets a warning, at most every 10 s, while connections are
	// refused or closed to make room. Nil discards them.
	Logger *slog.Logger
	// TLS, when set, makes the listener serve TLS with it: Accept returns
	// *tls.Conn, and a refused connection gets its 503 after a handshake
	// (or, past MaxRefusing, is closed without one). The server's
	// ConnState and ConnContext must be the listener's, as without TLS.
	TLS *tls.Config
}

// Listener is a net.Listener that keeps to a connection budget. Give its
// ConnState to the http.Server that serves it: it tells the listener which
// connections are idle and when a request's headers are read.
type Listener struct {
	net.Listener
	maxConns  int
	name      string
	closeBusy bool
	logger    *slog.Logger
	tls       *tls.Config // nil: plain TCP
	start     time.Time   // idle times count from here, on the monotonic clock
	headers   *budget.Bytes

	mu    sync.Mutex         // guards conns
	conns map[*conn]struct{} // the connections admitted and not closed

	refusing atomic.Int64 // connections being answered 503 now
	closing  atomic.Int64 // connections of conns closed to make room, not yet removed: changed under mu, with them

	// changed, when set (by tests), is told of every change a test may
	// wait for: a state, a read, a close. Nil in the service.
	changed chan struct{}
	refused atomic.Uint64
	evicted atomic.Uint64
	lastLog atomic.Int64 // when a warning was last logged, as idle times

	connRefusal, headerRefusal []byte // the 503 replies, made once
}

// NewListener returns ln with the budget of o.
func NewListener(ln net.Listener, o Options) *Listener {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Listener{
		Listener:  ln,
		maxConns:  o.MaxConns,
		name:      o.Name,
		closeBusy: o.CloseBusy,
		logger:    o.Logger,
		tls:       o.TLS,
		start:     time.Now(),
		headers:   budget.New(o.HeaderBytes),
		conns:     make(map[*conn]struct{}, min(o.MaxConns, 1024)),
		connRefusal: unavailable("the service holds " + strconv.Itoa(o.MaxConns) +
			" connections at most (" + o.Flag + "), none of them idle: try again shortly"),
		headerRefusal: unavailable("the service is reading too many request headers at once " +
			"(-header-memory): try again shortly"),
	}
}

// unavailable is a whole HTTP reply: 503, the service's JSON error body
// with message, and Connection: close.
func unavailable(message string) []byte {
	body := `{"error":{"code":"unavailable","message":` + strconv.Quote(message) + `}}`
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n" +
		"Connection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// Stats are a Listener's figures, for /metrics.
type Stats struct {
	Open, MaxConns int
	// Refused counts the connections answered 503 because the budget was
	// spent with none idle; Evicted, the idle ones closed to make room.
	Refused, Evicted uint64
	// Headers is the budget of the request headers being read.
	HeaderBytes, HeaderLimit int64
	HeadersRefused           uint64
}

// Stats returns the listener's figures now.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	open := len(l.conns)
	l.mu.Unlock()
	return Stats{
		Open: open, MaxConns: l.maxConns, Refused: l.refused.Load(), Evicted: l.evicted.Load(),
		HeaderBytes: l.headers.Used(), HeaderLimit: l.headers.Limit(), HeadersRefused: l.headers.Refused(),
	}
}

// Accept returns the next connection the budget admits, a *tls.Conn with
// Options.TLS. The others are answered 503 and closed, and never returned.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c := l.admit(nc); c != nil {
			if l.tls != nil {
				return tls.Server(c, l.tls), nil
			}
			return c, nil
		}
		l.refuse(nc)
	}
}

// admit adds nc to the open connections when the budget has room, making
// room by closing the longest idle ones when it has none, and returns it;
// nil when every connection is busy.
func (l *Listener) admit(nc net.Conn) *conn {
	c := &conn{Conn: nc, l: l, headers: l.headers.Lease(), opened: l.now()}
	c.readingHeaders.Store(true)
	c.idleSince.Store(l.now())
	if l.add(c) {
		return c
	}
	l.evictIdle()
	if l.add(c) {
		return c
	}
	return nil
}

// add adds c when the budget has room, and reports whether it did. The
// connections being closed to make room are not counted: their
// descriptors are freed in a moment, and MaxClosing bounds them.
func (l *Listener) add(c *conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns)-int(l.closing.Load()) >= l.maxConns {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

// remove removes c from the open connections, and from those being closed
// to make room when it was one: together, so that add never counts a
// connection gone and still being closed, and lets one too many in.
func (l *Listener) remove(c *conn) {
	l.mu.Lock()
	delete(l.conns, c)
	if c.closing {
		c.closing = false
		l.closing.Add(-1)
	}
	l.mu.Unlock()
}

// startClosing marks those of candidates still open and idle (or busy too,
// when busyToo) as closed to make room, counts them as closing, and
// returns them, for the caller to close.
func (l *Listener) startClosing(candidates []*conn, busyToo bool) []*conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	var closing []*conn
	for _, c := range candidates {
		if _, open := l.conns[c]; !open {
			continue // closed meanwhile: removed already
		}
		if c.state.CompareAndSwap(stateIdle, stateEvicted) || busyToo && c.state.CompareAndSwap(stateBusy, stateEvicted) {
			c.closing = true
			closing = append(closing, c)
		}
	}
	l.closing.Add(int64(len(closing)))
	return closing
}

// evictBatch is how many idle connections one eviction closes: a 64th of
// the budget, so that a flood of new connections scans the open ones once
// every evictBatch accepts rather than on each, and at most MaxClosing
// with those still being closed.
func (l *Listener) evictBatch() int {
	return min(max(1, l.maxConns/64), MaxClosing-int(l.closing.Load()))
}

// evictIdle closes the connections that have been idle the longest, at
// most evictBatch of them, in the background: a close waits for the
// connection's goroutine to let go of it, and new connections must not
// wait for that.
func (l *Listener) evictIdle() {
	n := l.evictBatch()
	if n <= 0 {
		l.evictOneNow() // the background closes are all taken: wait for one here
		return
	}
	closing := l.startClosing(l.longestIdle(n), false)
	if len(closing) == 0 && l.closeBusy {
		closing = l.startClosing(l.longestOpen(n), true)
	}
	if len(closing) == 0 {
		return
	}
	go func() {
		for _, c := range closing {
			_ = c.Close() // remove counts it out of closing
		}
	}()
	l.evicted.Add(uint64(len(closing)))
	l.warn("the connection budget is spent: closing the connections idle the longest to make room",
		"closed_total", l.evicted.Load())
}

// longestIdle returns up to n of the idle connections, the longest idle
// first.
func (l *Listener) longestIdle(n int) []*conn {
	return l.oldest(n, (*conn).evictable, func(c *conn) int64 { return c.idleSince.Load() })
}

// oldest returns up to n of the connections that keep holds for, the
// earliest since first.
func (l *Listener) oldest(n int, keep func(*conn) bool, since func(*conn) int64) []*conn {
	l.mu.Lock()
	picked := make([]*conn, 0, len(l.conns))
	for c := range l.conns {
		if keep(c) {
			picked = append(picked, c)
		}
	}
	l.mu.Unlock()
	slices.SortFunc(picked, func(a, b *conn) int { return cmp.Compare(since(a), since(b)) })
	return picked[:min(n, len(picked))]
}

// evictOneNow closes the connection idle the longest, and returns once its
// descriptor is free.
func (l *Listener) evictOneNow() {
	for _, c := range l.startClosing(l.longestIdle(1), false) {
		_ = c.Close()
		l.evicted.Add(1)
	}
}

// longestOpen returns up to n of the connections, the longest open first.
func (l *Listener) longestOpen(n int) []*conn {
	return l.oldest(n, func(c *conn) bool { return c.state.Load() != stateEvicted }, func(c *conn) int64 { return c.opened })
}

// refuse answers nc 503 and closes it, lingering in the background while
// fewer than MaxRefusing others do. With TLS, the 503 follows a handshake,
// in the background only: past MaxRefusing, nc is closed without a word.
func (l *Listener) refuse(nc net.Conn) {
	l.refused.Add(1)
	l.warn("the connection budget is spent and no connection is idle: refusing new connections with 503",
		"max_conns", l.maxConns, "refused_total", l.refused.Load())
	if l.refusing.Add(1) > MaxRefusing {
		l.refusing.Add(-1)
		if l.tls == nil {
			_ = nc.SetWriteDeadline(time.Now().Add(lingerTimeout))
			_, _ = nc.Write(l.connRefusal) // a new connection's send buffer takes it at once
		}
		_ = nc.Close()
		return
	}
	if l.tls != nil {
		nc = tls.Server(nc, l.tls) // its first read, in answerAndClose, makes the handshake
	}
	go func() {
		defer l.refusing.Add(-1)
		answerAndClose(nc, l.connRefusal)
	}()
}

// answerAndClose reads the request's headers (until the blank line that
// ends them, lingerBytes or lingerTimeout: a TLS handshake included), so
// that the reply answers a
// request rather than come before it, writes reply, ends its sending side,
// and reads on until the client closes its side or lingerTimeout passes,
// before closing: closing with unread bytes would reset the connection,
// which could discard the reply before the client reads it.
func answerAndClose(nc net.Conn, reply []byte) {
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(lingerTimeout))
	buf := make([]byte, 512)
	var tail []byte // the last bytes read, to find the blank line across reads
	for read := 0; read < lingerBytes && !bytes.Contains(tail, []byte("\r\n\r\n")); {
		n, err := nc.Read(buf)
		read += n
		tail = append(tail[max(0, len(tail)-3):], buf[:n]...)
		if err != nil {
			break
		}
	}
	if _, err := nc.Write(reply); err != nil {
		return
	}
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	for read := 0; read < lingerBytes; {
		n, err := nc.Read(buf)
		read += n
		if err != nil {
			return
		}
	}
}

// warn logs msg with args at most once every logEvery.
func (l *Listener) warn(msg string, args ...any) {
	now, last := l.now(), l.lastLog.Load()
	if last != 0 && now-last < int64(logEvery) || !l.lastLog.CompareAndSwap(last, now) {
		return
	}
	l.logger.Warn(msg, append([]any{"listener", l.name}, args...)...)
}

// now is the time since the listener started, in nanoseconds.
func (l *Listener) now() int64 { return int64(time.Since(l.start)) }

// notify tells changed, if set, that something changed; it never waits.
func (l *Listener) notify() {
	if l.changed != nil {
		select {
		case l.changed <- struct{}{}:
		default:
		}
	}
}

// ConnState is the http.Server's ConnState hook: it marks a connection idle
// once its reply is sent, and its headers read once its request is.
func (l *Listener) ConnState(nc net.Conn, state http.ConnState) {
	defer l.notify()
	c, ok := admitted(nc)
	if !ok {
		return
	}
	switch state {
	case http.StateIdle:
		c.idleSince.Store(l.now())
		c.state.Store(stateIdle)
		c.readingHeaders.Store(true)
	case http.StateActive:
		c.state.CompareAndSwap(stateIdle, stateBusy) // closed to make room first: Guard serves nothing
		c.headersRead()
	case http.StateClosed, http.StateHijacked:
		c.headersRead()
	}
}

// ConnContext is the http.Server's ConnContext hook: it keeps the
// connection in its requests' context, for Guard.
func (l *Listener) ConnContext(ctx context.Context, nc net.Conn) context.Context {
	if c, ok := admitted(nc); ok {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// admitted returns the connection of the listener that nc is, or that nc
// speaks TLS over.
func admitted(nc net.Conn) (*conn, bool) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	c, ok := nc.(*conn)
	return c, ok
}

type connKey struct{}

// Guard serves h, but not a request whose connection was closed to make
// room while its headers were read: its client has no connection to be
// answered on, and must never find its change applied.
func Guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*conn); ok && c.state.Load() == stateEvicted {
			return
		}
		h.ServeHTTP(w, r)
	})
}

// The states of a connection. One is idle from its acceptance, and from
// each reply, until the server has read its next request's headers: a
// client that sends part of a request and stalls holds nothing the server
// has begun to serve.
const (
	stateIdle    int32 = iota // waiting for a request, or for the rest of its headers: closed first to make room
	stateBusy                 // a request is being served
	stateEvicted              // closed to make room: a read that returns data drops it
	stateRefused              // answered 503 for its headers: every read fails
)

// errEvicted is what a read of a connection closed to make room returns.
var errEvicted = errors.New("connection closed to make room for others (the connection budget is spent)")

// errHeaderBudget is what a read returns when the request headers being
// read on every connection would take more than the budget.
var errHeaderBudget = errors.New("request headers refused: the budget of the headers being read is spent")

// conn is an admitted connection.
type conn struct {
	net.Conn
	l *Listener

	state     atomic.Int32
	opened    int64        // when it was accepted, as Listener.now
	idleSince atomic.Int64 // when it last became idle, as Listener.now
	// readingHeaders is set while a request's line and headers are read:
	// their bytes are taken from the listener's headers budget, into
	// headers, until the server has read them. Only the connection's
	// goroutine touches headers: reads of a request being served (the
	// server's background read) take nothing.
	readingHeaders atomic.Bool
	headers        budget.Lease
	closed         atomic.Bool
	closing        bool // counted in Listener.closing; guarded by Listener.mu
}

// evictable reports whether c may be closed to make room: it is idle, so
// the server has begun to serve nothing it holds (Guard makes sure of it).
func (c *conn) evictable() bool { return c.state.Load() == stateIdle }

// Read reads from the connection. The first bytes of a request make an
// idle connection busy; if it was closed to make room, they are dropped.
// While headers are read, their bytes are taken from the headers budget,
// and a read the budget cannot take is answered 503 (under TLS, the
// connection is closed without it) and fails.
func (c *conn) Read(b []byte) (int, error) {
	defer c.l.notify()
	if c.state.Load() == stateRefused {
		return 0, c.readError(errHeaderBudget)
	}
	n, err := c.Conn.Read(b)
	if n == 0 {
		return n, err
	}
	if c.state.Load() == stateEvicted {
		return 0, c.readError(errEvicted) // arrived as it was closed: dropped unread
	}
	if c.readingHeaders.Load() {
		if !c.headers.Grow(headerCost * int64(n)) {
			c.state.Store(stateRefused)
			refusal := "refusing connections with 503"
			if c.l.tls != nil {
				refusal = "closing connections with no reply"
			}
			c.l.warn("the budget of the request headers being read is spent: "+refusal,
				"header_memory", c.l.headers.Limit(), "refused_total", c.l.headers.Refused())
			if c.l.tls != nil {
				// A reply in clear would break the stream, and the one
				// net/http writes through it for a failed read is a 400
				// that blames the client: the socket is closed first.
				_ = c.Conn.Close()
			} else {
				_ = c.SetWriteDeadline(time.Now().Add(lingerTimeout))
				_, _ = c.Conn.Write(c.l.headerRefusal) // the connection is idle: nothing else writes
			}
			return 0, c.readError(errHeaderBudget)
		}
	}
	return n, err
}

// headerCost is what a byte of a request's line and headers costs while it
// is read: the byte, then its copy in the request's header map, so that the
// headers stalled connections hold take about twice their size in memory.
const headerCost = 2

// readError is err as net/http takes a failed read: it closes the
// connection without a word.
func (c *conn) readError(err error) error {
	return &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// headersRead gives back what the headers being read took.
func (c *conn) headersRead() {
	c.readingHeaders.Store(false)
	c.headers.Release()
}

// Close closes the connection and takes it out of the budget, once.
func (c *conn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := c.Conn.Close()
	c.l.remove(c)
	c.l.notify()
	return err
}
