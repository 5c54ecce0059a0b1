package main

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sendAs sends a request with the Authorization header auth ("" for
// none) and returns its status and body.
func sendAs(t *testing.T, auth, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// The program names the principal that made each change, "token" for the
// service's token, in the feed, across a kill -9, and in the access log
// of every request that presented it; the token itself is in no line of
// the log, no metric and no reply.
func TestTheFeedAndTheLogNameThePrincipalNeverTheToken(t *testing.T) {
	const token = "tok-3b0a91c7e2d54f68-secret"
	bearer := "Bearer " + token
	dir := t.TempDir()
	env := []string{"MEMBERSHIP_TOKEN=" + token}
	p := startProcessEnv(t, env, "-data-dir", dir, "-auth-reads")
	status, _ := sendAs(t, bearer, "POST", p.base+"/group-user/g", "users=[1,2]&uid=42")
	require.Equal(t, http.StatusOK, status)
	status, _ = sendAs(t, bearer, "DELETE", p.base+"/user-group/2", "")
	require.Equal(t, http.StatusOK, status)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.cmd.Wait()
	assert.NotContains(t, p.logs.String(), token)

	p = startProcessEnv(t, env, "-data-dir", dir, "-auth-reads")
	status, feed := sendAs(t, bearer, "GET", p.base+"/changes", "")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, `[{"rev":1,"op":"add","time":"`+readmeTime+`","actor":42,"principal":"token","group":"g","uids":[1,2]},`+
		`{"rev":2,"op":"remove_user","time":"`+readmeTime+`","principal":"token","uids":[2]}]`, fixedTimes(feed),
		"the principals survive a kill -9")
	for _, auth := range []string{"", "Bearer not-" + token, token} {
		status, body := sendAs(t, auth, "POST", p.base+"/group-user/g", "users=[3]")
		require.Equal(t, http.StatusUnauthorized, status, auth)
		assert.NotContains(t, body, token)
	}
	status, _ = sendAs(t, bearer, "POST", p.base+"/group-user/g", "users=[4]")
	require.Equal(t, http.StatusOK, status)
	status, metrics := sendAs(t, bearer, "GET", p.base+"/metrics", "")
	require.Equal(t, http.StatusOK, status)
	assert.NotContains(t, metrics, token)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	_ = p.cmd.Wait()

	logs := p.logs.String()
	assert.NotContains(t, logs, token)
	var named, refused int
	for _, line := range strings.Split(logs, "\n") {
		switch {
		case strings.Contains(line, `"msg":"request"`) && strings.Contains(line, `"status":401`):
			refused++
			assert.NotContains(t, line, "principal", "a request refused for its credential has none")
		case strings.Contains(line, `"msg":"request"`):
			named++
			assert.Contains(t, line, `"principal":"token"`)
		}
	}
	assert.Equal(t, 3, refused)
	assert.Equal(t, 3, named, "the feed's read, the write and /metrics")
}
