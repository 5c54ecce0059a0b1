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

	"example.com/groupmembership/internal/access"
	"example.com/groupmembership/postgres/internal/pgtest"
)

// writeACL writes the ACL file at path, by a rename, with a line for each
// principal of lines, "name token rights groups...".
func writeACL(t *testing.T, path string, lines ...string) {
	t.Helper()
	var text strings.Builder
	for _, l := range lines {
		f := strings.Fields(l)
		text.WriteString(f[0] + " " + access.HashToken(f[1]) + " " + strings.Join(f[2:], " ") + "\n")
	}
	require.NoError(t, os.WriteFile(path+".tmp", []byte(text.String()), 0o600))
	require.NoError(t, os.Rename(path+".tmp", path))
}

// sendAs sends a request with token as its bearer token and returns its
// status and body.
func sendAs(t *testing.T, token, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// Two instances on one database, each reading the same ACL file (from
// MEMBERSHIP_ACL_FILE): each holds a principal to its groups, and each,
// told by SIGHUP, stops a rotated token.
func TestTwoInstancesHoldOneACLFile(t *testing.T) {
	url := pgtest.NewDatabase(t)
	acl := filepath.Join(t.TempDir(), "acl")
	writeACL(t, acl, "sync-job sync-1 write team-a/*", "dashboard dash-1 read *")
	t.Setenv("MEMBERSHIP_ACL_FILE", acl)
	a, b := start(t, url, "-auth-reads"), start(t, url, "-auth-reads")

	status, body := sendAs(t, "sync-1", "POST", a.base+"/group-user/team-a%2Fx", "users=[1]")
	require.Equal(t, http.StatusOK, status, body)
	status, body = sendAs(t, "sync-1", "POST", b.base+"/group-user/team-b", "users=[1]")
	assert.Equal(t, http.StatusForbidden, status)
	assert.JSONEq(t, `{"error":{"code":"forbidden","message":"principal \"sync-job\" lacks write on group \"team-b\""}}`, body)
	status, _ = sendAs(t, "sync-1", "GET", b.base+"/changes", "")
	assert.Equal(t, http.StatusForbidden, status, "the feed needs read on *")
	require.Eventually(t, func() bool {
		status, body := sendAs(t, "dash-1", "GET", b.base+"/group-user/team-a%2Fx", "")
		return status == http.StatusOK && strings.Contains(body, `"uid":1`)
	}, time.Minute, 20*time.Millisecond, "the other instance applies the write")

	writeACL(t, acl, "sync-job sync-2 write team-a/*", "dashboard dash-1 read *")
	for _, p := range []*instance{a, b} {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	}
	for _, p := range []*instance{a, b} {
		require.Eventually(t, func() bool {
			status, _ := sendAs(t, "sync-2", "GET", p.base+"/group-user/team-a%2Fx", "")
			return status == http.StatusOK
		}, time.Minute, 20*time.Millisecond)
		status, _ = sendAs(t, "sync-1", "POST", p.base+"/group-user/team-a%2Fx", "users=[2]")
		assert.Equal(t, http.StatusUnauthorized, status, "the rotated token stopped")
		assert.NotContains(t, p.logs.String(), "sync-1")
	}
}
