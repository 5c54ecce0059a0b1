package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/tlstest"
	"example.com/groupmembership/postgres/internal/pgtest"
)

// Two instances on one database serve HTTPS from one certificate's files:
// a write to one over TLS is read from the other, and SIGHUP to one loads
// new files there.
func TestTwoInstancesServeTLS(t *testing.T) {
	ca, err := tlstest.NewCA("membership-postgres test CA")
	require.NoError(t, err)
	dir := t.TempDir()
	first, err := ca.Issue(tlstest.Options{})
	require.NoError(t, err)
	certFile, keyFile, err := first.WriteFiles(dir, "service")
	require.NoError(t, err)
	url := pgtest.NewDatabase(t)
	a := start(t, url, "-tls-cert", certFile, "-tls-key", keyFile)
	b := start(t, url, "-tls-cert", certFile, "-tls-key", keyFile)
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	https := func(p *instance) string { return "https://" + strings.TrimPrefix(p.base, "http://") }

	resp, err := c.Post(https(a)+"/group-user/tls", "application/x-www-form-urlencoded", strings.NewReader("users=[1,2]"))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	req, err := http.NewRequest("GET", https(b)+"/group-user/tls", nil)
	require.NoError(t, err)
	req.Header.Set("X-Min-Revision", resp.Header.Get("X-Revision"))
	resp, err = c.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.JSONEq(t, `[{"uid":1,"nickname":""},{"uid":2,"nickname":""}]`, string(body))

	second, err := ca.Issue(tlstest.Options{})
	require.NoError(t, err)
	_, _, err = second.WriteFiles(dir, "service")
	require.NoError(t, err)
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGHUP))
	served := func(p *instance) *x509.Certificate {
		conn, err := tls.Dial("tcp", strings.TrimPrefix(p.base, "http://"), &tls.Config{RootCAs: ca.Pool()})
		require.NoError(t, err)
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0]
	}
	require.Eventually(t, func() bool { return served(a).Equal(second.Leaf) }, time.Minute, 10*time.Millisecond, "the first loads the new certificate")
}
