//go:build unix

package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests that hold a load with a FIFO in place of DATA: only Unix has
// FIFOs.

// While its data loads, the program routes every request as it will once
// loaded: 404, 405 with Allow, /healthz and /openapi.json answer, and the
// routes that need the data answer 503 starting with Retry-After and
// X-Request-ID, logged and counted. A FIFO in place of
// DATA holds the load: reading it waits until the test writes it.
func TestTheBinaryRoutesWhileItsDataLoads(t *testing.T) {
	p, finishLoad := holdTheLoad(t)
	tests := []struct {
		method, path string
		wantStatus   int
		wantCode     string
	}{
		{"GET", "/group-user/g", 503, "starting"},
		{"POST", "/group-user/g", 503, "starting"},
		{"GET", "/user-group/1", 503, "starting"},
		{"GET", "/changes", 503, "starting"},
		{"GET", "/readyz", 503, "starting"},
		{"PATCH", "/group-user/g", 405, "method_not_allowed"},
		{"GET", "/nowhere", 404, "not_found"},
		{"GET", "/healthz", 200, ""},
		{"GET", "/openapi.json", 200, ""},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, p.base+tt.path, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, tt.wantStatus, resp.StatusCode, "%s %s: %s", tt.method, tt.path, body)
		assert.NotEmpty(t, resp.Header.Get("X-Request-ID"), "%s %s", tt.method, tt.path)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), "%s %s", tt.method, tt.path)
		if tt.wantCode != "" {
			assert.Contains(t, string(body), `"code":"`+tt.wantCode+`"`, "%s %s", tt.method, tt.path)
		}
		if tt.wantStatus == 503 {
			assert.Equal(t, "1", resp.Header.Get("Retry-After"), "%s %s", tt.method, tt.path)
		}
	}
	status, metrics := send(t, "GET", p.base+"/metrics", "")
	require.Equal(t, 200, status)
	assert.Contains(t, metrics, `membership_http_requests_total{route="/group-user/{groupID}",method="POST",status="503"} 1`)
	assert.Contains(t, metrics, "\nmembership_store_writable 0\n")
	require.Eventually(t, func() bool { // the log is written behind a buffer
		return strings.Contains(p.logs.String(), `"method":"GET","path":"/changes","status":503`)
	}, 10*time.Second, time.Millisecond, "the 503 starting is logged")
	assert.NotContains(t, p.logs.String(), `"msg":"ready"`, "the load was held all along")

	finishLoad()
	require.Eventually(t, func() bool {
		var addr string
		return readyAt(p.logs, &addr)
	}, 30*time.Second, 5*time.Millisecond, "the program never got ready; its output:\n%s", p.logs.String())
	assert.Equal(t, map[int64]bool{1: true, 2: true}, members(t, p.base, "g"))
	status, _ = send(t, "GET", p.base+"/readyz", "")
	assert.Equal(t, 200, status)
	status, metrics = send(t, "GET", p.base+"/metrics", "")
	require.Equal(t, 200, status)
	assert.Contains(t, metrics, `membership_http_requests_total{route="/group-user/{groupID}",method="POST",status="503"} 1`, "kept once loaded")
	assert.Contains(t, metrics, "\nmembership_store_writable 1\n")
}

// holdTheLoad starts the program on a data directory whose DATA is a FIFO,
// so that its load waits; finishLoad writes DATA's content into the FIFO.
func holdTheLoad(t *testing.T) (p *process, finishLoad func()) {
	t.Helper()
	dir := t.TempDir()
	p = startProcess(t, "-data-dir", dir)
	require.True(t, change(p.base, "POST", "g", 1, 2))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.cmd.Wait())
	dataPath := filepath.Join(dir, "DATA")
	data, err := os.ReadFile(dataPath)
	require.NoError(t, err)
	require.NoError(t, os.Remove(dataPath))
	require.NoError(t, syscall.Mkfifo(dataPath, 0o600))

	p = launch(t, nil, false, "-data-dir", dir)
	return p, func() {
		// Open without blocking, once the program has it open to read: a
		// blocking open would wait for good if the program never read DATA.
		var fifo *os.File
		require.Eventually(t, func() bool {
			fd, err := syscall.Open(dataPath, syscall.O_WRONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				return false // ENXIO: no reader yet
			}
			fifo = os.NewFile(uintptr(fd), dataPath)
			return true
		}, 30*time.Second, 5*time.Millisecond, "the program never opened DATA; its output:\n%s", p.logs.String())
		_, err = fifo.Write(data)
		require.NoError(t, err)
		require.NoError(t, fifo.Close())
	}
}

// A signal while the data loads is heard and said so; the service stops
// once the data is loaded, cleanly.
func TestASignalWhileTheDataLoads(t *testing.T) {
	p, finishLoad := holdTheLoad(t)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Eventually(t, func() bool { return strings.Contains(p.logs.String(), "told to stop while the data loads") },
		10*time.Second, time.Millisecond, "the signal was not heard; output:\n%s", p.logs.String())
	finishLoad()
	state := waitExit(t, p, 30*time.Second)
	assert.Equal(t, 0, state.ExitCode(), p.logs.String())
	assert.Contains(t, p.logs.String(), "stopped")
}
