package connlimit

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/tlstest"
)

// newTLSServer is newServer serving TLS, with a certificate for localhost
// of a CA that the pool it returns trusts.
func newTLSServer(t *testing.T, o Options) (*server, *x509.CertPool) {
	t.Helper()
	ca, err := tlstest.NewCA("connlimit test CA")
	require.NoError(t, err)
	cert, err := ca.Issue(tlstest.Options{})
	require.NoError(t, err)
	o.TLS = &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, Certificates: []tls.Certificate{cert.TLS()}}
	return newServer(t, o), ca.Pool()
}

// dialTLS is dial, and a handshake trusting pool.
func (s *server) dialTLS(t *testing.T, pool *x509.CertPool) *client {
	t.Helper()
	raw := s.dial(t)
	conn := tls.Client(raw.conn, &tls.Config{RootCAs: pool, ServerName: "localhost"})
	require.NoError(t, conn.Handshake())
	return &client{t: t, conn: conn, r: bufio.NewReader(conn)}
}

// clientHello returns the first bytes a TLS client sends.
func clientHello(t *testing.T) []byte {
	t.Helper()
	hello, err := tlstest.ClientHello()
	require.NoError(t, err)
	return hello
}

func TestTLSServesRequestsAndTracksTheirConnections(t *testing.T) {
	s, pool := newTLSServer(t, Options{MaxConns: 2, HeaderBytes: 1 << 20})
	c := s.dialTLS(t, pool)
	status, body := c.get("/")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "ok", body)
	s.waitFor(t, "the connection idle after its reply", func() bool { return s.l.idle() == 1 })
	s.waitFor(t, "the headers' bytes given back", func() bool { return s.l.Stats().HeaderBytes == 0 })
	assert.Equal(t, 1, s.l.Stats().Open)
}

// A connection that stalls its handshake is idle: it is closed first to
// make room, and the bytes of its handshake count against the headers'
// budget until then.
func TestTLSStalledHandshakeIsClosedToMakeRoom(t *testing.T) {
	s, pool := newTLSServer(t, Options{MaxConns: 2, HeaderBytes: 1 << 20})
	hello := clientHello(t)
	half := hello[:len(hello)/2]
	var stalled []*client
	for i := range 2 {
		c := s.dial(t)
		_, err := c.conn.Write(half)
		require.NoError(t, err)
		stalled = append(stalled, c)
		s.waitFor(t, "the half handshake read and counted", func() bool {
			return s.l.Stats().HeaderBytes == int64((i+1)*headerCost*len(half)) && s.l.idle() == i+1
		})
	}

	status, body := s.dialTLS(t, pool).get("/")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "ok", body)
	assert.True(t, stalled[0].closedByServer(), "the one stalled the longest is closed")
	assert.Equal(t, uint64(1), s.l.Stats().Evicted)
	assert.Equal(t, uint64(0), s.l.Stats().Refused)
}

func TestTLSConnectionPastTheBudgetGets503AfterAHandshake(t *testing.T) {
	s, pool := newTLSServer(t, Options{MaxConns: 1, HeaderBytes: 1 << 20, Flag: "-max-conns"})
	busy := s.dialTLS(t, pool)
	busy.send("/block")
	s.waitFor(t, "the request in its handler", func() bool { return s.blocked.Load() == 1 })

	status, body := s.dialTLS(t, pool).get("/")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Contains(t, body, `"the service holds 1 connections at most (-max-conns), none of them idle: try again shortly"}} (Connection: close)`)
	assert.Equal(t, uint64(1), s.l.Stats().Refused)

	close(s.release)
	status, _ = busy.reply()
	assert.Equal(t, http.StatusOK, status)
}

// Headers past their budget cannot be answered in clear within a TLS
// stream: the connection is closed, and the first keeps its place.
func TestTLSHeadersPastTheirBudgetCloseTheConnection(t *testing.T) {
	s, pool := newTLSServer(t, Options{MaxConns: 10, HeaderBytes: 24 << 10})
	first := s.dialTLS(t, pool)
	header := "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("a", 6<<10) + "\r\n"
	_, err := io.WriteString(first.conn, header)
	require.NoError(t, err)
	s.waitFor(t, "the first's headers read", func() bool { return s.l.Stats().HeaderBytes > int64(2*len(header)) })

	second := s.dialTLS(t, pool)
	_, _ = io.WriteString(second.conn, header+"\r\n") // may fail: the server closes as it reads
	got, err := io.ReadAll(second.r)
	if err != nil {
		assert.ErrorIs(t, err, syscall.ECONNRESET, "closed, not a stream broken by a reply in clear")
	}
	assert.Empty(t, string(got), "no reply: not a 400, which would blame the client")
	assert.Equal(t, uint64(1), s.l.Stats().HeadersRefused)

	_, err = io.WriteString(first.conn, "\r\n")
	require.NoError(t, err)
	status, _ := first.reply()
	assert.Equal(t, http.StatusOK, status)
}

// Past MaxRefusing, a refused TLS connection is closed at once, with no
// handshake and no reply in clear.
func TestTLSRefusalsPastMaxRefusingAreClosedWithoutAWord(t *testing.T) {
	l := NewListener(nil, Options{MaxConns: 1, HeaderBytes: 1 << 20, TLS: &tls.Config{}})
	l.refusing.Store(MaxRefusing)
	server, peer := net.Pipe()
	defer peer.Close()
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(peer)
		got <- b
	}()
	l.refuse(server)
	assert.Empty(t, <-got)
}
