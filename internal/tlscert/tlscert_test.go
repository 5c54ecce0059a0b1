package tlscert

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/logtest"
	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/internal/tlstest"
)

// pki is a CA and a directory of files of certificates it signed.
type pki struct {
	t   *testing.T
	ca  *tlstest.CA
	dir string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	ca, err := tlstest.NewCA("test CA")
	require.NoError(t, err)
	return &pki{t: t, ca: ca, dir: t.TempDir()}
}

// issue returns a certificate of the CA, as o says.
func (p *pki) issue(o tlstest.Options) *tlstest.Cert {
	p.t.Helper()
	c, err := p.ca.Issue(o)
	require.NoError(p.t, err)
	return c
}

// write writes c's certificate and key as NAME.crt and NAME.key, and
// returns them as Files.
func (p *pki) write(c *tlstest.Cert, name string) Files {
	p.t.Helper()
	cert, key, err := c.WriteFiles(p.dir, name)
	require.NoError(p.t, err)
	return Files{Cert: cert, Key: key}
}

// overwrite writes c over the files of f.
func (p *pki) overwrite(f Files, c *tlstest.Cert) {
	p.t.Helper()
	require.NoError(p.t, os.WriteFile(f.Cert, c.CertPEM, 0o600))
	require.NoError(p.t, os.WriteFile(f.Key, c.KeyPEM, 0o600))
}

// file writes b into a file of the directory, and returns its path.
func (p *pki) file(name string, b []byte) string {
	p.t.Helper()
	path := filepath.Join(p.dir, name)
	require.NoError(p.t, os.WriteFile(path, b, 0o600))
	return path
}

func newLoader(t *testing.T, f Files) (*Loader, *logtest.Buffer) {
	t.Helper()
	logs := &logtest.Buffer{}
	l, err := New(f, slog.New(slog.NewTextHandler(logs, nil)))
	require.NoError(t, err)
	return l, logs
}

// serve serves TLS with cfg on loopback until the test ends: each
// connection is answered with what it reads, and returns its address.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// dial completes a handshake with the server at addr, trusting pool, with
// cfg's other settings, and returns the connection.
func dial(t *testing.T, addr string, pool *x509.CertPool, cfg *tls.Config) (*tls.Conn, error) {
	t.Helper()
	if cfg == nil {
		cfg = &tls.Config{}
	}
	cfg.RootCAs, cfg.ServerName = pool, "localhost"
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
		require.NoError(t, c.SetDeadline(time.Now().Add(time.Minute)))
	}
	return c, err
}

// served returns the serial number of the certificate a new handshake
// with addr gets.
func served(t *testing.T, addr string, pool *x509.CertPool) string {
	t.Helper()
	c, err := dial(t, addr, pool, nil)
	require.NoError(t, err)
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func TestNewRefusesFilesItCannotServe(t *testing.T) {
	p := newPKI(t)
	good := p.write(p.issue(tlstest.Options{}), "good")
	other := p.write(p.issue(tlstest.Options{}), "other")
	missing := filepath.Join(p.dir, "missing.crt")
	tests := []struct {
		name  string
		files Files
		want  string
	}{
		{"a missing certificate", Files{Cert: missing, Key: good.Key}, "reading the TLS certificate: open " + missing + ": no such file or directory"},
		{"a missing key", Files{Cert: good.Cert, Key: missing}, "reading the TLS key: open " + missing},
		{"both missing", Files{Cert: missing, Key: missing}, "reading the TLS certificate: open " + missing + ": no such file or directory; reading the TLS key"},
		{"a directory for the certificate", Files{Cert: p.dir, Key: good.Key}, "reading the TLS certificate: read " + p.dir + ": is a directory"},
		{"a key that is not the certificate's", Files{Cert: good.Cert, Key: other.Key},
			"the TLS certificate " + good.Cert + " and key " + other.Key + ": tls: private key does not match public key"},
		{"the files swapped", Files{Cert: good.Key, Key: good.Cert}, "the TLS certificate " + good.Key + " and key " + good.Cert + ": tls: "},
		{"a certificate file of no PEM", Files{Cert: p.file("text.crt", []byte("hello\n")), Key: good.Key}, "tls: failed to find any PEM data in certificate input"},
		{"a missing client CA", Files{Cert: good.Cert, Key: good.Key, ClientCA: missing}, "reading the TLS client CA: open " + missing},
		{"a client CA of no PEM", Files{Cert: good.Cert, Key: good.Key, ClientCA: p.file("empty.pem", nil)},
			"the client CA " + filepath.Join(p.dir, "empty.pem") + ": no PEM certificate in it"},
		{"a key as the client CA", Files{Cert: good.Cert, Key: good.Key, ClientCA: good.Key},
			"the client CA " + good.Key + `: a PEM block of type "PRIVATE KEY", where only certificates belong`},
		{"text after the client CA", Files{Cert: good.Cert, Key: good.Key, ClientCA: p.file("tail.pem", append(append([]byte(nil), p.ca.CertPEM...), "junk"...))},
			"text after its last PEM certificate that is not one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.files, slog.New(slog.DiscardHandler))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestServesTLS12OrLaterAndHTTP1Only(t *testing.T) {
	p := newPKI(t)
	l, logs := newLoader(t, p.write(p.issue(tlstest.Options{}), "server"))
	addr := serve(t, l.ServerConfig())

	c, err := dial(t, addr, p.ca.Pool(), &tls.Config{NextProtos: []string{"h2", "http/1.1"}})
	require.NoError(t, err)
	assert.Equal(t, "http/1.1", c.ConnectionState().NegotiatedProtocol, "HTTP/2 is never offered")
	_, err = dial(t, addr, p.ca.Pool(), &tls.Config{MaxVersion: tls.VersionTLS11})
	require.Error(t, err, "TLS 1.1 is refused")
	c, err = dial(t, addr, p.ca.Pool(), &tls.Config{MaxVersion: tls.VersionTLS12})
	require.NoError(t, err)
	assert.Equal(t, uint16(tls.VersionTLS12), c.ConnectionState().Version)
	assert.Contains(t, logs.String(), `msg="serving TLS"`)
	assert.Contains(t, logs.String(), `names=localhost,127.0.0.1,::1`)
}

// With a client CA, a client may present a certificate, which must verify;
// one without a certificate gets in too (its bearer token is its
// credential).
func TestClientCertificatesVerifiedWhenGiven(t *testing.T) {
	p := newPKI(t)
	f := p.write(p.issue(tlstest.Options{}), "server")
	f.ClientCA = p.file("clients.pem", p.ca.CertPEM)
	l, _ := newLoader(t, f)
	addr := serve(t, l.ServerConfig())

	client := p.issue(tlstest.Options{CommonName: "sync-job", Client: true}).TLS()
	c, err := dial(t, addr, p.ca.Pool(), &tls.Config{Certificates: []tls.Certificate{client}})
	require.NoError(t, err)
	_, err = c.Write([]byte("x")) // TLS 1.3: the server's verdict comes with the first read
	require.NoError(t, err)
	_, err = io.ReadFull(c, make([]byte, 1))
	require.NoError(t, err, "a certificate the CA signed")

	c, err = dial(t, addr, p.ca.Pool(), nil)
	require.NoError(t, err)
	_, err = c.Write([]byte("x"))
	require.NoError(t, err)
	_, err = io.ReadFull(c, make([]byte, 1))
	require.NoError(t, err, "no certificate")

	stranger, err := tlstest.NewCA("another CA")
	require.NoError(t, err)
	forged, err := stranger.Issue(tlstest.Options{CommonName: "sync-job", Client: true})
	require.NoError(t, err)
	forgedPair := forged.TLS()
	// Go's client sends no certificate that the server's CAs did not sign:
	// this one sends it anyway.
	c, err = dial(t, addr, p.ca.Pool(), &tls.Config{GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &forgedPair, nil
	}})
	if err == nil {
		_, _ = c.Write([]byte("x"))
		_, err = io.ReadFull(c, make([]byte, 1))
	}
	require.Error(t, err, "a certificate another CA signed")
	assert.Contains(t, err.Error(), "certificate")
}

// A reload serves the new certificate at the next handshake; a connection
// open before it goes on, with the old one.
func TestReloadServesTheNewCertificateToNewConnections(t *testing.T) {
	p := newPKI(t)
	first := p.issue(tlstest.Options{})
	f := p.write(first, "server")
	l, logs := newLoader(t, f)
	addr := serve(t, l.ServerConfig())
	open, err := dial(t, addr, p.ca.Pool(), nil)
	require.NoError(t, err)

	second := p.issue(tlstest.Options{})
	p.overwrite(f, second)
	require.NoError(t, l.Reload("hangup"))
	assert.Equal(t, second.Leaf.SerialNumber.String(), served(t, addr, p.ca.Pool()))
	assert.Equal(t, second.Leaf.SerialNumber, l.Leaf().SerialNumber)

	_, err = open.Write([]byte("still here"))
	require.NoError(t, err)
	got := make([]byte, len("still here"))
	_, err = io.ReadFull(open, got)
	require.NoError(t, err, "the connection open before the reload")
	assert.Equal(t, "still here", string(got))
	assert.Equal(t, first.Leaf.SerialNumber, open.ConnectionState().PeerCertificates[0].SerialNumber)
	assert.Contains(t, logs.String(), `msg="loaded the TLS certificate again" trigger=hangup`)
	assert.Contains(t, metricsOf(l), "membership_tls_reloads_total 1\n")
}

// A reload that fails keeps the certificate loaded, says why and counts.
func TestFailedReloadKeepsTheCertificateLoaded(t *testing.T) {
	p := newPKI(t)
	first := p.issue(tlstest.Options{})
	f := p.write(first, "server")
	l, logs := newLoader(t, f)
	addr := serve(t, l.ServerConfig())

	other := p.issue(tlstest.Options{})
	require.NoError(t, os.WriteFile(f.Cert, other.CertPEM, 0o600)) // the key stays first's
	err := l.Reload("hangup")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "private key does not match public key")
	require.NoError(t, os.Remove(f.Key))
	err = l.Reload("hangup")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reading the TLS key: open "+f.Key+": no such file or directory")

	assert.Equal(t, first.Leaf.SerialNumber.String(), served(t, addr, p.ca.Pool()))
	assert.Contains(t, logs.String(), `level=ERROR msg="could not load the TLS certificate again: serving the one loaded before" trigger=hangup`)
	assert.Contains(t, logs.String(), "private key does not match public key")
	m := metricsOf(l)
	assert.Contains(t, m, "membership_tls_reload_failures_total 2\n")
	assert.Contains(t, m, "membership_tls_reloads_total 0\n")
	assert.Contains(t, m, "membership_tls_last_reload_successful 0\n")

	p.overwrite(f, other)
	require.NoError(t, l.Reload("hangup"))
	assert.Equal(t, other.Leaf.SerialNumber.String(), served(t, addr, p.ca.Pool()))
	assert.Contains(t, metricsOf(l), "membership_tls_last_reload_successful 1\n")
}

// A poll loads files that changed once they read the same at the next
// poll, and tries a failing change once, not at every poll.
func TestPollLoadsAChangeOnceItHasSettled(t *testing.T) {
	p := newPKI(t)
	f := p.write(p.issue(tlstest.Options{}), "server")
	l, logs := newLoader(t, f)
	first := l.Leaf().SerialNumber

	l.Poll()
	assert.Equal(t, first, l.Leaf().SerialNumber, "nothing changed")

	half := p.issue(tlstest.Options{})
	require.NoError(t, os.WriteFile(f.Cert, half.CertPEM, 0o600)) // its key not yet written
	l.Poll()
	require.NoError(t, os.WriteFile(f.Key, half.KeyPEM, 0o600))
	l.Poll()
	assert.Equal(t, first, l.Leaf().SerialNumber, "changing at each poll: not loaded yet")
	l.Poll()
	assert.Equal(t, half.Leaf.SerialNumber, l.Leaf().SerialNumber, "the same at two polls: loaded")
	assert.Contains(t, logs.String(), `trigger="the files changed"`)
	assert.NotContains(t, logs.String(), "level=ERROR", "the certificate alone, without its key, was never tried")

	other := p.issue(tlstest.Options{})
	require.NoError(t, os.WriteFile(f.Cert, other.CertPEM, 0o600)) // and the key never comes
	for range 4 {
		l.Poll()
	}
	assert.Equal(t, half.Leaf.SerialNumber, l.Leaf().SerialNumber)
	assert.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), "tried once")
	assert.Contains(t, metricsOf(l), "membership_tls_reload_failures_total 1\n")

	require.NoError(t, os.WriteFile(f.Key, other.KeyPEM, 0o600))
	l.Poll()
	l.Poll()
	assert.Equal(t, other.Leaf.SerialNumber, l.Leaf().SerialNumber)
	assert.Contains(t, metricsOf(l), "membership_tls_reloads_total 2\n")
}

// Run reloads at a signal and polls at a tick, one after the other: a send
// returns once the one before it is done.
func TestRunReloadsOnASignalAndPollsOnATick(t *testing.T) {
	p := newPKI(t)
	f := p.write(p.issue(tlstest.Options{}), "server")
	l, _ := newLoader(t, f)
	signals, ticks := make(chan os.Signal), make(chan time.Time)
	done := make(chan struct{})
	go func() { defer close(done); l.Run(t.Context(), signals, ticks) }()
	t.Cleanup(func() { <-done }) // t.Context ends before the cleanups run

	second := p.issue(tlstest.Options{})
	p.overwrite(f, second)
	signals <- syscall.SIGHUP
	ticks <- time.Time{} // taken once the reload is done
	assert.Equal(t, second.Leaf.SerialNumber, l.Leaf().SerialNumber, "loaded at the signal")

	third := p.issue(tlstest.Options{})
	p.overwrite(f, third)
	ticks <- time.Time{}
	ticks <- time.Time{}
	ticks <- time.Time{} // taken once the poll of the tick before is done
	assert.Equal(t, third.Leaf.SerialNumber, l.Leaf().SerialNumber, "loaded at the second tick")
}

func TestProbeConfigTrustsTheCertificateOfTheFileAlone(t *testing.T) {
	p := newPKI(t)
	f := p.write(p.issue(tlstest.Options{Hosts: []string{"membership.example"}}), "server")
	l, _ := newLoader(t, f)
	addr := serve(t, l.ServerConfig())

	cfg, err := ProbeConfig(f.Cert)
	require.NoError(t, err)
	c, err := tls.Dial("tcp", addr, cfg)
	require.NoError(t, err, "127.0.0.1, which the certificate does not name")
	_ = c.Close()

	other := p.write(p.issue(tlstest.Options{}), "other")
	cfg, err = ProbeConfig(other.Cert)
	require.NoError(t, err)
	_, err = tls.Dial("tcp", addr, cfg)
	require.Error(t, err, "a certificate of the same CA, not the one served")
	assert.Contains(t, err.Error(), "the service serves a certificate other than the one in "+other.Cert)

	_, err = ProbeConfig(filepath.Join(p.dir, "missing.crt"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reading the TLS certificate: open")
}

func metricsOf(l *Loader) string {
	var w metrics.Writer
	l.WriteMetrics(&w)
	return string(w.Bytes())
}

// A certificate that is not valid now is served, with a warning: clients
// will refuse it, and the operator may be renewing it.
func TestACertificateNotValidNowIsServedWithAWarning(t *testing.T) {
	p := newPKI(t)
	_, logs := newLoader(t, p.write(p.issue(tlstest.Options{NotAfter: time.Now().Add(-time.Minute)}), "expired"))
	assert.Contains(t, logs.String(), `level=WARN msg="the TLS certificate is not valid now: clients will refuse it"`)
	_, logs = newLoader(t, p.write(p.issue(tlstest.Options{}), "valid"))
	assert.NotContains(t, logs.String(), "level=WARN")
}
