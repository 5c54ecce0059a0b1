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
	"time"

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
// busy (a long poll of /changes, parked for a minute): the next one is
// answered 503, at once, and probes answer again once a connection is free.
func TestConnectionPastTheBudgetGets503(t *testing.T) {
	// The admin listener on a port of the kernel's choosing, read from
	// the log: a port found free beforehand can be taken meanwhile by any
	// connection of the tests running beside this one.
	p := startProcess(t, "-max-conns", "16", "-admin-addr", "127.0.0.1:0")
	admin := "http://" + adminAddr(t, p)
	addr := strings.TrimPrefix(p.base, "http://")
	var busy []net.Conn
	for range 16 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "GET /changes?after=0&wait=60s HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		busy = append(busy, c)
	}
	require.Eventually(t, func() bool {
		_, body := getOnce(t, admin+"/metrics")
		return strings.Contains(body, "\nmembership_changes_waiters 16\n")
	}, 30*time.Second, time.Millisecond, "16 polls parked, seen on the admin address")

	status, body := getOnce(t, p.base+"/healthz")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Contains(t, body, `"the service holds 16 connections at most (-max-conns), none of them idle: try again shortly"}} (Connection: close)`)
	status, _ = getOnce(t, admin+"/healthz")
	assert.Equal(t, http.StatusOK, status, "the admin address has connections of its own")

	require.NoError(t, busy[0].Close())
	require.Eventually(t, func() bool {
		status, _ := getOnce(t, p.base+"/healthz")
		return status == http.StatusOK
	}, 30*time.Second, time.Millisecond, "a freed place takes a new connection")
}

// getOnce GETs url on a new connection of its own, and returns the status
// and the body, with " (Connection: close)" when the reply says so.
func getOnce(t *testing.T, url string) (int, string) {
	t.Helper()
	host, path, _ := strings.Cut(strings.TrimPrefix(url, "http://"), "/")
	c, err := net.DialTimeout("tcp", host, 10*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(c, "GET /"+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if resp.Close { // the reply said Connection: close (the request did not ask it)
		body = append(body, " (Connection: close)"...)
	}
	return resp.StatusCode, string(body)
}

// adminAddr returns the address p's admin listener logged. The line comes
// before "ready", which startProcess waits for.
func adminAddr(t *testing.T, p *process) string {
	t.Helper()
	addr, _ := logged(t, p.logs, "listening for probes and metrics")["admin_addr"].(string)
	require.NotEmpty(t, addr, "the admin listener's address, logged")
	return addr
}
