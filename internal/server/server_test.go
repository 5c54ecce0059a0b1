package server

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTokenFromEnvironmentOrFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(file, []byte("  from-file\n"), 0o600))
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	twoLines := filepath.Join(t.TempDir(), "two-lines")
	require.NoError(t, os.WriteFile(twoLines, []byte("first\nsecond\n"), 0o600))
	env := func(v string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			if k == "MEMBERSHIP_TOKEN" {
				return v, true
			}
			return "", false
		}
	}
	unset := func(string) (string, bool) { return "", false }
	tests := []struct {
		name      string
		tokenFile string
		lookupenv func(string) (string, bool)
		want      string
		wantErr   string
	}{
		{"none", "", unset, "", ""},
		{"the variable set but empty", "", env(""), "", "MEMBERSHIP_TOKEN is set but blank"},
		{"the variable set to spaces", "", env(" \t\n"), "", "MEMBERSHIP_TOKEN is set but blank"},
		{"a file wins over a blank variable", file, env(" "), "from-file", ""},
		{"environment", "", env(" from-env "), "from-env", ""},
		{"file wins over environment", file, env("from-env"), "from-file", ""},
		{"empty file", empty, unset, "", "is empty"},
		{"missing file", filepath.Join(t.TempDir(), "nope"), unset, "", "reading the token"},
		{"a newline inside the token", twoLines, unset, "", `no HTTP header can carry after "Bearer " ('\n' at byte 5)`},
		{"a space inside the token", "", env("two words"), "", "no HTTP header can carry"},
		{"a control character", "", env("x\x01y"), "", "no HTTP header can carry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live, err := openAccess(Config{tokenFile: tt.tokenFile}, tt.lookupenv)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			if tt.want == "" {
				assert.Nil(t, live, "no token: no principal")
				return
			}
			require.NotNil(t, live)
			p := live.Rules().ByToken(tt.want)
			require.NotNil(t, p, "the token is %q", tt.want)
			assert.Equal(t, "token", p.Name)
			assert.Equal(t, 1, live.Rules().Len())
		})
	}
}

// The service collects garbage at gcPercent, unless GOGC is set.
func TestSetGCPercentLeavesGOGCToTheUser(t *testing.T) {
	old := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(old) })

	setGCPercent(func(string) string { return "" })
	assert.Equal(t, gcPercent, debug.SetGCPercent(100), "without GOGC")

	setGCPercent(func(name string) string { return map[string]string{"GOGC": "200"}[name] })
	assert.Equal(t, 100, debug.SetGCPercent(100), "GOGC set: left as it was")
}

// A backend may have no flags of its own: -h still lists the service's.
func TestBackendWithoutFlagsOfItsOwn(t *testing.T) {
	b := &Backend{Name: "flagless", About: "It keeps nothing."}
	var stdout, stderr strings.Builder
	err := RunBackend(context.Background(), b, []string{"-h"}, func(string) (string, bool) { return "", false }, &stdout, &stderr)
	require.NoError(t, err)
	assert.Contains(t, stderr.String(), "Usage: flagless [flags]")
	assert.Contains(t, stderr.String(), "It keeps nothing.")
	assert.Contains(t, stderr.String(), "-addr")
}

// An embedded service refuses the flags of what it has not got.
func TestEmbeddedRefusesTheProgramsModes(t *testing.T) {
	for _, args := range [][]string{{"-version"}, {"-pprof"}, {"-probe", "/readyz"}, {"-data-dir", t.TempDir()},
		{"-tls-cert", "service.crt"}, {"-tls-key", "service.key"}, {"-tls-client-ca", "clients.pem"}} {
		_, err := NewEmbedded(EmbeddedOptions{Args: args})
		require.Error(t, err, "%q", args)
		assert.Contains(t, err.Error(), args[0]+": an embedded service has none", "%q", args)
	}
}

// Every flag has its place in a section of -h, so that none falls to the
// end unordered.
func TestEveryFlagHasASection(t *testing.T) {
	placed := map[string]bool{}
	for _, s := range flagSections {
		for _, name := range s.flags {
			assert.False(t, placed[name], "-%s is in two sections", name)
			placed[name] = true
		}
	}
	NewFlagSet(&Config{}, io.Discard).VisitAll(func(f *flag.Flag) {
		assert.True(t, placed[f.Name], "-%s is in no section of flagSections", f.Name)
	})
}
