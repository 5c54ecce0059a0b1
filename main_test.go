package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/logtest"
	"example.com/groupmembership/internal/server"
)

// startProgram runs the real program on a free loopback port and returns its
// base URL, a function that stops it and returns run's error, and its log.
func startProgram(t *testing.T, extraArgs ...string) (baseURL string, stop func() error, logs *syncBuffer) {
	t.Helper()
	logs = &syncBuffer{}
	baseURL, stop = startProgramTo(t, logs, logs, extraArgs...)
	return baseURL, stop, logs
}

// startProgramTo is startProgram with stdout given: logs must see what it
// is written.
func startProgramTo(t *testing.T, stdout io.Writer, logs *syncBuffer, extraArgs ...string) (baseURL string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	args := append([]string{"-addr", "127.0.0.1:0", "-log-format", "json"}, extraArgs...)
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, noEnv, stdout, io.Discard) }()

	var addr string
	require.Eventually(t, func() bool {
		return readyAt(logs, &addr)
	}, 5*time.Second, 10*time.Millisecond, "the program never logged its address")

	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(20 * time.Second):
				// An error, not t.Fatal: stop may run off the test's
				// goroutine.
				runErr = errors.New("run did not return within 20s of the cancel")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return "http://" + addr, stop
}

// readyAt reports whether the program's log says it is ready, and sets addr
// to the address it listens on.
func readyAt(logs *syncBuffer, addr *string) bool {
	ready := false
	for _, line := range logs.Lines() {
		var entry struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &entry) != nil {
			continue
		}
		switch entry.Msg {
		case "listening":
			*addr = entry.Addr
		case "ready":
			ready = true
		}
	}
	return ready && *addr != ""
}

func send(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestProgramEndToEnd(t *testing.T) {
	base, stop, logs := startProgram(t)

	status, body := send(t, "POST", base+"/group-user/team", `users=[1,[2,"Bob"],{"uid":3,"nickname":"Cy"}]&uid=7`)
	assert.Equal(t, 200, status)
	assert.Equal(t, "3", body)

	status, body = send(t, "GET", base+"/group-user/team", "")
	assert.Equal(t, 200, status)
	assert.JSONEq(t, `[{"uid":1,"nickname":""},{"uid":2,"nickname":"Bob"},{"uid":3,"nickname":"Cy"}]`, body)

	status, body = send(t, "DELETE", base+"/group-user/team", `users=[2,4]`)
	assert.Equal(t, 200, status)
	assert.Equal(t, "1", body)

	status, body = send(t, "GET", base+"/group-user/team", "")
	assert.Equal(t, 200, status)
	assert.JSONEq(t, `[{"uid":1,"nickname":""},{"uid":3,"nickname":"Cy"}]`, body)

	status, body = send(t, "PATCH", base+"/group-user/team", "")
	assert.Equal(t, 405, status)
	assert.JSONEq(t, `{"error":{"code":"method_not_allowed","message":"method PATCH is not allowed on /group-user/team; allowed: GET, HEAD, POST, PUT, DELETE"}}`, body)

	status, _ = send(t, "GET", base+"/healthz", "")
	assert.Equal(t, 200, status)

	require.NoError(t, stop(), "a signal-driven shutdown is a clean exit")
	assert.Contains(t, logs.String(), `"msg":"stopped"`)
	assert.Contains(t, logs.String(), `"uid":7`, "the acting uid is in the access log")
}

// An ETag never names two lists: a restart without -data-dir starts the
// revisions again, with other lists behind them, in another epoch: without
// it, [{uid:1}] and then [{uid:2}] would both have ETag "1", and the first
// one's ETag would get 304 on the second.
func TestETagsDoNotRepeatAcrossARestart(t *testing.T) {
	get := func(base, ifNoneMatch string) (int, string, string) {
		req, err := http.NewRequest("GET", base+"/group-user/g", nil)
		require.NoError(t, err)
		if ifNoneMatch != "" {
			req.Header.Set("If-None-Match", ifNoneMatch)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, resp.Header.Get("ETag"), string(body)
	}
	base, stop, _ := startProgram(t)
	status, _ := send(t, "POST", base+"/group-user/g", "users=[1]")
	require.Equal(t, 200, status)
	_, before, _ := get(base, "")
	require.NoError(t, stop())

	base, _, _ = startProgram(t)
	status, _ = send(t, "POST", base+"/group-user/g", "users=[2]")
	require.Equal(t, 200, status)
	status, after, body := get(base, before)
	assert.Equal(t, 200, status, "the ETag of the list before the restart names another list")
	assert.JSONEq(t, `[{"uid":2,"nickname":""}]`, body)
	assert.NotEqual(t, before, after)
	status, _, _ = get(base, after)
	assert.Equal(t, 304, status)
}

func TestShutdownDrainsRequestsInFlight(t *testing.T) {
	base, stop, _ := startProgram(t)
	addr := strings.TrimPrefix(base, "http://")

	// Send the headers and half of the body, then stop the program while the
	// handler waits for the rest.
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	body := "users=[1,2,3]"
	_, err = io.WriteString(conn, "POST /group-user/g HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"+
		"Content-Length: 13\r\n\r\n"+body[:6])
	require.NoError(t, err)
	// The handler is running once the metrics count two requests in flight:
	// the POST and the scrape that asks.
	require.Eventually(t, func() bool {
		_, metrics := send(t, "GET", base+"/metrics", "")
		return strings.Contains(metrics, "\nmembership_http_requests_in_flight 2\n")
	}, 10*time.Second, time.Millisecond, "the POST never reached its handler")

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	// Shutdown has begun once the listener refuses connections.
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err != nil
	}, 10*time.Second, time.Millisecond, "the shutdown never closed the listener")
	select {
	case err := <-stopped:
		t.Fatalf("run returned (%v) while a request was in flight", err)
	default:
	}

	_, err = io.WriteString(conn, body[6:])
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "3", string(got), "the in-flight request completes")
	assert.NoError(t, <-stopped)
}

func TestRunFlags(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantErr    string // "" for success
		wantStderr string
	}{
		{"help", []string{"-h"}, "", "-max-users"},
		{"help names -max-depth", []string{"-h"}, "", "-max-depth int           deepest chain of groups in groups; a write past it is 409 (default 32)"},
		{"help names -max-ancestors", []string{"-h"}, "", "-max-ancestors int       most groups a group may be below; a write past it is 409 (default 256)"},
		{"unknown flag", []string{"-nope"}, "flag provided but not defined: -nope (membership -h lists the flags)", ""},
		{"a bad value", []string{"-max-body", "x"}, `invalid value "x" for flag -max-body`, ""},
		{"a port alone", []string{"-addr", "18011"}, "-addr 18011 is not host:port: did you mean :18011 (every interface) or 127.0.0.1:18011 (this machine only)?", ""},
		{"no port", []string{"-addr", "localhost"}, `-addr "localhost" is not host:port, such as :8080 or 127.0.0.1:8080`, ""},
		{"a port out of range", []string{"-addr", ":99999"}, `-addr ":99999": the port "99999" is not a number from 0 to 65535`, ""},
		{"a duration without a unit", []string{"-shutdown-timeout", "5"}, `invalid value "5" for flag -shutdown-timeout: parse error (a duration needs a unit, such as 5s or 500ms)`, ""},
		{"an empty -restore", []string{"-restore", "", "-data-dir", "unused"}, "-restore is empty: it needs a backup file (is a variable unset?)", ""},
		{"an empty -probe", []string{"-probe", ""}, "-probe is empty: it needs a URL (is a variable unset?)", ""},
		{"bad max-body", []string{"-max-body", "0"}, "-max-body must be positive", ""},
		{"bad max-users", []string{"-max-users", "-1"}, "-max-users must be positive", ""},
		{"bad list-cache", []string{"-list-cache", "-1"}, "-list-cache must be 0 or more", ""},
		{"max-depth 0", []string{"-max-depth", "0"}, "-max-depth must be from 1 to 1000, got 0", ""},
		{"max-depth past its bound", []string{"-max-depth", "1001"}, "-max-depth must be from 1 to 1000, got 1001", ""},
		{"max-ancestors 0", []string{"-max-ancestors", "0"}, "-max-ancestors must be from 1 to 1048576, got 0", ""},
		{"max-ancestors past its bound", []string{"-max-ancestors", "1048577"}, "-max-ancestors must be from 1 to 1048576, got 1048577", ""},
		{"bad shutdown-delay", []string{"-shutdown-delay", "-1s"}, "-shutdown-delay must not be negative", ""},
		{"bad changes-keep", []string{"-changes-keep", "-1"}, "-changes-keep must be 0 or more", ""},
		{"bad log format", []string{"-log-format", "xml"}, "-log-format must be text or json", ""},
		{"body memory below max body", []string{"-body-memory", "1000"}, "-body-memory must be at least -max-body", ""},
		{"bad reply-memory", []string{"-reply-memory", "0"}, "-reply-memory must be positive", ""},
		{"bad changes-reply-bytes", []string{"-changes-reply-bytes", "0"}, "-changes-reply-bytes must be positive", ""},
		{"bad changes-keep-bytes", []string{"-changes-keep-bytes", "-1"}, "-changes-keep-bytes must be positive", ""},
		{"bad commit-timeout", []string{"-commit-timeout", "0s"}, "-commit-timeout must be positive", ""},
		{"bad commit-queue-bytes", []string{"-commit-queue-bytes", "0"}, "-commit-queue-bytes must be positive", ""},
		{"bad log-buffer", []string{"-log-buffer", "0"}, "-log-buffer must be positive", ""},
		{"bad conn-send-buffer", []string{"-conn-send-buffer", "0"}, "-conn-send-buffer must be positive", ""},
		{"bad max-header", []string{"-max-header", "100"}, "-max-header must be at least 4096", ""},
		{"header memory below twice max-header", []string{"-max-header", "65536", "-header-memory", "100000"}, "-header-memory must be at least twice -max-header (131072: each header byte read counts twice), got 100000", ""},
		{"a change larger than a log record", []string{"-data-dir", "unused", "-max-body", "70000000", "-body-memory", "70000000", "-max-users", "300000"},
			"more than one log record holds", ""},
		{"-pprof without an admin address", []string{"-pprof"}, "-pprof needs -admin-addr (or MEMBERSHIP_ADMIN_ADDR)", ""},
		{"stray argument", []string{"serve"}, `unexpected argument "serve"`, ""},
		{"bad address", []string{"-addr", "256.0.0.1:80"}, "listen", ""},
		{"a port that is neither a number nor a service", []string{"-addr", "127.0.0.1:bad"}, `the port "bad" is not a number from 0 to 65535`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			err := run(context.Background(), tt.args, noEnv, io.Discard, &stderr)
			if tt.wantErr == "" {
				assert.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
			}
			assert.Contains(t, stderr.String(), tt.wantStderr)
			if tt.wantErr != "" {
				assert.Empty(t, stderr.String(), "the error is printed once, by main, without the usage")
			}
		})
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	var stderr bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-h"}, noEnv, io.Discard, &stderr))
	n := 0
	server.NewFlagSet(&server.Config{}, io.Discard).VisitAll(func(f *flag.Flag) {
		n++
		assert.Regexp(t, `(?m)^  -`+regexp.QuoteMeta(f.Name)+`( |$)`, stderr.String(), "-%s", f.Name)
	})
	assert.Greater(t, n, 20, "the flags were walked")
}

// -h is for a person: the four flags a first user needs first, then the
// rest in titled sections, each flag on one line of at most 100
// characters, and where every flag is explained in full.
func TestHelpIsForAPerson(t *testing.T) {
	var stderr bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-h"}, noEnv, io.Discard, &stderr))
	help := stderr.String()
	var flags []string
	for line := range strings.Lines(help) {
		line = strings.TrimSuffix(line, "\n")
		assert.LessOrEqual(t, len(line), 100, "a line longer than 100 characters: %q", line)
		if name, ok := strings.CutPrefix(line, "  -"); ok {
			name, _, _ = strings.Cut(name, " ")
			flags = append(flags, name)
		}
	}
	require.GreaterOrEqual(t, len(flags), 5, "%s", help)
	assert.Equal(t, []string{"addr", "data-dir", "token-file", "acl-file", "admin-addr"}, flags[:5], "the flags a first user needs come first")
	seen := map[string]bool{}
	for _, f := range flags {
		assert.False(t, seen[f], "-%s is listed twice", f)
		seen[f] = true
	}
	assert.NotContains(t, help, "\n    \t", "no flag's description on a line of its own")
	for _, title := range []string{"Limits and budgets:", "Durability (with -data-dir):", "The change feed (/changes):"} {
		assert.Contains(t, help, "\n\n"+title+"\n", "a section")
	}
	assert.Contains(t, help, "docs/operating.md#flags")
}

// syncBuffer collects a log written from several goroutines.
type syncBuffer = logtest.Buffer

// noEnv is an environment with no variable set.
func noEnv(string) (string, bool) { return "", false }

// A MEMBERSHIP_TOKEN that is set but blank is refused at start, naming
// it: it never turns auth off.
func TestABlankTokenVariableIsRefused(t *testing.T) {
	for _, value := range []string{"", " ", "\t\n"} {
		env := func(name string) (string, bool) {
			if name == "MEMBERSHIP_TOKEN" {
				return value, true
			}
			return "", false
		}
		err := run(context.Background(), []string{"-addr", "127.0.0.1:0"}, env, io.Discard, io.Discard)
		require.Error(t, err, "%q", value)
		assert.Equal(t, "MEMBERSHIP_TOKEN is set but blank: give it the token, or unset it to run without one", err.Error())
	}
}

func TestAuthReadsNeedsAToken(t *testing.T) {
	err := run(context.Background(), []string{"-auth-reads"}, noEnv, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-auth-reads needs a token")
}

func TestTheTokenNeverReachesTheLog(t *testing.T) {
	const token = "t0ken-that-must-not-leak"
	p := startProcess(t)
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	assert.Contains(t, p.logs.String(), "no token: anyone who can reach the service can change memberships",
		"without a token the service warns that writes are open")

	p = startProcessEnv(t, []string{"MEMBERSHIP_TOKEN=" + token})
	base, cmd, logs := p.base, p.cmd, p.logs
	for _, auth := range []string{"Bearer " + token, "Bearer not-" + token, token} {
		req, err := http.NewRequest("POST", base+"/group-user/g", strings.NewReader("users=[1]"))
		require.NoError(t, err)
		req.Header.Set("Authorization", auth)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		if auth == "Bearer "+token {
			assert.Equal(t, 200, resp.StatusCode)
		} else {
			assert.Equal(t, 401, resp.StatusCode)
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	_ = cmd.Wait()
	out := logs.String()
	assert.Contains(t, out, `"status":401`, "the requests were logged")
	assert.NotContains(t, out, token)
	assert.NotContains(t, out, "no token:")
}

func TestReadinessDuringShutdownDelay(t *testing.T) {
	// The delay is long so that the requests below surely fall within it,
	// however slow the machine (the test waits it out).
	base, stop, _ := startProgram(t, "-shutdown-delay", "5s")
	status, body := send(t, "GET", base+"/readyz", "")
	assert.Equal(t, 200, status)
	assert.JSONEq(t, `{"status":"ready"}`, body)

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	require.Eventually(t, func() bool {
		status, _ := send(t, "GET", base+"/readyz", "")
		return status == 503
	}, 5*time.Second, time.Millisecond, "/readyz turns 503 as soon as shutdown starts")
	status, _ = send(t, "GET", base+"/group-user/g", "")
	assert.Equal(t, 200, status, "requests are still served during the delay")
	status, _ = send(t, "GET", base+"/healthz", "")
	assert.Equal(t, 200, status, "liveness is not readiness")
	assert.NoError(t, <-stopped)
}

// stallingOutput passes writes to logs until one has carried the "ready"
// line, then blocks every write until release is closed: a stdout piped to
// a reader that stopped reading.
type stallingOutput struct {
	logs    *syncBuffer
	release chan struct{}
	stalled atomic.Bool
}

func (s *stallingOutput) Write(p []byte) (int, error) {
	if s.stalled.Load() {
		<-s.release
	}
	if bytes.Contains(p, []byte(`"msg":"ready"`)) {
		s.stalled.Store(true)
	}
	return s.logs.Write(p)
}

// A stdout that nobody reads must not freeze the service: requests, probes
// and the shutdown go on, the lines that do not fit are dropped and counted,
// and one warning says how many once stdout flows again.
func TestStalledStdoutFreezesNothing(t *testing.T) {
	logs := &syncBuffer{}
	out := &stallingOutput{logs: logs, release: make(chan struct{})}
	base, stop := startProgramTo(t, out, logs, "-log-buffer", "4096")
	var once sync.Once
	release := func() { once.Do(func() { close(out.release) }) }
	defer release()

	for range 200 { // 200 access-log lines: far more than 4 KiB
		status, _ := send(t, "GET", base+"/group-user/g", "")
		require.Equal(t, 200, status)
	}
	status, _ := send(t, "GET", base+"/healthz", "")
	assert.Equal(t, 200, status)
	status, _ = send(t, "GET", base+"/readyz", "")
	assert.Equal(t, 200, status)
	status, metrics := send(t, "GET", base+"/metrics", "")
	require.Equal(t, 200, status)
	assert.Regexp(t, `membership_memory_refused_total\{budget="log_buffer"\} [1-9]`, metrics, "drops are counted")

	assert.NoError(t, stop(), "the shutdown does not wait for stdout for ever")
	release() // stdout flows again
	assert.Eventually(t, func() bool { return strings.Contains(logs.String(), "log lines were dropped") }, 10*time.Second, time.Millisecond)
}

// The limits that are not budgets show in /metrics as set by their flags.
func TestMetricsShowTheConnectionLimits(t *testing.T) {
	base, _, _ := startProgram(t, "-max-header", "8192")
	status, body := send(t, "GET", base+"/metrics", "")
	require.Equal(t, 200, status)
	assert.Contains(t, body, "\nmembership_max_header_bytes 8192\n")
	assert.Contains(t, body, "\nmembership_conn_send_buffer_bytes 262144\n")
	assert.Contains(t, body, "\nmembership_connections{listener=\"api\"} ")
	assert.Contains(t, body, "\nmembership_changes_waiters_limit 1000\n")
	assert.Contains(t, body, "\nmembership_memory_limit_bytes{budget=\"request_headers\"} 33554432\n")
}

// -probe exits 0 when the URL answers 200 within a second, and 1 with the
// reason otherwise: a live service, a service that is not ready, nothing
// listening, a service that never answers.
func TestProbe(t *testing.T) {
	base, _, _ := startProgram(t)
	probeRun := func(url string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), []string{"-probe", url}, noEnv, &stdout, &stderr)
		return stdout.String() + stderr.String(), err
	}
	out, err := probeRun(base + "/readyz")
	require.NoError(t, err)
	assert.Equal(t, "probe "+base+"/readyz: 200 OK\n", out)

	_, err = probeRun(base + "/group-user/g/1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "404 Not Found")
	assert.Contains(t, err.Error(), `"code":"not_member"`, "the service's reason is in the message")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + ln.Addr().String() + "/readyz"
	require.NoError(t, ln.Close())
	_, err = probeRun(dead)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "connection refused")

	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer silent.Close()
	defer close(release)
	_, err = probeRun(silent.URL)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "context deadline exceeded")

	escapes := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "line one\nline two \x1b[31mred")
	}))
	defer escapes.Close()
	_, err = probeRun(escapes.URL + "/readyz")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "503 Service Unavailable: line one line two  [31mred", "no newline nor escape reaches the health log")
	_, err = probeRun(escapes.URL + "/moved")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "302 Found: redirected to /elsewhere (not followed)")

	_, err = probeRun("::not a url")
	require.Error(t, err)
}

// make test runs where cgo does not (no C compiler): without -race, saying
// so in one line. GOFLAGS=-run=^$ keeps it from running the
// tests again: only the fallback is under test.
func TestMakeTestRunsWithoutCgo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every package's tests")
	}
	cmd := exec.Command("make", "-s", "test")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-run=^$")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "make test: cgo is off (CGO_ENABLED=0), so the tests run without -race\ngo test -timeout 30m -json ./... | bin/testprogress\n")
	assert.NotContains(t, string(out), "-race -timeout")
}

// The service the root module builds (make run, the Docker image) depends
// on the standard library alone; PostgreSQL's driver lives in postgres/,
// a module of its own.
func TestTheServiceHasNoDependency(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.NotEmpty(t, deps)
	for _, dep := range deps {
		assert.True(t, dep == "example.com/groupmembership" || strings.HasPrefix(dep, "example.com/groupmembership/"), "the service depends on %s", dep)
	}
	assert.NotContains(t, deps, "example.com/groupmembership/postgres")
}
