package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/buildinfo"
)

// -version prints the build, and needs no database.
func TestVersionFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"-version"}, func(string) (string, bool) { return "", false }, &stdout, &stderr))
	assert.Equal(t, buildinfo.Read().Text("membership-postgres"), stdout.String())
	assert.Empty(t, stderr.String())
}

// make build-postgres stamps the binary with the commit it was built
// from, and git describe's version.
func TestMakeBuildPostgresStampsTheCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skip("not a git checkout: nothing to stamp")
	}
	describe, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
	require.NoError(t, err)
	goVersion, err := exec.Command("go", "env", "GOVERSION").Output()
	require.NoError(t, err)
	want := buildinfo.Info{Version: strings.TrimSpace(string(describe)), Revision: strings.TrimSpace(string(head)), GoVersion: strings.TrimSpace(string(goVersion))}

	dir := t.TempDir()
	out, err := exec.Command("make", "-s", "-C", "../../..", "build-postgres", "BIN="+dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	version, err := exec.Command(filepath.Join(dir, "membership-postgres"), "-version").Output()
	require.NoError(t, err)
	assert.Equal(t, want.Text("membership-postgres"), string(version))
}
