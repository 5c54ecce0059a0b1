package server

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"example.com/groupmembership/internal/logtest"
)

// Failed handshakes are counted and said in one line, with the count, at
// most every 10 s; the servers' other lines pass at WARN.
func TestServerLogCountsFailedHandshakesInOneLine(t *testing.T) {
	logs := &logtest.Buffer{}
	l := &serverLog{logger: slog.New(slog.NewTextHandler(logs, nil))}
	el := l.errorLog()
	el.Printf("http: TLS handshake error from 127.0.0.1:1000: EOF")
	el.Printf("http: TLS handshake error from 127.0.0.1:1001: tls: first record does not look like a TLS handshake")
	el.Printf("http: Accept error: accept tcp: too many open files; retrying in 5ms")

	assert.Equal(t, uint64(2), l.handshakeFailures.Load())
	assert.Equal(t, 1, strings.Count(logs.String(), "TLS handshakes failed"), logs.String())
	assert.Contains(t, logs.String(), `level=WARN msg="TLS handshakes failed (one line every 10 s at most)" failures_total=1 last_peer=127.0.0.1:1000 last_error=EOF`)
	assert.Contains(t, logs.String(), `level=WARN msg="http: Accept error: accept tcp: too many open files; retrying in 5ms"`)
}
