// Package tlscert holds the service's TLS certificate: it loads the key
// pair, and the CA that signs the clients' certificates, from their files,
// hands them to every handshake, and loads them again on a signal or when
// the files change. A load that fails keeps what was loaded before: the
// service never serves without a certificate, nor with half of a new one.
package tlscert

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/internal/metrics"
)

// PollEvery is how often Run reads the files to see whether they changed.
// A change is loaded once the files have stayed the same for one poll (a
// certificate written before its key is not taken alone): within two polls
// of the last write.
const PollEvery = 2 * time.Second

// Files are the files the certificate is loaded from.
type Files struct {
	// Cert holds the certificate, PEM, followed by its intermediates, if
	// any; Key its private key, PEM.
	Cert, Key string
	// ClientCA, when set, holds the certificates (PEM) of the CAs that
	// sign the clients' certificates: a client may then present one,
	// and one that does not verify is refused.
	ClientCA string
}

// contents are what the files held at one read: their bytes, or the error
// of reading them.
type contents struct {
	cert, key, clientCA []byte
	err                 error
	sum                 [sha256.Size]byte // of all the above: tells a change
}

// loaded is one load of the files.
type loaded struct {
	config *tls.Config // what a handshake uses
	leaf   *x509.Certificate
	sum    [sha256.Size]byte
}

// Loader holds the certificate loaded, and loads it again. Make one with
// New.
type Loader struct {
	files  Files
	logger *slog.Logger
	now    func() time.Time

	current atomic.Pointer[loaded]

	mu sync.Mutex // guards seen and tried, and orders the loads
	// seen is what the last poll read; tried, what was last loaded or
	// tried: a poll loads what it reads when it equals seen (it stayed
	// the same for a poll) and differs from tried.
	seen, tried [sha256.Size]byte

	reloads  atomic.Uint64
	failures atomic.Uint64
	lastOK   atomic.Bool
}

// New loads files, or returns an error that names the file and says why
// it cannot be served (unreadable, not PEM, a key that is not the
// certificate's).
func New(files Files, logger *slog.Logger) (*Loader, error) {
	l := &Loader{files: files, logger: logger, now: time.Now}
	c := files.read()
	if c.err != nil {
		return nil, c.err
	}
	cur, err := files.parse(c)
	if err != nil {
		return nil, err
	}
	l.current.Store(cur)
	l.seen, l.tried = c.sum, c.sum
	l.lastOK.Store(true)
	l.logLoaded("serving TLS", cur)
	return l, nil
}

// ServerConfig returns the configuration of the listeners: TLS 1.2 or
// later, HTTP/1.1 (the connection budget counts a connection's requests
// one after the other), and at each handshake the certificate loaded
// last.
func (l *Loader) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return l.current.Load().config, nil
		},
	}
}

// Leaf returns the certificate served now.
func (l *Loader) Leaf() *x509.Certificate { return l.current.Load().leaf }

// Reload loads the files again, as a signal asks: the next handshakes use
// them, and those in progress and the connections open keep what they
// have. On failure the certificate loaded before stays, and the error
// says why.
func (l *Loader) Reload(trigger string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.files.read()
	l.seen = c.sum
	return l.load(c, trigger)
}

// Poll reads the files, and loads them when they changed and have stayed
// the same since the poll before.
func (l *Loader) Poll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.files.read()
	if c.sum != l.seen {
		l.seen = c.sum // changing: wait for a poll that reads the same
		return
	}
	if c.sum == l.tried {
		return
	}
	_ = l.load(c, "the files changed") // logged and counted
}

// load loads c, logging and counting the result. l.mu is held.
func (l *Loader) load(c contents, trigger string) error {
	l.tried = c.sum
	err := c.err
	var next *loaded
	if err == nil {
		next, err = l.files.parse(c)
	}
	if err != nil {
		l.failures.Add(1)
		l.lastOK.Store(false)
		l.logger.Error("could not load the TLS certificate again: serving the one loaded before",
			"trigger", trigger, "err", err, "serving_not_after", l.Leaf().NotAfter)
		return err
	}
	l.current.Store(next)
	l.reloads.Add(1)
	l.lastOK.Store(true)
	l.logLoaded("loaded the TLS certificate again", next, "trigger", trigger)
	return nil
}

// logLoaded logs msg with what cur serves, and args.
func (l *Loader) logLoaded(msg string, cur *loaded, args ...any) {
	leaf := cur.leaf
	args = append(args, "cert", l.files.Cert, "subject", leaf.Subject.String(), "names", strings.Join(names(leaf), ","),
		"not_after", leaf.NotAfter, "client_ca", l.files.ClientCA != "")
	l.logger.Info(msg, args...)
	if now := l.now(); now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		l.logger.Warn("the TLS certificate is not valid now: clients will refuse it", "cert", l.files.Cert,
			"not_before", leaf.NotBefore, "not_after", leaf.NotAfter)
	}
}

// names returns the names and addresses leaf is valid for.
func names(leaf *x509.Certificate) []string {
	ns := append([]string(nil), leaf.DNSNames...)
	for _, ip := range leaf.IPAddresses {
		ns = append(ns, ip.String())
	}
	return ns
}

// Run loads the files again at each signal and, when a tick finds they
// changed, until ctx ends.
func (l *Loader) Run(ctx context.Context, signals <-chan os.Signal, ticks <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case sig := <-signals:
			_ = l.Reload(sig.String()) // logged and counted
		case <-ticks:
			l.Poll()
		}
	}
}

// WriteMetrics writes the loads and the certificate's expiry.
func (l *Loader) WriteMetrics(w *metrics.Writer) {
	w.Counter("membership_tls_reloads_total", "Loads of the TLS certificate after the first (a signal, or its files changed).", float64(l.reloads.Load()))
	w.Counter("membership_tls_reload_failures_total", "Loads of the TLS certificate that failed: the one loaded before is served.", float64(l.failures.Load()))
	ok := 0.0
	if l.lastOK.Load() {
		ok = 1
	}
	w.Gauge("membership_tls_last_reload_successful", "1 when the last load of the TLS certificate succeeded, 0 when it failed.", ok)
	w.Gauge("membership_tls_certificate_expiry_timestamp_seconds", "When the TLS certificate served expires, in seconds since the Unix epoch.",
		float64(l.Leaf().NotAfter.Unix()))
}

// read reads the files.
func (f Files) read() contents {
	var c contents
	var errs []string
	h := sha256.New()
	for _, part := range []struct {
		what, path string
		into       *[]byte
	}{{"certificate", f.Cert, &c.cert}, {"key", f.Key, &c.key}, {"client CA", f.ClientCA, &c.clientCA}} {
		if part.path == "" {
			continue
		}
		b, err := os.ReadFile(part.path)
		if err != nil {
			err = fmt.Errorf("reading the TLS %s: %w", part.what, err)
			h.Write([]byte(err.Error()))
			errs = append(errs, err.Error())
		}
		h.Write(b)
		h.Write([]byte{0})
		*part.into = b
	}
	if len(errs) > 0 {
		c.err = errors.New(strings.Join(errs, "; "))
	}
	copy(c.sum[:], h.Sum(nil))
	return c
}

// parse makes a configuration of c, read from f, or returns an error that
// names the file at fault.
func (f Files) parse(c contents) (*loaded, error) {
	pair, err := tls.X509KeyPair(c.cert, c.key)
	if err != nil {
		return nil, fmt.Errorf("the TLS certificate %s and key %s: %w", f.Cert, f.Key, err)
	}
	if pair.Leaf == nil { // Go's x509keypairleaf=0
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("the TLS certificate %s: %w", f.Cert, err)
		}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, Certificates: []tls.Certificate{pair}}
	if f.ClientCA != "" {
		pool, err := certPool(c.clientCA)
		if err != nil {
			return nil, fmt.Errorf("the client CA %s: %w", f.ClientCA, err)
		}
		cfg.ClientAuth, cfg.ClientCAs = tls.VerifyClientCertIfGiven, pool
	}
	return &loaded{config: cfg, leaf: pair.Leaf, sum: c.sum}, nil
}

// certPool returns the certificates of b, PEM, in a pool; an error when b
// holds none, or anything else.
func certPool(b []byte) (*x509.CertPool, error) {
	certs, err := parseCerts(b)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// parseCerts returns the certificates of b, PEM; an error when b holds
// none, or a block that is not a certificate.
func parseCerts(b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("a PEM block of type %q, where only certificates belong", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate in it")
	}
	if len(bytes.TrimSpace(b)) > 0 {
		return nil, errors.New("text after its last PEM certificate that is not one")
	}
	return certs, nil
}

// ProbeConfig returns the configuration with which a probe of this
// machine's service (-probe /readyz) trusts it: by the certificate it
// serves, which must be one of certFile's. The name and the expiry are not
// checked: the probe asks 127.0.0.1, which a certificate rarely names, and
// an expiry is for an alert (membership_tls_certificate_expiry_timestamp_seconds),
// not for a restart, which would serve the same certificate.
func ProbeConfig(certFile string) (*tls.Config, error) {
	b, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("reading the TLS certificate: %w", err)
	}
	certs, err := parseCerts(b)
	if err != nil {
		return nil, fmt.Errorf("the TLS certificate %s: %w", certFile, err)
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // VerifyConnection checks the certificate served instead
		VerifyConnection: func(cs tls.ConnectionState) error {
			for _, c := range certs {
				if len(cs.PeerCertificates) > 0 && c.Equal(cs.PeerCertificates[0]) {
					return nil
				}
			}
			return fmt.Errorf("the service serves a certificate other than the one in %s (loaded since it was served, or another service on that port)", certFile)
		},
	}, nil
}
