package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/logtest"
	"example.com/groupmembership/postgres/internal/pgtest"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binDir    string
	bin       string
	buildErr  error
)

// binary builds the command, as the Dockerfile does, once for the tests.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "membership-postgres-test-"); buildErr != nil {
			return
		}
		bin = filepath.Join(binDir, "membership-postgres")
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return bin
}

// instance is the command running as a process.
type instance struct {
	cmd  *exec.Cmd
	logs *logtest.Buffer
	base string
}

// start starts an instance on the database at url and waits until it is
// ready.
func start(t *testing.T, url string, args ...string) *instance {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"-addr", "127.0.0.1:0", "-log-format", "json", "-access-log=false"}, args...)...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+url)
	logs := &logtest.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	p := &instance{cmd: cmd, logs: logs}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool {
		var ready bool
		for _, line := range logs.Lines() {
			var entry struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &entry) == nil {
				switch entry.Msg {
				case "listening":
					p.base = "http://" + entry.Addr
				case "ready":
					ready = true
				}
			}
		}
		return ready && p.base != ""
	}, time.Minute, 20*time.Millisecond, "the instance never got ready; its output:\n%s", logs.String())
	return p
}

var client = &http.Client{Timeout: 10 * time.Second}

// add posts uid to group, and returns the revision acknowledged, 0 when
// the add was not acknowledged.
func add(base, group string, uid int64) int64 {
	resp, err := client.Post(base+"/group-user/"+group, "application/x-www-form-urlencoded", strings.NewReader(fmt.Sprintf("users=[%d]", uid)))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		return 0
	}
	rev, _ := strconv.ParseInt(resp.Header.Get("X-Revision"), 10, 64)
	return rev
}

// list returns the members of group, read with X-Min-Revision atLeast, and
// the reply's ETag.
func list(t *testing.T, base, group string, atLeast int64) ([]int64, string) {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/group-user/"+group, nil)
	require.NoError(t, err)
	req.Header.Set("X-Min-Revision", strconv.FormatInt(atLeast, 10))
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var members []struct{ UID int64 }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&members))
	uids := make([]int64, len(members))
	for i, m := range members {
		uids[i] = m.UID
	}
	return uids, resp.Header.Get("ETag")
}

// Two instances on one database under concurrent writers, one of them
// killed with SIGKILL mid-load: no acknowledged change is lost, and once
// it is back, every list agrees across the instances, ETags included.
func TestTwoInstancesOneKilledMidLoad(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a, b := start(t, url), start(t, url)
	groups := []string{"g0", "g1", "g2", "g3"}

	var (
		mu      sync.Mutex
		acked   = map[string][]int64{}
		latest  int64
		next    atomic.Int64
		count   atomic.Int64
		killed  = make(chan struct{})
		stop    = make(chan struct{})
		killAt  = int64(300)
		stopAt  = int64(600)
		writers sync.WaitGroup
	)
	for w := range 8 {
		target := []*instance{a, b}[w%2]
		writers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				uid := next.Add(1)
				group := groups[uid%int64(len(groups))]
				rev := add(target.base, group, uid)
				if rev == 0 {
					continue // not acknowledged: it may or may not be there
				}
				mu.Lock()
				acked[group] = append(acked[group], uid)
				latest = max(latest, rev)
				mu.Unlock()
				switch count.Add(1) {
				case killAt:
					close(killed)
				case stopAt:
					close(stop)
				}
			}
		})
	}
	<-killed
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGKILL))
	_ = b.cmd.Wait()
	writers.Wait()

	b = start(t, url) // back, from the log
	for _, g := range groups {
		onA, etagA := list(t, a.base, g, latest)
		onB, etagB := list(t, b.base, g, latest)
		assert.Equal(t, onA, onB, "group %s: one truth", g)
		assert.Equal(t, etagA, etagB, "group %s: one ETag", g)
		have := map[int64]bool{}
		for _, uid := range onA {
			have[uid] = true
		}
		for _, uid := range acked[g] {
			assert.True(t, have[uid], "group %s: acknowledged uid %d is lost", g, uid)
		}
	}
	assert.GreaterOrEqual(t, count.Load(), stopAt)
}

// An instance logs the database it opened, host, port, database and user,
// and never the password.
func TestLogsTheDatabaseItOpened(t *testing.T) {
	raw := pgtest.NewDatabase(t)
	u, err := url.Parse(raw)
	require.NoError(t, err)
	const password = "pw-that-must-not-leak"
	u.User = url.UserPassword(u.User.Username(), password) // trust auth: the server ignores it
	p := start(t, u.String())
	var opened struct {
		Host, Database, User string
		Port                 int
	}
	for _, line := range p.logs.Lines() {
		var entry struct{ Msg string }
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "opened the database" {
			require.NoError(t, json.Unmarshal([]byte(line), &opened))
		}
	}
	assert.Equal(t, u.Hostname(), opened.Host)
	assert.Equal(t, u.Port(), strconv.Itoa(opened.Port))
	assert.Equal(t, strings.TrimPrefix(u.Path, "/"), opened.Database)
	assert.Equal(t, u.User.Username(), opened.User)
	assert.NotContains(t, p.logs.String(), password)
}

// -h puts the database where membership's puts its data directory: among
// the five flags a first user needs, first; every line fits in 100
// characters.
func TestHelpStartsWithTheDatabase(t *testing.T) {
	var usage strings.Builder
	require.NoError(t, run(t.Context(), []string{"-h"}, func(string) (string, bool) { return "", false }, io.Discard, &usage))
	var flags []string
	for line := range strings.Lines(usage.String()) {
		line = strings.TrimSuffix(line, "\n")
		assert.LessOrEqual(t, len(line), 100, "a line longer than 100 characters: %q", line)
		if name, ok := strings.CutPrefix(line, "  -"); ok {
			name, _, _ = strings.Cut(name, " ")
			flags = append(flags, name)
		}
	}
	require.GreaterOrEqual(t, len(flags), 5, "%s", usage.String())
	assert.Equal(t, []string{"addr", "database-url", "token-file", "acl-file", "admin-addr"}, flags[:5])
}

// The command takes the service's flags but those of a data directory, and
// needs a database, which it checks before it listens.
func TestFlags(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	var usage strings.Builder
	require.NoError(t, run(t.Context(), []string{"-h"}, noEnv, io.Discard, &usage))
	assert.Contains(t, usage.String(), "Usage: membership-postgres [flags]")
	assert.Contains(t, usage.String(), "-database-url URL")
	assert.Contains(t, usage.String(), "-max-users")
	for _, flag := range []string{"-data-dir", "-repair", "-restore", "-snapshot-bytes", "-commit-queue-bytes"} {
		assert.NotContains(t, usage.String(), "  "+flag+" ", "the usage lists %s", flag)
	}
	for _, args := range [][]string{{"-data-dir", "/tmp/x"}, {"-repair"}, {"-restore", "b"}, {"-snapshot-bytes", "1"}} {
		err := run(t.Context(), args, noEnv, io.Discard, io.Discard)
		require.Error(t, err, "%q", args)
		assert.Contains(t, err.Error(), args[0]+" is for membership, which keeps its data in a directory", "%q", args)
	}
	var logs strings.Builder
	err := run(t.Context(), []string{"-addr", "127.0.0.1:0"}, noEnv, &logs, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no database: give -database-url or DATABASE_URL")
	assert.NotContains(t, logs.String(), "listening", "refused before it listens")
	logs.Reset()
	err = run(t.Context(), []string{"-addr", "127.0.0.1:0", "-database-url", "postgres://%zz"}, noEnv, &logs, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the database URL")
	assert.NotContains(t, logs.String(), "listening", "refused before it listens")
	blankToken := func(name string) (string, bool) {
		if name == "MEMBERSHIP_TOKEN" {
			return " ", true
		}
		return "", false
	}
	err = run(t.Context(), []string{"-addr", "127.0.0.1:0", "-database-url", "postgres://localhost/x"}, blankToken, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "MEMBERSHIP_TOKEN is set but blank")
}
