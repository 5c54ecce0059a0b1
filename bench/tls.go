package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"

	"example.com/groupmembership/bench/loadtest"
	"example.com/groupmembership/internal/tlstest"
)

// The HTTPS rows run against twin services, the same binary and flags, one
// serving HTTP and one HTTPS (-tls-cert, an ECDSA P-256 certificate made
// for the run), each holding only the group the rows read: the cost of TLS
// alone, on a small request. The "new conns" rows send Connection: close,
// so that every request makes a new connection, a TLS handshake for HTTPS.
var tlsRows = []struct{ http, https, what string }{
	{"http POST 3 users", "https POST 3 users", "a connection kept alive"},
	{"http GET 10", "https GET 10", "a connection kept alive"},
	{"http GET 10 new conns", "https GET 10 new conns", "a new connection for each request"},
}

// tlsRowsRun reports whether -only selects one of the HTTPS rows.
func tlsRowsRun(opts options) bool {
	for _, r := range tlsRows {
		if opts.only == nil || opts.only.MatchString(r.http) || opts.only.MatchString(r.https) {
			return true
		}
	}
	return false
}

// startTLSTwins starts the twins and fills the group they read, when an
// HTTPS row is to run.
func (h *harness) startTLSTwins() error {
	if !tlsRowsRun(h.opts) {
		return nil
	}
	ca, err := tlstest.NewCA("bench CA")
	if err != nil {
		return err
	}
	cert, err := ca.Issue(tlstest.Options{})
	if err != nil {
		return err
	}
	certFile, keyFile, err := cert.WriteFiles(h.tmp, "https-twin")
	if err != nil {
		return err
	}
	trust(ca.Pool())
	var stop func()
	if h.httpTwin, _, stop, err = loadtest.StartService(h.svcBin, h.tmp, "http-twin", h.opts.serviceArgs); err != nil {
		return err
	}
	h.stops = append(h.stops, stop)
	if h.httpsTwin, _, stop, err = loadtest.StartService(h.svcBin, h.tmp, "https-twin",
		h.opts.serviceArgs+" -tls-cert "+filepath.ToSlash(certFile)+" -tls-key "+filepath.ToSlash(keyFile)); err != nil {
		return err
	}
	h.stops = append(h.stops, stop)
	uids := loadtest.RandomUIDs(rand.New(rand.NewPCG(3, 4)), 10, 1e9)
	for _, base := range []string{"http://" + h.httpTwin, "https://" + h.httpsTwin} {
		if err := loadtest.PostUsers(base, "list10", uids); err != nil {
			return fmt.Errorf("%s: %w", base, err)
		}
	}
	return nil
}

// trust makes the run's HTTP client trust roots, the CA of the HTTPS
// twin's certificate: the only https URL the run asks. (wrk checks no
// certificate.)
func trust(roots *x509.CertPool) {
	http.DefaultTransport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: roots}
}

// tlsScenarios are the HTTPS rows, each right after its HTTP twin's.
func (h *harness) tlsScenarios(wrk func(url, script string) func() (loadtest.Result, error),
	wrkClosing func(url string) func() (loadtest.Result, error)) []scenario {
	if h.httpTwin == "" {
		return nil
	}
	plain, secure := "http://"+h.httpTwin, "https://"+h.httpsTwin
	return []scenario{
		{"http POST 3 users", wrk(plain, h.luaPath)},
		{"https POST 3 users", wrk(secure, h.luaPath)},
		{"http GET 10", wrk(plain+"/group-user/list10", "")},
		{"https GET 10", wrk(secure+"/group-user/list10", "")},
		{"http GET 10 new conns", wrkClosing(plain + "/group-user/list10")},
		{"https GET 10 new conns", wrkClosing(secure + "/group-user/list10")},
	}
}
