package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/access"
	"example.com/groupmembership/internal/metrics/metricstest"
	"example.com/groupmembership/internal/tlstest"
)

// writeACL writes an ACL file at path, by a rename as an editor or a
// secret's update does, with a line for each principal of lines: "name
// token rights groups...", whose token it writes as its secret.
func writeACL(t *testing.T, path string, lines ...string) {
	t.Helper()
	var text strings.Builder
	text.WriteString("# name secret rights groups\n")
	for _, l := range lines {
		f := strings.Fields(l)
		secret := f[1]
		if secret != "mtls" {
			secret = access.HashToken(secret)
		}
		text.WriteString(f[0] + " " + secret + " " + strings.Join(f[2:], " ") + "\n")
	}
	require.NoError(t, os.WriteFile(path+".tmp", []byte(text.String()), 0o600))
	require.NoError(t, os.Rename(path+".tmp", path))
}

// loggedCount counts the log lines of logs whose message is msg.
func loggedCount(logs *syncBuffer, msg string) int {
	n := 0
	for _, line := range logs.Lines() {
		if strings.Contains(line, `"msg":"`+msg+`"`) {
			n++
		}
	}
	return n
}

func TestABadACLFileIsRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "acl")
	writeACL(t, path, "sync-job t1 read,rwx team-a/*")
	err := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-acl-file", path}, noEnv, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Equal(t, path+`:2: unknown right "rwx": the rights are read, write and admin, joined by commas`, err.Error())

	err = run(context.Background(), []string{"-addr", "127.0.0.1:0"}, func(name string) (string, bool) {
		return map[string]string{"MEMBERSHIP_ACL_FILE": filepath.Join(dir, "missing")}[name], name == "MEMBERSHIP_ACL_FILE"
	}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.ErrorIs(t, err, os.ErrNotExist, "MEMBERSHIP_ACL_FILE stands in for -acl-file")
}

// hash runs the program with -hash-token and stdin, and returns its
// stdout and stderr.
func hash(stdin string) (string, string, error) {
	cmd := exec.Command(os.Args[0], "-hash-token")
	cmd.Env = append(os.Environ(), "MEMBERSHIP_RUN_MAIN=1")
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func TestHashTokenPrintsTheSecretOfTheTokenOnStdin(t *testing.T) {
	out, _, err := hash("test\n")
	require.NoError(t, err)
	assert.Equal(t, "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n", out)
	out, _, err = hash("test")
	require.NoError(t, err)
	assert.Equal(t, access.HashToken("test")+"\n", out, "without a newline")

	_, stderr, err := hash("two words\n")
	require.Error(t, err)
	assert.Contains(t, stderr, `membership: the token on stdin has a character no HTTP header can carry after "Bearer " (' ' at byte 3)`)
	assert.NotContains(t, stderr, "words", "never a token in an error")
	_, stderr, err = hash("")
	require.Error(t, err)
	assert.Contains(t, stderr, "membership: the token on stdin is empty")
}

// TestPrincipalsRotateWithoutARestart runs the program with an ACL file
// and a token file, rotates a principal's token by SIGHUP and by a change
// of the file alone, and gives it a bad file: a rotated token stops at
// once, a bad file keeps the rules in force and is logged and counted,
// and no token ever reaches the log.
func TestPrincipalsRotateWithoutARestart(t *testing.T) {
	dir := t.TempDir()
	acl, tokenFile := filepath.Join(dir, "acl"), filepath.Join(dir, "token")
	writeACL(t, acl, "sync-job sync-token-1 read,write team-a/*", "dashboard dash-token-1 read *")
	require.NoError(t, os.WriteFile(tokenFile, []byte("admin-token-1\n"), 0o600))
	p := startProcess(t, "-acl-file", acl, "-token-file", tokenFile, "-auth-reads")
	tokens := []string{"sync-token-1", "sync-token-2", "sync-token-3", "dash-token-1", "admin-token-1"}

	status, body := sendAs(t, "Bearer sync-token-1", "POST", p.base+"/group-user/team-a%2Fx", "users=[1]")
	assert.Equal(t, http.StatusOK, status, body)
	status, body = sendAs(t, "Bearer sync-token-1", "POST", p.base+"/group-user/team-b", "users=[1]")
	assert.Equal(t, http.StatusForbidden, status)
	assert.JSONEq(t, `{"error":{"code":"forbidden","message":"principal \"sync-job\" lacks write on group \"team-b\""}}`, body)
	status, _ = sendAs(t, "Bearer dash-token-1", "GET", p.base+"/group-user/team-a%2Fx", "")
	assert.Equal(t, http.StatusOK, status)
	status, _ = sendAs(t, "Bearer admin-token-1", "GET", p.base+"/backup", "")
	assert.Equal(t, http.StatusOK, status, "the token of -token-file is an admin")

	// Rotation by SIGHUP (or by the change of the file, which the service
	// may notice first): the new token works from the next request, the
	// old one no longer.
	canRead := func(token string) func() bool {
		return func() bool {
			status, _ := sendAs(t, "Bearer "+token, "GET", p.base+"/group-user/team-a%2Fx", "")
			return status == http.StatusOK
		}
	}
	writeACL(t, acl, "sync-job sync-token-2 read,write team-a/*", "dashboard dash-token-1 read *")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, canRead("sync-token-2"), 30*time.Second, 20*time.Millisecond)
	status, _ = sendAs(t, "Bearer sync-token-1", "POST", p.base+"/group-user/team-a%2Fx", "users=[2]")
	assert.Equal(t, http.StatusUnauthorized, status, "the rotated token stopped at once")
	status, _ = sendAs(t, "Bearer sync-token-2", "POST", p.base+"/group-user/team-a%2Fx", "users=[2]")
	assert.Equal(t, http.StatusOK, status)

	// A bad file keeps the rules in force, and says why.
	require.NoError(t, os.WriteFile(acl, []byte("sync-job sync-token-3 read,write team-a/*\n"), 0o600))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool {
		return loggedCount(p.logs, "reloading the principals failed: the rules in force stay") >= 1
	},
		30*time.Second, 20*time.Millisecond)
	assert.Contains(t, p.logs.String(), acl+`:1: malformed secret: a secret is sha256: and 64 hex digits`)
	status, _ = sendAs(t, "Bearer sync-token-2", "POST", p.base+"/group-user/team-a%2Fx", "users=[3]")
	assert.Equal(t, http.StatusOK, status, "the rules in force stay")
	status, body = sendAs(t, "Bearer dash-token-1", "GET", p.base+"/metrics", "")
	require.Equal(t, http.StatusOK, status)
	families, err := metricstest.Parse(body)
	require.NoError(t, err)
	samples := map[string]float64{}
	for _, name := range []string{"membership_access_reloads_total", "membership_access_reload_failing", "membership_access_principals"} {
		require.Contains(t, families, name)
		for _, s := range families[name].Samples {
			samples[name+s.Labels["result"]] = s.Value
		}
	}
	assert.GreaterOrEqual(t, samples["membership_access_reloads_totalok"], 1.0)
	assert.GreaterOrEqual(t, samples["membership_access_reloads_totalfailed"], 1.0)
	assert.Equal(t, 1.0, samples["membership_access_reload_failing"])
	assert.Equal(t, 3.0, samples["membership_access_principals"])

	// A change of the file alone is noticed, within a few seconds.
	writeACL(t, acl, "sync-job sync-token-3 read,write team-a/*", "dashboard dash-token-1 read *")
	require.Eventually(t, canRead("sync-token-3"), 30*time.Second, 50*time.Millisecond, "the service looks at the file every 2 s")
	assert.Eventually(t, func() bool { return strings.Contains(p.logs.String(), `"on":"changed"`) }, 30*time.Second, 20*time.Millisecond,
		"the reload is logged as of a change")
	status, _ = sendAs(t, "Bearer sync-token-2", "POST", p.base+"/group-user/team-a%2Fx", "users=[4]")
	assert.Equal(t, http.StatusUnauthorized, status)

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	_ = p.cmd.Wait()
	out := p.logs.String()
	for _, token := range tokens {
		assert.NotContains(t, out, token, "never a token in the log")
	}
	assert.Contains(t, out, `"msg":"principals in force","principals":3`)
}

// hashTokenExample is the form of the documents' examples of -hash-token,
// which run in the test's process.
var hashTokenExample = regexp.MustCompile(`^printf '([^']*)' \| go run \. -hash-token$`)

// TestACLExamples runs the examples of docs/operating.md's console blocks
// marked acl, in order, with the real curl, against one fresh program
// started as the document says, with the ACL file it shows (its text block
// marked acl) and -auth-reads, and checks each prints what the document
// shows. An example of -hash-token runs the program so, its token on
// stdin.
func TestACLExamples(t *testing.T) {
	const doc = "docs/operating.md"
	text, err := os.ReadFile(doc)
	require.NoError(t, err)
	files := fencedBlocks(string(text))["text acl"]
	require.Len(t, files, 1, "the ACL file the examples run with")
	acl := filepath.Join(t.TempDir(), "acl")
	require.NoError(t, os.WriteFile(acl, []byte(files[0]), 0o600))
	assert.Contains(t, string(text), "`bin/membership -acl-file acl -auth-reads`", "the document says how the service runs")
	examples := fencedExamples(doc, string(text), "```console acl")
	require.NotEmpty(t, examples)
	_, err = exec.LookPath("curl")
	require.NoError(t, err, "the documents' examples run curl: install it (apt-get install curl)")

	base, _, _ := startProgram(t, "-acl-file", acl, "-auth-reads")
	var curls []readmeExample
	for _, ex := range examples {
		if m := hashTokenExample.FindStringSubmatch(ex.command); m != nil {
			out, stderr, err := hash(m[1])
			require.NoError(t, err, "%s: %s", ex.where(), stderr)
			assert.Equal(t, ex.output, out, "%s: $ %s", ex.where(), ex.command)
			continue
		}
		curls = append(curls, ex)
	}
	outputs := runInShell(t, curls, strings.TrimPrefix(base, "http://"))
	for i, ex := range curls {
		assert.Equal(t, ex.output, outputs[i], "%s: $ %s", ex.where(), ex.command)
	}
	assert.GreaterOrEqual(t, len(curls), 8, "the acl examples were not found")
}

// A client certificate of the clients' CA whose common name is a
// principal of mtls in the ACL file is that principal: over the real TLS
// listener, it writes its groups and no others; a certificate of another
// name is no principal, and a token sent beside a certificate decides.
func TestAClientCertificateIsItsPrincipal(t *testing.T) {
	p := newServicePKI(t)
	clients, err := tlstest.NewCA("clients' CA")
	require.NoError(t, err)
	caFile := filepath.Join(p.dir, "clients.pem")
	require.NoError(t, os.WriteFile(caFile, clients.CertPEM, 0o600))
	acl := filepath.Join(p.dir, "acl")
	writeACL(t, acl, "billing mtls write billing/*", "dashboard dash-token read *")
	base, _, _ := startProgram(t, append(p.args(), "-tls-client-ca", caFile, "-acl-file", acl)...)
	post := func(c *http.Client, token, group string) int {
		req, err := http.NewRequest("POST", httpsOf(base)+"/group-user/"+group, strings.NewReader("users=[1]"))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	billing, err := clients.Issue(tlstest.Options{CommonName: "billing", Client: true})
	require.NoError(t, err)
	stranger, err := clients.Issue(tlstest.Options{CommonName: "stranger", Client: true})
	require.NoError(t, err)
	asBilling := p.client(billing.TLS())

	assert.Equal(t, http.StatusOK, post(asBilling, "", "billing%2Feu"))
	assert.Equal(t, http.StatusForbidden, post(asBilling, "", "payroll"))
	assert.Equal(t, http.StatusUnauthorized, post(p.client(stranger.TLS()), "", "billing%2Feu"), "a name no principal of mtls has")
	assert.Equal(t, http.StatusUnauthorized, post(p.client(), "", "billing%2Feu"), "no certificate, no token")
	assert.Equal(t, http.StatusForbidden, post(asBilling, "dash-token", "billing%2Feu"), "the token decides: dashboard reads only")
}
