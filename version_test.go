package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/buildinfo"
)

// buildInfoLine is the sample of membership_build_info for info.
func buildInfoLine(info buildinfo.Info) string {
	return fmt.Sprintf("\nmembership_build_info{version=%q,revision=%q,goversion=%q} 1\n", info.Version, info.Revision, info.GoVersion)
}

// -version prints the build's version, revision and Go version to stdout,
// and serves nothing.
func TestVersionFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-version"}, noEnv, &stdout, &stderr))
	assert.Equal(t, buildinfo.Read().Text("membership"), stdout.String())
	assert.Empty(t, stderr.String())
}

// The start log and /metrics name the build.
func TestTheBuildIsInTheStartLogAndMetrics(t *testing.T) {
	info := buildinfo.Read()
	base, _, logs := startProgram(t)
	start := logged(t, logs, "starting")
	assert.Equal(t, info.Version, start["version"])
	assert.Equal(t, info.Revision, start["revision"])
	assert.Equal(t, info.GoVersion, start["goversion"])
	status, body := send(t, "GET", base+"/metrics", "")
	require.Equal(t, 200, status)
	assert.Contains(t, body, buildInfoLine(info))
}

// make build stamps the binary with the commit it was built from, and git
// describe's version: -version, the start log and /metrics name them,
// where go build alone cannot read the commit (a git worktree, or a
// build without VCS information).
func TestMakeBuildStampsTheCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skip("not a git checkout: nothing to stamp")
	}
	describe, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
	require.NoError(t, err)
	want := buildinfo.Info{Version: strings.TrimSpace(string(describe)), Revision: strings.TrimSpace(string(head)), GoVersion: goVersion(t)}

	dir := t.TempDir()
	out, err := exec.Command("make", "-s", "build", "BIN="+dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	bin := filepath.Join(dir, "membership")
	version, err := exec.Command(bin, "-version").Output()
	require.NoError(t, err)
	assert.Equal(t, want.Text("membership"), string(version))

	p := launchCmd(t, exec.Command(bin, "-addr", "127.0.0.1:0", "-log-format", "json"), true)
	assert.Equal(t, want.Revision, logged(t, p.logs, "starting")["revision"])
	status, body := send(t, "GET", p.base+"/metrics", "")
	require.Equal(t, 200, status)
	assert.Contains(t, body, buildInfoLine(want))
}

// goVersion returns the version of the go command, which builds the binary.
func goVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}
