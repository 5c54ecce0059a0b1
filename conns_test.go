package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// limitedCommand is the program under a limit of nofile open descriptors,
// set with the shell's ulimit -n, as an operator or a container sets it.
func limitedCommand(nofile int, args ...string) *exec.Cmd {
	script := "ulimit -n " + strconv.Itoa(nofile) + ` && exec "$@"`
	args = append([]string{"-c", script, "sh", os.Args[0], "-addr", "127.0.0.1:0", "-log-format", "json"}, args...)
	cmd := exec.Command("sh", args...)
	cmd.Env = append(os.Environ(), "MEMBERSHIP_RUN_MAIN=1")
	return cmd
}

// logged returns the first line of logs whose msg is msg, decoded.
func logged(t *testing.T, logs *syncBuffer, msg string) map[string]any {
	t.Helper()
	for _, line := range logs.Lines() {
		var entry map[string]any
		if json.Unmarshal([]byte(line), &entry) == nil && entry["msg"] == msg {
			return entry
		}
	}
	require.FailNow(t, "no log line "+msg, logs.String())
	return nil
}

// The reserve the service keeps for itself with the default flags, memory
// only: its own 16, the 64 idle connections it may be closing to make room,
// and the 64 + 1 it may be refusing.
const reservedDescriptors = 16 + 64 + 64 + 1

// TestConnectionBudgetFollowsTheDescriptorLimit starts the program with a
// limit of 200 descriptors, then holds 300 idle keep-alive connections: the
// budget is the limit less the reserve, the longest idle connections are
// closed to make room, every request is answered, and accept never runs out
// of descriptors.
func TestConnectionBudgetFollowsTheDescriptorLimit(t *testing.T) {
	const nofile = 200
	p := launchCmd(t, limitedCommand(nofile), true)
	budget := logged(t, p.logs, "connection budget")
	assert.Equal(t, float64(nofile-reservedDescriptors), budget["max_conns"])
	assert.Equal(t, float64(nofile), budget["descriptor_limit"])
	assert.Equal(t, float64(reservedDescriptors), budget["reserved_descriptors"])

	addr := strings.TrimPrefix(p.base, "http://")
	var held []net.Conn
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	for i := range 300 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		held = append(held, c)
		_, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err, "connection %d", i)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "connection %d", i)
	}
	status, body := send(t, "GET", p.base+"/metrics", "")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `membership_connections_limit{listener="api"} 55`)
	assert.NotContains(t, body, `membership_connections_closed_idle_total{listener="api"} 0`+"\n", "idle connections were closed to make room")
	assert.Contains(t, body, `membership_connections_refused_total{listener="api"} 0`+"\n", "none refused: there was always an idle one")
	assert.NotContains(t, p.logs.String(), "too many open files")
}

// TestConnectionPastTheBudgetGets503 holds every connection of the budget
// busy (a request's headers half sent): the next one is answered 503, at
// once, and probes answer again once a connection is free.
func TestConnectionPastTheBudgetGets503(t *testing.T) {
	p := startProcess(t, "-max-conns", "16")
	addr := strings.TrimPrefix(p.base, "http://")
	var busy []net.Conn
	for range 16 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\n")
		require.NoError(t, err)
		busy = append(busy, c)
	}
	require.Eventually(t, func() bool {
		resp, err := client.Get(p.base + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusServiceUnavailable && resp.Close &&
			strings.Contains(string(body), `"the service holds 16 connections at most (-max-conns), none of them idle: try again shortly"`)
	}, 10e9, 1e6, "a connection past the budget gets 503, Connection: close")

	require.NoError(t, busy[0].Close())
	require.Eventually(t, func() bool {
		resp, err := client.Get(p.base + "/healthz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10e9, 1e6, "a freed place takes a new connection")
}

func TestDescriptorLimitTooLowIsRefusedAtStart(t *testing.T) {
	for _, tt := range []struct {
		name    string
		nofile  int
		args    []string
		wantErr string
	}{
		{"too few for any connection", 150, nil,
			"the limit of open descriptors is 150 (ulimit -n): the service keeps 145 for itself and needs 16 more at least for connections; raise the limit"},
		{"-max-conns over the limit", 200, []string{"-max-conns", "100"},
			"-max-conns 100 needs 245 descriptors with the 145 the service keeps for itself, over the limit of open descriptors, 200 (ulimit -n): lower -max-conns to 55 at most, or raise the limit"},
		{"a data directory keeps more", 200, []string{"-max-conns", "55", "-data-dir", "DIR"},
			"-max-conns 55 needs 206 descriptors with the 151 the service keeps"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			for i, a := range args {
				if a == "DIR" {
					args[i] = t.TempDir()
				}
			}
			out, err := limitedCommand(tt.nofile, args...).CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "%s", out)
			assert.Equal(t, 1, exit.ExitCode())
			assert.Contains(t, string(out), tt.wantErr)
			assert.NotContains(t, string(out), "listening", "refused before it listens")
		})
	}
}

// TestAdminAddressServesProbesAndMetricsAlone starts the program with an
// admin listener: it serves /healthz, /readyz and /metrics, and nothing
// else; -probe with a path alone asks it, found in MEMBERSHIP_ADMIN_ADDR.
func TestAdminAddressServesProbesAndMetricsAlone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	adminAddr := ln.Addr().String()
	require.NoError(t, ln.Close()) // a free port, for the program to take
	p := startProcess(t, "-admin-addr", adminAddr)
	admin := "http://" + adminAddr
	assert.Equal(t, adminAddr, logged(t, p.logs, "listening for probes and metrics")["admin_addr"])

	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		status, _ := send(t, "GET", admin+path, "")
		assert.Equal(t, http.StatusOK, status, path)
	}
	status, body := send(t, "GET", admin+"/group-user/g", "")
	assert.Equal(t, http.StatusNotFound, status)
	assert.JSONEq(t, `{"error":{"code":"not_found","message":"the admin address serves /healthz, /readyz and /metrics only: the API is on the other address"}}`, body)
	status, _ = send(t, "GET", p.base+"/group-user/g", "")
	assert.Equal(t, http.StatusOK, status, "the API is on -addr")
	_, metrics := send(t, "GET", admin+"/metrics", "")
	assert.Contains(t, metrics, `membership_connections_limit{listener="admin"} 16`)

	probe := exec.Command(os.Args[0], "-probe", "/readyz")
	probe.Env = append(os.Environ(), "MEMBERSHIP_RUN_MAIN=1", "MEMBERSHIP_ADMIN_ADDR="+adminAddr)
	out, err := probe.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "probe "+admin+"/readyz: 200 OK\n", string(out))
}

func TestAdminAddressMustBeItsOwn(t *testing.T) {
	err := run(t.Context(), []string{"-addr", "127.0.0.1:18080", "-admin-addr", "127.0.0.1:18080"}, func(string) string { return "" }, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `-admin-addr "127.0.0.1:18080" is -addr too`)
	err = run(t.Context(), nil, func(k string) string { return map[string]string{"MEMBERSHIP_ADMIN_ADDR": "9090"}[k] }, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "MEMBERSHIP_ADMIN_ADDR: -admin-addr 9090 is not host:port: did you mean :9090")
}
