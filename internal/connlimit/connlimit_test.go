package connlimit

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// server serves a Listener with budget o on loopback until the test ends.
// Its handler answers "ok", but for /block, which waits until release is
// closed.
type server struct {
	l       *Listener
	addr    string
	release chan struct{}
	blocked atomic.Int64 // requests of /block in the handler
}

func newServer(t *testing.T, o Options) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &server{l: NewListener(ln, o), addr: ln.Addr().String(), release: make(chan struct{})}
	s.l.changed = make(chan struct{}, 1)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/block" {
				s.blocked.Add(1)
				s.l.notify()
				<-s.release
			}
			_, _ = io.WriteString(w, "ok")
		}),
		ConnState:         s.l.ConnState,
		ReadHeaderTimeout: time.Minute,
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(s.l) }()
	t.Cleanup(func() {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
		_ = srv.Close()
		<-done
	})
	return s
}

// client is one connection, that sends requests by hand.
type client struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func (s *server) dial(t *testing.T) *client {
	t.Helper()
	conn, err := net.Dial("tcp", s.addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(time.Minute)))
	return &client{t: t, conn: conn, r: bufio.NewReader(conn)}
}

func (c *client) send(path string) {
	c.t.Helper()
	_, err := io.WriteString(c.conn, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(c.t, err)
}

// get sends a GET of path and returns the reply's status and body.
func (c *client) get(path string) (int, string) {
	c.t.Helper()
	c.send(path)
	return c.reply()
}

func (c *client) reply() (int, string) {
	c.t.Helper()
	resp, err := http.ReadResponse(c.r, nil)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	if resp.Close {
		body = append(body, " (Connection: close)"...)
	}
	return resp.StatusCode, string(body)
}

// closedByServer reports whether the server closed the connection: a read
// ends at once, with nothing.
func (c *client) closedByServer() bool {
	c.t.Helper()
	require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err := c.r.ReadByte()
	return err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// waitFor waits until cond holds, checking it at each change the listener
// or the handler tells of, for at most 10 s: for the server's side of a
// connection to reach a state the client cannot see.
func (s *server) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-s.l.changed:
		case <-deadline.C:
			require.FailNow(t, "timed out waiting: "+what)
		}
	}
}

// idle counts the connections that would be closed to make room.
func (l *Listener) idle() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for c := range l.conns {
		if c.evictable() {
			n++
		}
	}
	return n
}

func TestBudgetSpentWithNoIdleConnectionRefusesWith503(t *testing.T) {
	s := newServer(t, Options{MaxConns: 2, HeaderBytes: 1 << 20, Flag: "-max-conns"})
	busy := []*client{s.dial(t), s.dial(t)}
	for _, c := range busy {
		c.send("/block")
	}
	s.waitFor(t, "two requests in their handler", func() bool { return s.blocked.Load() == 2 })

	status, body := s.dial(t).get("/")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Contains(t, body, `{"error":{"code":"unavailable","message":"the service holds 2 connections at most (-max-conns)`)
	assert.Contains(t, body, "(Connection: close)")
	assert.Equal(t, uint64(1), s.l.Stats().Refused)

	close(s.release)
	for _, c := range busy {
		status, body := c.reply()
		assert.Equal(t, http.StatusOK, status)
		assert.Equal(t, "ok", body)
	}
}

func TestIdleConnectionsAreClosedFirstToMakeRoom(t *testing.T) {
	s := newServer(t, Options{MaxConns: 3, HeaderBytes: 1 << 20})
	var idle []*client
	for i := range 3 {
		c := s.dial(t)
		status, _ := c.get("/")
		require.Equal(t, http.StatusOK, status)
		idle = append(idle, c)
		s.waitFor(t, "the connection idle", func() bool { return s.l.idle() == i+1 })
	}

	status, body := s.dial(t).get("/")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "ok", body)
	assert.True(t, idle[0].closedByServer(), "the connection idle the longest is closed")
	assert.Equal(t, uint64(1), s.l.Stats().Evicted)
	assert.Equal(t, uint64(0), s.l.Stats().Refused)
	for _, c := range idle[1:] {
		status, body := c.get("/")
		assert.Equal(t, http.StatusOK, status, "the others are kept")
		assert.Equal(t, "ok", body)
	}
}

func TestNewConnectionThatSendsNothingIsIdle(t *testing.T) {
	s := newServer(t, Options{MaxConns: 1, HeaderBytes: 1 << 20})
	silent := s.dial(t)
	s.waitFor(t, "the silent connection waiting", func() bool { return s.l.idle() == 1 })

	status, _ := s.dial(t).get("/")
	assert.Equal(t, http.StatusOK, status)
	assert.True(t, silent.closedByServer())
}

func TestBusyConnectionIsNeverClosedToMakeRoom(t *testing.T) {
	s := newServer(t, Options{MaxConns: 1, HeaderBytes: 1 << 20})
	busy := s.dial(t)
	busy.send("/block") // served until release
	s.waitFor(t, "the request in its handler", func() bool { return s.blocked.Load() == 1 })

	status, _ := s.dial(t).get("/")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	close(s.release)
	status, body := busy.reply()
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "ok", body)
}

// A connection that sent part of a request and stalls, even after a reply
// on the same connection, holds nothing the server has begun to serve: it
// is closed to make room like an idle one, and its part is never served.
func TestPartOfARequestThenSilenceIsClosedToMakeRoom(t *testing.T) {
	for _, part := range []string{"G", "GET", "GET / HTTP/1.1\r\nHost: x\r\n"} {
		t.Run(part, func(t *testing.T) {
			s := newServer(t, Options{MaxConns: 1, HeaderBytes: 1 << 20})
			stalled := s.dial(t)
			status, _ := stalled.get("/")
			require.Equal(t, http.StatusOK, status)
			_, err := io.WriteString(stalled.conn, part)
			require.NoError(t, err)
			s.waitFor(t, "the connection idle again, its part no whole request", func() bool { return s.l.idle() == 1 })

			status, body := s.dial(t).get("/")
			assert.Equal(t, http.StatusOK, status)
			assert.Equal(t, "ok", body)
			assert.True(t, stalled.closedByServer())
		})
	}
}

func TestRequestArrivingAsItsConnectionIsClosedIsDroppedUnread(t *testing.T) {
	l := NewListener(nil, Options{MaxConns: 1, HeaderBytes: 1 << 20})
	server, peer := net.Pipe()
	defer peer.Close()
	c := l.admit(server)
	require.NotNil(t, c)
	require.True(t, c.state.CompareAndSwap(stateIdle, stateEvicted), "closed to make room")
	go func() { _, _ = io.WriteString(peer, "POST /group-user/g HTTP/1.1\r\n") }()

	n, err := c.Read(make([]byte, 64))
	assert.Equal(t, 0, n)
	assert.ErrorIs(t, err, errEvicted)
	assert.Equal(t, int64(0), l.Stats().HeaderBytes, "nothing taken for what was dropped")
}

func TestHeadersPastTheirBudgetAreRefusedWith503(t *testing.T) {
	s := newServer(t, Options{MaxConns: 10, HeaderBytes: 16 << 10})
	slow := s.dial(t)
	header := "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("a", 6<<10) + "\r\n"
	_, err := io.WriteString(slow.conn, header)
	require.NoError(t, err)
	s.waitFor(t, "the slow headers read, each byte costing two", func() bool { return s.l.Stats().HeaderBytes == int64(2*len(header)) })

	second := s.dial(t)
	_, err = io.WriteString(second.conn, header+"\r\n")
	require.NoError(t, err)
	status, body := second.reply()
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Contains(t, body, `"the service is reading too many request headers at once (-header-memory): try again shortly"`)
	assert.Contains(t, body, "(Connection: close)")
	s.waitFor(t, "the refused connection closed", func() bool { return s.l.Stats().Open == 1 })
	assert.Equal(t, uint64(1), s.l.Stats().HeadersRefused, "refused once, whatever reads follow")

	_, err = io.WriteString(slow.conn, "\r\n")
	require.NoError(t, err)
	status, _ = slow.reply()
	assert.Equal(t, http.StatusOK, status, "the first keeps its place")
	s.waitFor(t, "the headers' bytes given back", func() bool { return s.l.Stats().HeaderBytes == 0 })
	status, _ = s.dial(t).get("/")
	assert.Equal(t, http.StatusOK, status)
}

func TestHeadersOfAClosedConnectionAreGivenBack(t *testing.T) {
	s := newServer(t, Options{MaxConns: 10, HeaderBytes: 1 << 20})
	c := s.dial(t)
	_, err := io.WriteString(c.conn, "GET / HTTP/1.1\r\nHost: x\r\n")
	require.NoError(t, err)
	s.waitFor(t, "the headers read", func() bool { return s.l.Stats().HeaderBytes > 0 })
	require.NoError(t, c.conn.Close())
	s.waitFor(t, "the headers' bytes given back and the connection gone", func() bool {
		st := s.l.Stats()
		return st.HeaderBytes == 0 && st.Open == 0
	})
}

func TestRefusalsPastMaxRefusingStillGetTheirReply(t *testing.T) {
	l := NewListener(nil, Options{MaxConns: 1, HeaderBytes: 1 << 20})
	l.refusing.Store(MaxRefusing)
	server, peer := net.Pipe()
	defer peer.Close()
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(peer)
		got <- string(b)
	}()
	l.refuse(server)
	assert.Equal(t, string(l.connRefusal), <-got)
	assert.Equal(t, int64(MaxRefusing), l.refusing.Load())
}

func TestCloseBusyClosesTheConnectionOpenTheLongest(t *testing.T) {
	s := newServer(t, Options{MaxConns: 2, HeaderBytes: 1 << 20, Flag: "-admin-max", CloseBusy: true})
	busy := []*client{s.dial(t)}
	busy[0].send("/block")
	s.waitFor(t, "the first in its handler", func() bool { return s.blocked.Load() == 1 })
	busy = append(busy, s.dial(t))
	busy[1].send("/block")
	s.waitFor(t, "both in their handlers", func() bool { return s.blocked.Load() == 2 })

	c := s.dial(t)
	c.send("/")
	assert.True(t, busy[0].closedByServer(), "the connection open the longest is closed")
	assert.Equal(t, uint64(0), s.l.Stats().Refused)
	close(s.release)
	status, body := c.reply()
	assert.Equal(t, http.StatusOK, status, "the new connection is served")
	assert.Equal(t, "ok", body)
}

// TestAdmissionsNeverPassTheBudgetWhileClosesFinish admits connection
// after connection into a spent budget, each closing the longest idle in
// the background: the connections not being closed never number more than
// the budget, whenever a close finishes (its removal and its count as
// closing change together).
func TestAdmissionsNeverPassTheBudgetWhileClosesFinish(t *testing.T) {
	const budget = 4
	l := NewListener(nil, Options{MaxConns: budget})
	over := 0
	for i := range 20000 {
		a, b := net.Pipe()
		_ = b.Close()
		if c := l.admit(a); c == nil {
			require.FailNow(t, "refused with idle connections open", "admission %d", i)
		}
		l.mu.Lock()
		open := len(l.conns) - int(l.closing.Load())
		notClosing := 0
		for c := range l.conns {
			if c.state.Load() != stateEvicted {
				notClosing++
			}
		}
		l.mu.Unlock()
		if notClosing > budget || open != notClosing {
			over++
		}
	}
	assert.Zero(t, over, "admissions that found the budget's count wrong")
}
