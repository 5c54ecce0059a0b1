package main

import (
	"context"
	"crypto/tls"
	"net/http"
	"time"

	"example.com/groupmembership/bench/loadtest"
	"example.com/groupmembership/internal/tlstest"
)

// tlsOptions returns the service's flags that serve HTTPS with a
// certificate made for the run, whose CA the harness's clients then trust.
func tlsOptions(h *harness) ([]string, error) {
	ca, err := tlstest.NewCA("attack CA")
	if err != nil {
		return nil, err
	}
	cert, err := ca.Issue(tlstest.Options{})
	if err != nil {
		return nil, err
	}
	certFile, keyFile, err := cert.WriteFiles(h.tmp, "tls")
	if err != nil {
		return nil, err
	}
	for _, c := range []*http.Client{loadClient, probeClient, sideClient} {
		c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: ca.Pool()}
	}
	return []string{"-tls-cert", certFile, "-tls-key", keyFile}, nil
}

// attackHandshakeStall opens 4000 connections to a service with -tls-cert
// that each send half of a TLS ClientHello and stall: a handshake that never
// ends holds a connection, a goroutine and the bytes read so far, until the
// handshake's deadline (the header timeout, 5 s) or the connection budget
// closes it. The probes ask over TLS, a new connection and handshake each.
func attackHandshakeStall(ctx context.Context, h *harness, r *row) error {
	const (
		conns   = 4000
		dialers = 64
		// holdFor runs past the handshake's 5 s deadline.
		holdFor = 8 * time.Second
	)
	args, err := tlsOptions(h)
	if err != nil {
		return err
	}
	hello, err := tlstest.ClientHello()
	if err != nil {
		return err
	}
	half := hello[:len(hello)/2]
	s, log, err := startLogged(ctx, h, h.bin, "handshake-stall", serviceOptions{args: args, tls: true})
	if err != nil {
		return err
	}
	defer s.kill()
	r.endpoints = probedEndpoints
	var phases []phase
	err = measure(ctx, h, s, r, 0, func(ctx context.Context, sm *sampler) error {
		held := &rawConns{}
		defer held.closeAll()
		start := time.Now()
		dialTook := openAll(ctx, conns, dialers, h.openRate, func() { held.writeAndHold(ctx, s.addr, half) })
		phases = append(phases, phase{"while they were opened", start, time.Now()})
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return err
		}
		atPeak := held.statuses()
		m, _ := s.metrics(ctx, 5*time.Second)
		open, failed, cut := held.count()
		r.notef("%d connections each sent %d bytes of a %d-byte ClientHello and stalled, opened in %s (%s; %d failed to connect%s; %d writes cut short)",
			open, len(half), len(hello), fmtDur(dialTook), fmtRate(h.openRate), failed, lastErr(held.lastError()), cut)
		r.notef("%s after the last: %s; membership_connections{api} %s of %s, closed_idle_total %s, refused_total %s; membership_memory_bytes{request_headers} %s",
			fmtDur(time.Since(start)-dialTook), fmtTally(atPeak), metricOr(m, `membership_connections{listener="api"}`),
			metricOr(m, `membership_connections_limit{listener="api"}`), metricOr(m, `membership_connections_closed_idle_total{listener="api"}`),
			metricOr(m, `membership_connections_refused_total{listener="api"}`), bytesMetricOr(m, `membership_memory_bytes{budget="request_headers"}`))
		if err := sleepCtx(ctx, time.Until(start.Add(holdFor))); err != nil {
			return err
		}
		phases = append(phases, phase{"while they stalled, until the handshake's deadline", phases[0].to, time.Now()})
		peakRSS := sm.peakRSSNow()
		end := held.statuses()
		m, _ = s.metrics(ctx, 5*time.Second)
		r.notef("%s after the first: %s (the handshake's deadline is 5 s); membership_tls_handshake_failures_total %s",
			fmtDur(time.Since(start)), fmtTally(end), metricOr(m, "membership_tls_handshake_failures_total"))
		if stalled := atPeak["nothing yet"]; stalled > 0 {
			r.notef("RSS per stalled handshake: +%s / %d stalled at the peak = %.1f KiB",
				loadtest.MiB(peakRSS-r.baseRSS), stalled, float64(peakRSS-r.baseRSS)/float64(stalled)/1024)
		}
		held.closeAll()
		return nil
	})
	return endConnAttack(r, phases, log, err)
}
