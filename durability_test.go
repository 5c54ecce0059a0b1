package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/metrics/metricstest"
	"example.com/groupmembership/internal/store/wal"
)

// TestMain lets the tests run this test binary as the real program: with
// MEMBERSHIP_RUN_MAIN=1 it runs main with the arguments it was given.
func TestMain(m *testing.M) {
	if os.Getenv("MEMBERSHIP_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// process is the program running as a subprocess.
type process struct {
	cmd  *exec.Cmd
	base string
	logs *syncBuffer
}

// startProcess starts the program with args on a free loopback port and
// waits until it is ready.
func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	return startProcessEnv(t, nil, args...)
}

// startProcessEnv is startProcess with env added to the environment.
func startProcessEnv(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	return launch(t, env, true, args...)
}

// launch starts the program and waits until it listens, and until it is
// ready too when untilReady is set.
func launch(t *testing.T, env []string, untilReady bool, args ...string) *process {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-addr", "127.0.0.1:0", "-log-format", "json"}, args...)...)
	cmd.Env = append(append(os.Environ(), "MEMBERSHIP_RUN_MAIN=1"), env...)
	return launchCmd(t, cmd, untilReady)
}

// launchCmd starts cmd, the program, and waits as launch does.
func launchCmd(t *testing.T, cmd *exec.Cmd, untilReady bool) *process {
	t.Helper()
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	p := &process{cmd: cmd, logs: logs}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	listened := assert.Eventually(t, func() bool {
		var addr string
		if ready := readyAt(logs, &addr); addr == "" || untilReady && !ready {
			return false
		}
		p.base = "http://" + addr
		return true
	}, 30*time.Second, 20*time.Millisecond)
	if !listened {
		// The output as it is now, not as it was when the wait began.
		require.FailNow(t, "the program never listened", "its output:\n%s", logs.String())
	}
	return p
}

// client is the tests' HTTP client. Its timeout only bounds a request that
// would otherwise hang: a process killed mid-request resets its
// connections at once, and a 200,000-user POST took over 10 s on a 2-core
// machine beside other test runs.
var client = &http.Client{Timeout: 2 * time.Minute}

// statusOf sends method to base+path with body, with the Content-Type
// contentType when not "", and returns the status of the answer, read
// whole; 0 when none came. It needs no test: writers off the test
// goroutine use it.
func statusOf(base, method, path, body, contentType string) int {
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		return 0
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0
	}
	return resp.StatusCode
}

// usersForm returns the form of a write of uids.
func usersForm(uids ...int64) string {
	parts := make([]string, len(uids))
	for i, uid := range uids {
		parts[i] = fmt.Sprint(uid)
	}
	return url.Values{"users": {"[" + strings.Join(parts, ",") + "]"}}.Encode()
}

// change sends a POST or DELETE and reports whether it was acknowledged.
func change(base, method, group string, uids ...int64) bool {
	return statusOf(base, method, "/group-user/"+group, usersForm(uids...), "application/x-www-form-urlencoded") == http.StatusOK
}

func members(t *testing.T, base, group string) map[int64]bool {
	t.Helper()
	resp, err := client.Get(base + "/group-user/" + group)
	require.NoError(t, err)
	defer resp.Body.Close()
	var list []struct{ UID int64 }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	set := make(map[int64]bool, len(list))
	for _, m := range list {
		set[m.UID] = true
	}
	return set
}

// ledger records what the service acknowledged. Each uid is added at most
// once and removed at most once, so its expected state is plain.
type ledger struct {
	mu      sync.Mutex
	added   map[int64]string // uid -> group, for acknowledged adds
	removed map[int64]bool   // acknowledged removes
	unsure  map[int64]bool   // a change was sent but not acknowledged
}

func (l *ledger) record(uid int64, group string, remove, acked bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !acked:
		l.unsure[uid] = true
	case remove:
		l.removed[uid] = true
	default:
		l.added[uid] = group
	}
}

// acked returns how many changes were acknowledged so far.
func (l *ledger) acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.added) + len(l.removed)
}

// check asserts that every acknowledged add not later removed is present
// and that no acknowledged remove came back.
func (l *ledger) check(t *testing.T, base string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	present := map[string]map[int64]bool{}
	for _, g := range []string{"g0", "g1", "g2"} {
		present[g] = members(t, base, g)
	}
	missing, revived := 0, 0
	for uid, g := range l.added {
		if !l.removed[uid] && !l.unsure[uid] && !present[g][uid] {
			missing++
		}
		if l.removed[uid] && present[g][uid] {
			revived++
		}
	}
	assert.Zero(t, missing, "acknowledged adds lost")
	assert.Zero(t, revived, "acknowledged removes undone")
	assert.NotEmpty(t, l.added, "the writers got nothing acknowledged")
}

// write runs writers against base until stop closes, each with its own uids.
func write(base string, round int, l *ledger, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				uid := int64(round)*10_000_000 + int64(w)*1_000_000 + i + 1
				group := fmt.Sprint("g", uid%3)
				acked := change(base, "POST", group, uid)
				l.record(uid, group, false, acked)
				if acked && i%3 == 0 {
					l.record(uid, group, true, change(base, "DELETE", group, uid))
				}
			}
		}()
	}
	return &wg
}

// killWhileWriting runs rounds of writers against the program started
// with args: in each round, writers goroutines each call step(base,
// round, w, i) for i = 0, 1, … until it returns false or the round ends.
// A round ends once done() reaches (round+1)*perRound (progress, not
// time, decides) and, in the last round, a snapshot has been written, so
// that the last restart loads one. The program is then killed with
// SIGKILL and started again, and check(killed, restarted, round) runs.
// It returns the program as the last round left it.
func killWhileWriting(t *testing.T, args []string, rounds, writers, perRound int, done func() int,
	step func(base string, round, w, i int) bool, check func(killed, restarted *process, round int)) *process {
	t.Helper()
	p := startProcess(t, args...)
	for round := range rounds {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		base := p.base
		for w := range writers {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if !step(base, round, w, i) {
						return
					}
				}
			})
		}
		target := (round + 1) * perRound
		require.Eventually(t, func() bool { return done() >= target }, 60*time.Second, time.Millisecond,
			"the writers got too little acknowledged")
		if round == rounds-1 {
			require.Eventually(t, func() bool { return strings.Contains(p.logs.String(), "wrote a snapshot") },
				60*time.Second, time.Millisecond, "no snapshot was written")
		}
		require.NoError(t, p.cmd.Process.Kill())
		_ = p.cmd.Wait()
		close(stop)
		wg.Wait()
		killed := p
		p = startProcess(t, args...)
		check(killed, p, round)
	}
	return p
}

func TestCrashKeepsEveryAcknowledgedChange(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills the program many times")
	}
	dir := t.TempDir()
	// -commit-timeout: the big group's write is fsynced while the
	// machine may be busy with other work; the test is of what a kill
	// keeps, not of how fast a write commits.
	args := []string{"-data-dir", dir, "-snapshot-bytes", "65536", "-max-users", "300000", "-max-body", "8388608", "-commit-timeout", "2m"}
	l := &ledger{added: map[int64]string{}, removed: map[int64]bool{}, unsure: map[int64]bool{}}

	// A big group makes each snapshot take long enough to be killed in.
	p := startProcess(t, args...)
	big := make([]int64, 200_000)
	for i := range big {
		big[i] = int64(i)*7 + 1_000_000_000
	}
	require.Equal(t, http.StatusOK, statusOf(p.base, "POST", "/group-user/big", usersForm(big...), "application/x-www-form-urlencoded"),
		"the big group's write; output:\n%s", p.logs.String())
	// Its record is far over -snapshot-bytes: a snapshot follows. Wait for
	// it, so that every restart below has one to load, however slow the
	// machine.
	require.Eventually(t, func() bool { return strings.Contains(p.logs.String(), "wrote a snapshot") },
		60*time.Second, 5*time.Millisecond, "no snapshot was written; output:\n%s", p.logs.String())

	for round := range 6 {
		duringSnapshot := round%2 == 1
		stop := make(chan struct{})
		wg := write(p.base, round, l, stop)
		if duringSnapshot {
			// Kill while a snapshot is being written: its temporary file exists.
			require.Eventually(t, func() bool {
				tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
				return len(tmps) > 0
			}, 30*time.Second, time.Millisecond, "no snapshot started")
		} else {
			// Kill after a random number of acknowledged changes: progress,
			// not time, decides, so a slow machine kills as late.
			want := l.acked() + 50 + rand.IntN(450)
			require.Eventually(t, func() bool { return l.acked() >= want }, 60*time.Second, time.Millisecond,
				"the writers got no changes acknowledged")
		}
		require.NoError(t, p.cmd.Process.Kill()) // SIGKILL: no flush, no goodbye
		_ = p.cmd.Wait()
		close(stop)
		wg.Wait()

		p = startProcess(t, args...)
		l.check(t, p.base)
		assert.Len(t, members(t, p.base, "big"), len(big), "round %d: the big group", round)
		if duringSnapshot {
			assert.Contains(t, p.logs.String(), "loaded snapshot", "round %d", round)
		}
	}
	t.Logf("acknowledged adds %d, removes %d, unacknowledged %d", len(l.added), len(l.removed), len(l.unsure))
}

func TestSIGTERMKeepsEverythingAndExitsZero(t *testing.T) {
	dir := t.TempDir()
	p := startProcess(t, "-data-dir", dir)
	require.True(t, change(p.base, "POST", "g", 1, 2, 3))
	require.True(t, change(p.base, "DELETE", "g", 2))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.cmd.Wait(), "SIGTERM is a clean exit")
	assert.Equal(t, 0, p.cmd.ProcessState.ExitCode())

	p = startProcess(t, "-data-dir", dir)
	assert.Equal(t, map[int64]bool{1: true, 3: true}, members(t, p.base, "g"))
}

func TestSecondProcessOnTheSameDirectoryIsRefused(t *testing.T) {
	dir := t.TempDir()
	startProcess(t, "-data-dir", dir)
	cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-data-dir", dir)
	cmd.Env = append(os.Environ(), "MEMBERSHIP_RUN_MAIN=1")
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Equal(t, 1, cmd.ProcessState.ExitCode())
	assert.Contains(t, string(out), "in use by another process")
	assert.NotContains(t, string(out), "listening", "refused before it listens")
}

// Deleting LOCK under a running service must not let a second one in.
func TestSecondProcessIsRefusedWhenLOCKIsDeleted(t *testing.T) {
	dir := t.TempDir()
	startProcess(t, "-data-dir", dir)
	require.NoError(t, os.Remove(filepath.Join(dir, "LOCK")))
	// A second process that got in would serve until killed: the deadline
	// turns that into a failure instead of a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-addr", "127.0.0.1:0", "-data-dir", dir)
	cmd.Env = append(os.Environ(), "MEMBERSHIP_RUN_MAIN=1")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "%s", out)
	assert.Contains(t, string(out), "in use by another process")
}

func TestFeedRevisionsAndMetricsAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	p := startProcess(t, "-data-dir", dir)
	require.True(t, change(p.base, "POST", "g", 1, 2, 3))
	require.True(t, change(p.base, "DELETE", "g", 2))
	status, feed := send(t, "GET", p.base+"/changes?after=0", "")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, `[{"rev":1,"op":"add","time":"`+readmeTime+`","group":"g","uids":[1,2,3]},`+
		`{"rev":2,"op":"remove","time":"`+readmeTime+`","group":"g","uids":[2]}]`, fixedTimes(feed))
	resp, err := http.Get(p.base + "/group-user/g")
	require.NoError(t, err)
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	assert.Regexp(t, `^"[0-9a-f]{16}-2"$`, etag)

	status, body := send(t, "GET", p.base+"/metrics", "")
	require.Equal(t, http.StatusOK, status)
	families, err := metricstest.Parse(body)
	require.NoError(t, err, body)
	for _, name := range []string{"membership_http_requests_total", "membership_http_request_duration_seconds", "membership_http_requests_in_flight",
		"membership_groups", "membership_members", "membership_users", "membership_revision",
		"membership_log_bytes", "membership_fsyncs_total", "membership_fsync_duration_seconds", "membership_snapshots_total", "membership_last_snapshot_duration_seconds"} {
		assert.Contains(t, families, name)
	}

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.cmd.Wait())
	p = startProcess(t, "-data-dir", dir)

	status, again := send(t, "GET", p.base+"/changes?after=0", "")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, feed, again, "the feed continues across the restart, each change with its time")
	req, err := http.NewRequest("GET", p.base+"/group-user/g", nil)
	require.NoError(t, err)
	req.Header.Set("If-None-Match", etag)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotModified, resp.StatusCode, "an ETag from before the restart still names the same list")
	req, err = http.NewRequest("POST", p.base+"/group-user/g", strings.NewReader("users=[5]"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "3", resp.Header.Get("X-Revision"), "revisions continue")
}

// runExpectingRefusal runs the program with args and returns its output; it
// must exit 1 on its own.
func runExpectingRefusal(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "MEMBERSHIP_RUN_MAIN=1")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the program started: %s", out)
	require.Equal(t, 1, cmd.ProcessState.ExitCode(), "%s", out)
	return string(out)
}

// Damage to the data directory, tried on the real binary: a damaged last
// record and a snapshot moved aside are refused with the way forward named,
// and -repair keeps what it cuts.
func TestTheBinaryRefusesADamagedDirectory(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-data-dir", dir, "-snapshot-bytes", "300"}
	p := startProcess(t, args...)
	for uid := range int64(60) {
		require.True(t, change(p.base, "POST", "g", uid+1))
	}
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.cmd.Wait())

	logs, err := filepath.Glob(filepath.Join(dir, "log-*.wal"))
	require.NoError(t, err)
	newest := logs[len(logs)-1]
	data, err := os.ReadFile(newest)
	require.NoError(t, err)
	if len(data) <= wal.HeaderSize { // the newest log is empty: add a change to damage
		p = startProcess(t, args...)
		require.True(t, change(p.base, "POST", "g", 61))
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, p.cmd.Wait())
		data, err = os.ReadFile(newest)
		require.NoError(t, err)
	}
	damaged := bytes.Clone(data)
	damaged[len(damaged)-1] ^= 0x01
	require.NoError(t, os.WriteFile(newest, damaged, 0o600))
	out := runExpectingRefusal(t, args...)
	assert.Contains(t, out, filepath.Base(newest))
	assert.Contains(t, out, "-repair")

	p = startProcess(t, append(args, "-repair")...)
	assert.NotEmpty(t, members(t, p.base, "g"))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.cmd.Wait())
	kept, err := filepath.Glob(filepath.Join(dir, "repair-*", filepath.Base(newest)+".from-*"))
	require.NoError(t, err)
	assert.Len(t, kept, 1, "the cut record is kept")

	snapshots, err := filepath.Glob(filepath.Join(dir, "snapshot-*.snap"))
	require.NoError(t, err)
	require.NotEmpty(t, snapshots)
	for _, s := range snapshots {
		require.NoError(t, os.Rename(s, filepath.Join(t.TempDir(), filepath.Base(s))))
	}
	// Should the first log still be here (one snapshot only was written),
	// the logs alone would hold everything: take it too.
	first := filepath.Join(dir, fmt.Sprintf("log-%016d.wal", 1))
	if _, err := os.Stat(first); err == nil {
		require.NoError(t, os.Rename(first, filepath.Join(t.TempDir(), "first")))
	}
	out = runExpectingRefusal(t, args...)
	assert.Contains(t, out, "no snapshot is here")
}

// A log deleted under the running binary: the next write is refused before
// it is acknowledged, /readyz says why, and a restart refuses to start empty.
func TestTheBinaryNoticesItsLogDeleted(t *testing.T) {
	dir := t.TempDir()
	p := startProcess(t, "-data-dir", dir)
	require.True(t, change(p.base, "POST", "g", 1))
	logs, err := filepath.Glob(filepath.Join(dir, "log-*.wal"))
	require.NoError(t, err)
	for _, l := range logs {
		require.NoError(t, os.Remove(l))
	}
	assert.False(t, change(p.base, "POST", "g", 2), "not acknowledged")
	status, body := send(t, "GET", p.base+"/readyz", "")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Contains(t, body, "is gone from the data directory")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	_ = p.cmd.Wait()

	out := runExpectingRefusal(t, "-data-dir", dir)
	assert.Contains(t, out, "has held data")
}

// holdARequest starts a POST whose body never ends, so that the service has
// a request in flight until its connection is closed.
func holdARequest(t *testing.T, base string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = io.WriteString(conn, "POST /group-user/g HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nusers=[")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		status, metrics := send(t, "GET", base+"/metrics", "")
		return status == 200 && strings.Contains(metrics, "\nmembership_http_requests_in_flight 2\n")
	}, 10*time.Second, time.Millisecond, "the held request never reached its handler")
	return conn
}

// waitExit waits for the process to end, at most limit, and returns how.
func waitExit(t *testing.T, p *process, limit time.Duration) *os.ProcessState {
	t.Helper()
	exited := make(chan struct{})
	go func() {
		_ = p.cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
		return p.cmd.ProcessState
	case <-time.After(limit):
		t.Fatalf("the process still runs %s later; output:\n%s", limit, p.logs.String())
		return nil
	}
}

// Past the drain deadline the connections left are closed, with a warning
// that says how many, and the exit is the clean one docs/operating.md promises.
func TestDrainDeadlineClosesWhatIsLeftAndExitsZero(t *testing.T) {
	p := startProcess(t, "-shutdown-timeout", "300ms")
	holdARequest(t, p.base)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	state := waitExit(t, p, 30*time.Second)
	assert.Equal(t, 0, state.ExitCode(), p.logs.String())
	assert.Contains(t, p.logs.String(), "-shutdown-timeout passed")
	assert.Contains(t, p.logs.String(), `"connections":1`)
}

// A second SIGTERM during the drain ends the process at once.
func TestASecondSignalEndsTheProcessAtOnce(t *testing.T) {
	p := startProcess(t, "-shutdown-timeout", "10m")
	holdARequest(t, p.base)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Eventually(t, func() bool { return strings.Contains(p.logs.String(), "shutting down") },
		10*time.Second, time.Millisecond, "the first signal did not start the shutdown")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	state := waitExit(t, p, 30*time.Second)
	assert.Equal(t, 128+int(syscall.SIGTERM), state.ExitCode(), "ended at once, with the status of a signal")
	assert.Contains(t, p.logs.String(), "terminated again: exiting at once")
}

// An online backup, end to end on the binary: GET /backup needs the token
// even without -auth-reads, is taken while writes go on, and -restore
// writes a data directory on which the service starts with every list as
// it was at the backup's revision; a damaged backup is refused.
func TestBackupAndRestoreTheBinary(t *testing.T) {
	const token = "s3cret-backup"
	p := startProcessEnv(t, []string{"MEMBERSHIP_TOKEN=" + token}, "-data-dir", t.TempDir())
	authed := func(method, path, body string) (*http.Response, []byte) {
		req, err := http.NewRequest(method, p.base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, b
	}
	resp, _ := authed("POST", "/group-user/g", `users=[[1,"Eve"],2,3]`)
	require.Equal(t, 200, resp.StatusCode)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // writes go on during the backup
		defer wg.Done()
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			req, err := http.NewRequest("POST", p.base+"/group-user/w"+fmt.Sprint(i%3), strings.NewReader(fmt.Sprintf("users=[%d]", 100+i)))
			if !assert.NoError(t, err) {
				return
			}
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if r, err := client.Do(req); assert.NoError(t, err) {
				r.Body.Close()
			}
		}
	}()
	noToken, err := client.Get(p.base + "/backup")
	require.NoError(t, err)
	noToken.Body.Close()
	assert.Equal(t, 401, noToken.StatusCode, "a backup always needs the token")
	resp, backup := authed("GET", "/backup", "")
	close(stop)
	wg.Wait()
	require.Equal(t, 200, resp.StatusCode)
	rev, err := strconv.Atoi(resp.Header.Get("X-Revision"))
	require.NoError(t, err)

	// The lists at the backup's revision, from the feed.
	_, feed := authed("GET", "/changes?limit=10000&after=0", "")
	var changes []struct {
		Rev   int
		Op    string
		Group string
		UIDs  []int64
	}
	require.NoError(t, json.Unmarshal(feed, &changes))
	want := map[string]map[int64]bool{}
	for _, c := range changes {
		if c.Rev > rev {
			break
		}
		if want[c.Group] == nil {
			want[c.Group] = map[int64]bool{}
		}
		for _, uid := range c.UIDs {
			if c.Op == "add" {
				want[c.Group][uid] = true
			} else {
				delete(want[c.Group], uid)
			}
		}
	}

	file := filepath.Join(t.TempDir(), "membership.backup")
	require.NoError(t, os.WriteFile(file, backup, 0o600))
	restored := filepath.Join(t.TempDir(), "restored")
	cmd := exec.Command(os.Args[0], "-restore", file, "-data-dir", restored)
	cmd.Env = append(os.Environ(), "MEMBERSHIP_RUN_MAIN=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), fmt.Sprintf("at revision %d: start the service with -data-dir %s", rev, restored))

	q := startProcess(t, "-data-dir", restored)
	for group, members := range want {
		assert.Equal(t, members, membersOrNone(t, q.base, group), "group %s", group)
	}
	status, list := send(t, "GET", q.base+"/group-user/g", "")
	require.Equal(t, 200, status)
	assert.JSONEq(t, `[{"uid":1,"nickname":"Eve"},{"uid":2,"nickname":""},{"uid":3,"nickname":""}]`, list)

	again := runExpectingRefusal(t, "-restore", file, "-data-dir", restored)
	assert.Contains(t, again, "is not empty")

	// A restore stopped while it wrote the snapshot: the service refuses
	// the directory, naming -restore, and a -restore starts it over.
	half := filepath.Join(t.TempDir(), "half")
	require.NoError(t, os.Mkdir(half, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(half, "RESTORING"), nil, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(half, "snapshot-0000000000000001.snap-123.tmp"), backup[:len(backup)/2], 0o600))
	refused := runExpectingRefusal(t, "-data-dir", half)
	assert.Contains(t, refused, "holds a restore that did not finish")
	assert.Contains(t, refused, "Run -restore again with the backup and -data-dir "+half)
	redo := exec.Command(os.Args[0], "-restore", file, "-data-dir", half)
	redo.Env = append(os.Environ(), "MEMBERSHIP_RUN_MAIN=1")
	out, err = redo.CombinedOutput()
	require.NoError(t, err, "%s", out)
	r := startProcess(t, "-data-dir", half)
	for group, members := range want {
		assert.Equal(t, members, membersOrNone(t, r.base, group), "group %s", group)
	}

	backup[len(backup)/2] ^= 0x01
	require.NoError(t, os.WriteFile(file, backup, 0o600))
	damaged := runExpectingRefusal(t, "-restore", file, "-data-dir", filepath.Join(t.TempDir(), "other"))
	assert.Contains(t, damaged, "the file is damaged: it is not a whole backup; take another")
}

// membersOrNone is members, with an empty group as an empty set.
func membersOrNone(t *testing.T, base, group string) map[int64]bool {
	got := members(t, base, group)
	if len(got) == 0 {
		return map[int64]bool{}
	}
	return got
}

// A first start that cannot take its address leaves nothing in a new data
// directory: the next start, with a free address, starts empty.
func TestATakenAddressLeavesANewDataDirectoryUntouched(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	dir := filepath.Join(t.TempDir(), "new")
	cmd := exec.Command(os.Args[0], "-addr", taken.Addr().String(), "-data-dir", dir)
	cmd.Env = append(os.Environ(), "MEMBERSHIP_RUN_MAIN=1")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "%s", out)
	assert.Contains(t, string(out), "address already in use")
	_, err = os.Stat(filepath.Join(dir, "LOCK"))
	assert.ErrorIs(t, err, os.ErrNotExist, "no LOCK left behind")

	p := startProcess(t, "-data-dir", dir)
	require.True(t, change(p.base, "POST", "g", 1))
}
