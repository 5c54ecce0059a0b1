package server

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/internal/tlscert"
)

// tlsEnv are the variables that stand in for the TLS flags not given, as
// MEMBERSHIP_ADMIN_ADDR does for -admin-addr: a probe started apart (the
// image's HEALTHCHECK) sees the environment, not the flags.
var tlsEnv = []struct {
	flag, env string
	value     func(*Config) *string
}{
	{"-tls-cert", "MEMBERSHIP_TLS_CERT", func(c *Config) *string { return &c.tlsCert }},
	{"-tls-key", "MEMBERSHIP_TLS_KEY", func(c *Config) *string { return &c.tlsKey }},
	{"-tls-client-ca", "MEMBERSHIP_TLS_CLIENT_CA", func(c *Config) *string { return &c.tlsClientCA }},
}

// tlsFromEnv sets the TLS files the flags did not from the environment.
// A variable set but empty is refused: TLS meant but lost must not serve
// in clear.
func tlsFromEnv(cfg *Config, lookupenv func(string) (string, bool)) error {
	for _, f := range tlsEnv {
		p := f.value(cfg)
		if *p != "" {
			continue
		}
		v, set := lookupenv(f.env)
		if set && strings.TrimSpace(v) == "" {
			return fmt.Errorf("%s is set but empty: give it a file, or unset it", f.env)
		}
		*p = v
	}
	return nil
}

// checkTLSFiles returns an error unless the TLS files of cfg make a whole
// to serve: a certificate and its key, or neither, and a client CA only
// with them. (A probe needs the certificate alone.)
func checkTLSFiles(cfg Config) error {
	switch {
	case cfg.tlsCert != "" && cfg.tlsKey == "":
		return fmt.Errorf("-tls-cert %s needs -tls-key (or MEMBERSHIP_TLS_KEY): the file of its private key", cfg.tlsCert)
	case cfg.tlsKey != "" && cfg.tlsCert == "":
		return fmt.Errorf("-tls-key %s needs -tls-cert (or MEMBERSHIP_TLS_CERT): the file of its certificate", cfg.tlsKey)
	case cfg.tlsClientCA != "" && cfg.tlsCert == "":
		return fmt.Errorf("-tls-client-ca %s needs -tls-cert and -tls-key: client certificates are asked for over TLS only", cfg.tlsClientCA)
	}
	return nil
}

// tlsFiles are the TLS files of cfg.
func tlsFiles(cfg Config) tlscert.Files {
	return tlscert.Files{Cert: cfg.tlsCert, Key: cfg.tlsKey, ClientCA: cfg.tlsClientCA}
}

// runTLSReloader loads the certificate again on SIGHUP and when its files
// change, until the function it returns is called, which returns once it
// has stopped; nothing without TLS. SIGHUP has a channel of its own here:
// whoever else in the process listens for it hears it too.
func (s *service) runTLSReloader(ctx context.Context) (stop func()) {
	if s.tls == nil {
		return func() {}
	}
	hangups := make(chan os.Signal, 1)
	signal.Notify(hangups, syscall.SIGHUP)
	ticker := time.NewTicker(tlscert.PollEvery)
	stopRunning, _ := runUntilStopped(ctx, func(ctx context.Context) { s.tls.Run(ctx, hangups, ticker.C) })
	return func() {
		signal.Stop(hangups)
		ticker.Stop()
		stopRunning()
	}
}

// handshakeLogEvery spaces the lines about failed TLS handshakes.
const handshakeLogEvery = 10 * time.Second

// serverLog is the http.Servers' ErrorLog: every line at WARN, but the
// failed TLS handshakes, which clients cause by the thousand (a port
// scan, a load balancer's TCP check, a client that speaks plain HTTP or
// does not trust the certificate, a flood): those are counted, and said
// in one line at most every handshakeLogEvery, with the count and the
// last one's peer and error.
type serverLog struct {
	logger            *slog.Logger
	handshakeFailures atomic.Uint64
	lastLog           atomic.Int64 // when a handshake line was last logged, Unix nanoseconds
}

// handshakeError begins net/http's line about a failed TLS handshake.
const handshakeError = "http: TLS handshake error from "

func (l *serverLog) Write(p []byte) (int, error) {
	line := strings.TrimSuffix(string(p), "\n")
	rest, ok := strings.CutPrefix(line, handshakeError)
	if !ok {
		l.logger.Warn(line)
		return len(p), nil
	}
	n := l.handshakeFailures.Add(1)
	now, last := time.Now().UnixNano(), l.lastLog.Load()
	if last != 0 && now-last < int64(handshakeLogEvery) || !l.lastLog.CompareAndSwap(last, now) {
		return len(p), nil
	}
	peer, why, _ := strings.Cut(rest, ": ")
	l.logger.Warn("TLS handshakes failed (one line every 10 s at most)", "failures_total", n, "last_peer", peer, "last_error", why)
	return len(p), nil
}

// errorLog returns the *log.Logger of l, for http.Server.ErrorLog.
func (l *serverLog) errorLog() *log.Logger { return log.New(l, "", 0) }

// tlsMetrics writes the certificate's loads and the failed handshakes.
func (s *service) tlsMetrics(w *metrics.Writer) {
	if s.tls == nil {
		return
	}
	s.tls.WriteMetrics(w)
	w.Counter("membership_tls_handshake_failures_total",
		"TLS handshakes that failed: a client hung up, spoke plain HTTP, refused the certificate or presented one that does not verify.",
		float64(s.serverLog.handshakeFailures.Load()))
}
