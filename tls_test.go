package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/tlstest"
)

// servicePKI is a CA, and the service's certificate and key for
// localhost and 127.0.0.1, in files of a directory of the test.
type servicePKI struct {
	t              *testing.T
	ca             *tlstest.CA
	dir, cert, key string
	leaf           *x509.Certificate // the certificate in the files now
}

func newServicePKI(t *testing.T) *servicePKI {
	t.Helper()
	ca, err := tlstest.NewCA("membership test CA")
	require.NoError(t, err)
	p := &servicePKI{t: t, ca: ca, dir: t.TempDir()}
	p.rotate()
	return p
}

// args are the flags that serve the certificate.
func (p *servicePKI) args() []string { return []string{"-tls-cert", p.cert, "-tls-key", p.key} }

// rotate writes a new certificate and key over the files, and returns the
// certificate.
func (p *servicePKI) rotate() *x509.Certificate {
	p.t.Helper()
	c, err := p.ca.Issue(tlstest.Options{})
	require.NoError(p.t, err)
	p.cert, p.key, err = c.WriteFiles(p.dir, "service")
	require.NoError(p.t, err)
	p.leaf = c.Leaf
	return c.Leaf
}

// client returns an HTTP client that trusts the CA, with certs as its own.
func (p *servicePKI) client(certs ...tls.Certificate) *http.Client {
	return &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: p.ca.Pool(), Certificates: certs},
	}}
}

// served returns the certificate a new handshake with addr gets.
func (p *servicePKI) served(addr string) *x509.Certificate {
	p.t.Helper()
	c := p.dial(addr)
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0]
}

// dial completes a handshake with addr, trusting the CA.
func (p *servicePKI) dial(addr string) *tls.Conn {
	p.t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Minute}, "tcp", addr, &tls.Config{RootCAs: p.ca.Pool()})
	require.NoError(p.t, err)
	require.NoError(p.t, c.SetDeadline(time.Now().Add(2*time.Minute)))
	return c
}

// httpsOf returns base, http://host:port, as https://host:port.
func httpsOf(base string) string { return "https://" + strings.TrimPrefix(base, "http://") }

// get GETs url with c and returns the status and the body.
func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestProgramServesHTTPSOnBothListeners(t *testing.T) {
	p := newServicePKI(t)
	base, _, logs := startProgram(t, append(p.args(), "-admin-addr", "127.0.0.1:0")...)
	addr := strings.TrimPrefix(base, "http://")
	c := p.client()

	resp, err := c.PostForm(httpsOf(base)+"/group-user/tls", map[string][]string{"users": {"[1,2]"}})
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "2", string(body))
	assert.Equal(t, uint16(tls.VersionTLS13), resp.TLS.Version)
	status, body2 := get(t, c, httpsOf(base)+"/group-user/tls")
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `[{"uid":1,"nickname":""},{"uid":2,"nickname":""}]`, body2)

	status, body2 = send(t, "GET", base+"/healthz", "")
	assert.Equal(t, http.StatusBadRequest, status, "plain HTTP on the TLS port")
	assert.Contains(t, body2, "Client sent an HTTP request to an HTTPS server")

	var adminAddr string
	for _, line := range logs.Lines() {
		if strings.Contains(line, `"msg":"listening for probes and metrics"`) {
			assert.Contains(t, line, `"tls":true`)
			adminAddr = strings.Split(strings.Split(line, `"admin_addr":"`)[1], `"`)[0]
		}
	}
	require.NotEmpty(t, adminAddr)
	status, metrics := get(t, c, "https://"+adminAddr+"/metrics")
	assert.Equal(t, http.StatusOK, status, "the admin listener serves TLS too")
	for _, want := range []string{"membership_tls_reloads_total 0\n", "membership_tls_reload_failures_total 0\n",
		"membership_tls_last_reload_successful 1\n", "membership_tls_handshake_failures_total 1\n"} {
		assert.Contains(t, metrics, want)
	}
	assert.Contains(t, logs.String(), `"msg":"serving TLS"`)
	logsSay(t, logs, `"last_error":"client sent an HTTP request to an HTTPS server"`)

	// -probe with a path asks this machine over TLS, trusting the
	// certificate of -tls-cert whatever names it holds.
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-addr", addr, "-tls-cert", p.cert, "-probe", "/readyz"}, noEnv, &out, io.Discard))
	assert.Equal(t, "probe https://"+addr+"/readyz: 200 OK\n", out.String())
	env := func(name string) (string, bool) {
		v, ok := map[string]string{"MEMBERSHIP_TLS_CERT": p.cert, "MEMBERSHIP_ADMIN_ADDR": adminAddr}[name]
		return v, ok
	}
	out.Reset()
	require.NoError(t, run(context.Background(), []string{"-probe", "/readyz"}, env, &out, io.Discard), "as the image's HEALTHCHECK asks")
	assert.Equal(t, "probe https://"+adminAddr+"/readyz: 200 OK\n", out.String())
	err = run(context.Background(), []string{"-addr", addr, "-probe", "/readyz"}, noEnv, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "400 Bad Request: the service speaks TLS: give the probe -tls-cert, or MEMBERSHIP_TLS_CERT")
}

func TestProgramRefusesTLSItCannotServe(t *testing.T) {
	p := newServicePKI(t)
	other := newServicePKI(t)
	missing := filepath.Join(p.dir, "missing.pem")
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"a key that is not the certificate's", []string{"-tls-cert", p.cert, "-tls-key", other.key}, nil,
			"the TLS certificate " + p.cert + " and key " + other.key + ": tls: private key does not match public key"},
		{"a missing key", []string{"-tls-cert", p.cert, "-tls-key", missing}, nil, "reading the TLS key: open " + missing + ": no such file or directory"},
		{"a certificate without its key", []string{"-tls-cert", p.cert}, nil, "-tls-cert " + p.cert + " needs -tls-key (or MEMBERSHIP_TLS_KEY)"},
		{"a key without its certificate", nil, map[string]string{"MEMBERSHIP_TLS_KEY": p.key}, "-tls-key " + p.key + " needs -tls-cert (or MEMBERSHIP_TLS_CERT)"},
		{"a client CA without TLS", []string{"-tls-client-ca", p.cert}, nil, "-tls-client-ca " + p.cert + " needs -tls-cert and -tls-key"},
		{"a client CA that holds a key", append(p.args(), "-tls-client-ca", p.key), nil, "the client CA " + p.key + `: a PEM block of type "PRIVATE KEY"`},
		{"an empty flag", []string{"-tls-cert", ""}, nil, "-tls-cert is empty: it needs a file (is a variable unset?)"},
		{"a variable set but empty", nil, map[string]string{"MEMBERSHIP_TLS_CERT": " ", "MEMBERSHIP_TLS_KEY": p.key},
			"MEMBERSHIP_TLS_CERT is set but empty: give it a file, or unset it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := func(name string) (string, bool) { v, ok := tt.env[name]; return v, ok }
			var logs bytes.Buffer
			err := run(context.Background(), append([]string{"-addr", "127.0.0.1:0"}, tt.args...), env, &logs, io.Discard)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, logs.String(), "listening", "refused before it listens")
		})
	}
}

// With -tls-client-ca, a client may present a certificate the CA signed;
// one without a certificate is served as before (its token is its
// credential), and one whose certificate does not verify is refused.
func TestProgramAsksForClientCertificates(t *testing.T) {
	p := newServicePKI(t)
	clients, err := tlstest.NewCA("clients' CA")
	require.NoError(t, err)
	caFile := filepath.Join(p.dir, "clients.pem")
	require.NoError(t, os.WriteFile(caFile, clients.CertPEM, 0o600))
	base, _, _ := startProgram(t, append(p.args(), "-tls-client-ca", caFile)...)

	signed, err := clients.Issue(tlstest.Options{CommonName: "sync-job", Client: true})
	require.NoError(t, err)
	status, _ := get(t, p.client(signed.TLS()), httpsOf(base)+"/healthz")
	assert.Equal(t, http.StatusOK, status, "a certificate the clients' CA signed")
	status, _ = get(t, p.client(), httpsOf(base)+"/healthz")
	assert.Equal(t, http.StatusOK, status, "no certificate")

	forged, err := p.ca.Issue(tlstest.Options{CommonName: "sync-job", Client: true}) // the service's CA, not the clients'
	require.NoError(t, err)
	forgedPair := forged.TLS()
	c := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.ca.Pool(),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &forgedPair, nil }}}}
	_, err = c.Get(httpsOf(base) + "/healthz")
	require.Error(t, err, "a certificate the clients' CA did not sign")
	assert.Contains(t, err.Error(), "certificate")
}

// SIGHUP loads the certificate again: the next handshake gets the new one,
// while a request in flight on a connection opened before goes on, and is
// answered on it. A failed load keeps the certificate served.
func TestProgramLoadsTheCertificateAgainOnSIGHUP(t *testing.T) {
	p := newServicePKI(t)
	proc := startProcess(t, p.args()...)
	addr := strings.TrimPrefix(proc.base, "http://")
	first := p.leaf

	poll := p.dial(addr) // a long poll of /changes, in flight across the reload
	_, err := io.WriteString(poll, "GET /changes?after=0&wait=60s HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	c := p.client()
	require.Eventually(t, func() bool {
		_, body := get(t, c, httpsOf(proc.base)+"/metrics")
		return strings.Contains(body, "\nmembership_changes_waiters 1\n")
	}, time.Minute, 10*time.Millisecond, "the poll waiting")

	second := p.rotate()
	require.NoError(t, proc.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return p.served(addr).Equal(second) }, time.Minute, 10*time.Millisecond,
		"the new certificate served after SIGHUP")

	resp, err := c.PostForm(httpsOf(proc.base)+"/group-user/reloaded", map[string][]string{"users": {"[7]"}})
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	reply, err := http.ReadResponse(bufio.NewReader(poll), nil)
	require.NoError(t, err, "the poll answered on its connection")
	body, _ := io.ReadAll(reply.Body)
	assert.Equal(t, http.StatusOK, reply.StatusCode)
	assert.Contains(t, string(body), `"group":"reloaded"`)
	assert.True(t, poll.ConnectionState().PeerCertificates[0].Equal(first), "with the certificate it started with")

	// A key that is not the certificate's: refused, logged, counted, and
	// the certificate served stays.
	require.NoError(t, os.WriteFile(p.key, mustKey(t, p), 0o600))
	require.NoError(t, proc.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool {
		_, body := get(t, c, httpsOf(proc.base)+"/metrics")
		return strings.Contains(body, "\nmembership_tls_reload_failures_total 1\n")
	}, time.Minute, 10*time.Millisecond, "the failed load counted")
	assert.True(t, p.served(addr).Equal(second))
	logsSay(t, proc.logs, `"msg":"could not load the TLS certificate again: serving the one loaded before","trigger":"hangup"`)
	assert.Contains(t, proc.logs.String(), "private key does not match public key")
	_, metrics := get(t, c, httpsOf(proc.base)+"/metrics")
	assert.Contains(t, metrics, "\nmembership_tls_reloads_total 1\n")
	assert.Contains(t, metrics, "\nmembership_tls_last_reload_successful 0\n")
}

// logsSay waits until logs hold what: the program writes its log every
// 100 ms.
func logsSay(t *testing.T, logs *syncBuffer, what string) {
	t.Helper()
	if !assert.Eventually(t, func() bool { return strings.Contains(logs.String(), what) }, time.Minute, 10*time.Millisecond) {
		t.Errorf("the log does not say %s:\n%s", what, logs.String())
	}
}

// mustKey returns a private key of p's CA's making that is not the one
// of the files.
func mustKey(t *testing.T, p *servicePKI) []byte {
	t.Helper()
	c, err := p.ca.Issue(tlstest.Options{})
	require.NoError(t, err)
	return c.KeyPEM
}

// A change of the files is loaded without a signal, within a few polls.
func TestProgramLoadsTheCertificateAgainWhenItsFilesChange(t *testing.T) {
	p := newServicePKI(t)
	base, _, logs := startProgram(t, p.args()...)
	addr := strings.TrimPrefix(base, "http://")

	second := p.rotate()
	require.Eventually(t, func() bool { return p.served(addr).Equal(second) }, time.Minute, 20*time.Millisecond,
		"the new certificate served, the files' change noticed")
	logsSay(t, logs, `"msg":"loaded the TLS certificate again","trigger":"the files changed"`)
}

// A client that stalls its handshake is closed once the handshake's
// deadline (the headers' timeout, 5 s) passes.
func TestAStalledHandshakeIsClosedOnADeadline(t *testing.T) {
	p := newServicePKI(t)
	base, _, _ := startProgram(t, p.args()...)
	hello, err := tlstest.ClientHello()
	require.NoError(t, err)
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write(hello[:len(hello)/2])
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(2*time.Minute))) // a bound on the test, not the deadline tested
	n, err := c.Read(make([]byte, 1))
	assert.Equal(t, 0, n)
	assert.ErrorIs(t, err, io.EOF, "closed by the service, not by the test's own deadline")
}

// A flood of connections that never finish their handshake is held to the
// connection budget, under a descriptor limit of 200: the longest stalled
// are closed to make room, every client that completes its handshake is
// served, probes are answered, and accept never runs out of descriptors.
func TestTLSHandshakeFloodStaysInTheBudget(t *testing.T) {
	const nofile = 200
	p := newServicePKI(t)
	proc := launchCmd(t, limitedCommand(nofile, p.args()...), true)
	addr := strings.TrimPrefix(proc.base, "http://")
	hello, err := tlstest.ClientHello()
	require.NoError(t, err)
	c := p.client()

	var stalled []net.Conn
	defer func() {
		for _, s := range stalled {
			_ = s.Close()
		}
	}()
	for i := range 400 {
		s, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		stalled = append(stalled, s)
		_, err = s.Write(hello[:len(hello)/2])
		require.NoError(t, err, "connection %d", i)
		if i%50 == 49 {
			status, _ := get(t, c, httpsOf(proc.base)+"/healthz")
			require.Equal(t, http.StatusOK, status, "a client among %d stalled handshakes", i+1)
			c.CloseIdleConnections() // the next asks on a new connection, into the flood
		}
	}
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-addr", addr, "-tls-cert", p.cert, "-probe", "/readyz"}, noEnv, &out, io.Discard))
	assert.Contains(t, out.String(), "200 OK")

	_, metrics := get(t, c, httpsOf(proc.base)+"/metrics")
	assert.Contains(t, metrics, `membership_connections_limit{listener="api"} 55`)
	assert.NotContains(t, metrics, `membership_connections_closed_idle_total{listener="api"} 0`+"\n", "stalled handshakes closed to make room")
	assert.Contains(t, metrics, `membership_connections_refused_total{listener="api"} 0`+"\n", "none refused: a stalled one was always there to close")
	assert.NotContains(t, proc.logs.String(), "too many open files")
}
