package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// adminOf returns the base URL of the admin listener the program logged.
func adminOf(t *testing.T, logs *syncBuffer) string {
	t.Helper()
	addr, _ := logged(t, logs, "listening for probes and metrics")["admin_addr"].(string)
	require.NotEmpty(t, addr, "the admin listener's address, logged")
	return "http://" + addr
}

// -pprof serves the runtime's profiles on the admin listener, and only
// there: the API's address answers them 404, and so does the admin
// listener without -pprof.
func TestPprofIsOnTheAdminListenerOnly(t *testing.T) {
	base, _, logs := startProgram(t, "-admin-addr", "127.0.0.1:0", "-pprof")
	admin := adminOf(t, logs)

	status, body := send(t, "GET", admin+"/debug/pprof/goroutine?debug=1", "")
	assert.Equal(t, 200, status)
	assert.Contains(t, body, "goroutine profile:")
	status, body = send(t, "GET", admin+"/debug/pprof/", "")
	assert.Equal(t, 200, status)
	assert.Contains(t, body, "heap")
	status, _ = send(t, "GET", admin+"/metrics", "")
	assert.Equal(t, 200, status, "the admin listener serves what it served")
	status, body = send(t, "GET", admin+"/group-user/g", "")
	assert.Equal(t, 404, status, "and nothing of the API")
	assert.Contains(t, body, `"code":"not_found"`)

	status, body = send(t, "GET", base+"/debug/pprof/goroutine?debug=1", "")
	assert.Equal(t, 404, status)
	assert.Contains(t, body, `"code":"not_found"`)

	_, _, logs = startProgram(t, "-admin-addr", "127.0.0.1:0")
	status, body = send(t, "GET", adminOf(t, logs)+"/debug/pprof/goroutine?debug=1", "")
	assert.Equal(t, 404, status, "without -pprof")
	assert.Contains(t, body, `"code":"not_found"`)
}
