//go:build unix

package server

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/access"
)

// recordsHandler sends each record logged to records.
type recordsHandler struct {
	slog.Handler
	records chan slog.Record
}

func (h recordsHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h recordsHandler) Handle(_ context.Context, r slog.Record) error {
	h.records <- r
	return nil
}

// attrsOf returns the attributes of r as text.
func attrsOf(r slog.Record) map[string]string {
	attrs := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	return attrs
}

// TestSIGHUPReloadsThePrincipals sends the process SIGHUP while no tick
// comes: the signal alone reloads, and a bad file is logged with its line
// and why, keeping the rules in force.
func TestSIGHUPReloadsThePrincipals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acl")
	write := func(text string) { require.NoError(t, os.WriteFile(path, []byte(text), 0o600)) }
	write("a " + access.HashToken("t1") + " read *\n")
	live, err := access.Open(access.Source{ACLFile: path})
	require.NoError(t, err)
	records := make(chan slog.Record)
	logger := slog.New(recordsHandler{Handler: slog.DiscardHandler, records: records})
	stop := watchAccess(context.Background(), live, nil, logger)
	defer stop()

	write("a " + access.HashToken("t2") + " read *\n")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	r := <-records
	assert.Equal(t, "reloaded the principals", r.Message)
	assert.Equal(t, map[string]string{"on": "signal", "principals": "1"}, attrsOf(r))
	assert.NotNil(t, live.Rules().ByToken("t2"))

	write("a " + access.HashToken("t3") + " read,bogus *\n")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	r = <-records
	assert.Equal(t, slog.LevelError, r.Level)
	assert.Equal(t, "reloading the principals failed: the rules in force stay", r.Message)
	assert.Equal(t, map[string]string{"on": "signal", "err": path + `:1: unknown right "bogus": the rights are read, write and admin, joined by commas`}, attrsOf(r))
	assert.NotNil(t, live.Rules().ByToken("t2"))
}
