package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/*.out with what the reporter prints")

// The streams of testdata/*.json were recorded from go test -json on small
// packages made for them; testdata/*.out is what the reporter prints for
// each, replayed at the times the events carry.
func TestRecordedStreams(t *testing.T) {
	tests := []struct {
		name       string
		wantStatus int
	}{
		{"pass", 0},    // a skipped test, a skipped subtest, no test files, parallel tests
		{"cached", 0},  // results from go test's cache
		{"fail", 1},    // a test fails, after printing to stdout
		{"panic", 1},   // a test panics
		{"timeout", 1}, // -timeout ends the binary while a test runs
		{"exit", 1},    // a test calls os.Exit
		{"build", 1},   // the package does not compile
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream, err := os.ReadFile(filepath.Join("testdata", tt.name+".json"))
			require.NoError(t, err)
			out, status := replay(t, string(stream))
			assert.Equal(t, tt.wantStatus, status)
			golden := filepath.Join("testdata", tt.name+".out")
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(out), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), out)
		})
	}
}

// replay feeds a reporter the lines of stream, each at the time its event
// carries (an event without one, such as build output, at the time of the
// one before), and returns what it printed and its exit status.
func replay(t *testing.T, stream string) (string, int) {
	t.Helper()
	var lines []string
	var times []time.Time
	for _, line := range strings.SplitAfter(stream, "\n") {
		if line == "" {
			continue
		}
		var e struct{ Time time.Time }
		require.NoError(t, json.Unmarshal([]byte(line), &e), "%q", line)
		lines, times = append(lines, line), append(times, e.Time)
	}
	began := time.Time{}
	for _, at := range times {
		if !at.IsZero() {
			began = at
			break
		}
	}
	require.False(t, began.IsZero(), "a stream with no time")
	var out bytes.Buffer
	r := newReporter(&out, began, 20*time.Second, 5)
	now := began
	for i, line := range lines {
		if !times[i].IsZero() {
			now = times[i]
		}
		r.line(line, now)
	}
	status := r.finish(now)
	return out.String(), status
}

func TestFailuresAreCountedAndNamed(t *testing.T) {
	tests := []struct {
		name string
		want []string // lines of the summary
	}{
		{"fail", []string{"tests: 1 passed, 1 failed, 0 skipped; subtests: 0 passed, 0 failed, 0 skipped", "FAIL: TestFails in example.com/rec/fails"}},
		{"panic", []string{"tests: 1 passed, 1 failed, 0 skipped; subtests: 0 passed, 0 failed, 0 skipped", "FAIL: TestPanics in example.com/rec/panics"}},
		{"timeout", []string{"tests: 1 passed, 1 failed, 0 skipped; subtests: 0 passed, 0 failed, 0 skipped", "FAIL: TestHangs in example.com/rec/timeout (did not finish)"}},
		{"exit", []string{"tests: 0 passed, 1 failed, 0 skipped; subtests: 0 passed, 0 failed, 0 skipped", "FAIL: TestExits in example.com/rec/exits (did not finish)"}},
		{"build", []string{"1 package in 0.0s: 0 ok (0 cached), 1 failed, 0 with no test files", "FAIL: build of example.com/rec/bad [example.com/rec/bad.test]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream, err := os.ReadFile(filepath.Join("testdata", tt.name+".json"))
			require.NoError(t, err)
			out, _ := replay(t, string(stream))
			lines := strings.Split(out, "\n")
			for _, want := range tt.want {
				assert.Contains(t, lines, want)
			}
		})
	}
}

// A failing test's output is printed in full, as it fails, before the
// package ends: a failed CI run can be read from its log.
func TestAFailingTestIsPrintedInFull(t *testing.T) {
	stream, err := os.ReadFile("testdata/panic.json")
	require.NoError(t, err)
	out, _ := replay(t, string(stream))
	failed := strings.Index(out, "FAIL TestPanics in example.com/rec/panics")
	trace := strings.Index(out, "panic: assignment to entry in nil map")
	frame := strings.Index(out, "/tmp/prog/rec/panics/x_test.go:4 +0x28")
	ended := strings.Index(out, "FAIL example.com/rec/panics")
	require.True(t, failed >= 0 && trace >= 0 && frame >= 0 && ended >= 0, "%s", out)
	assert.Less(t, failed, trace)
	assert.Less(t, trace, frame)
	assert.Less(t, frame, ended)
	assert.NotContains(t, out, "=== RUN   TestOK", "the output of a test that passed is not printed")
}

func TestLinesThatAreNotEventsArePrinted(t *testing.T) {
	var out bytes.Buffer
	began := time.Unix(0, 0)
	r := newReporter(&out, began, 20*time.Second, 5)
	r.line("go: not an event\n", began)
	r.line(`{"Action":"start","Package":"p"}`+"\n", began)
	r.line(`{"Action":"pass","Package":"p","Elapsed":0.5}`+"\n", began.Add(time.Second))
	assert.Equal(t, 0, r.finish(began.Add(time.Second)))
	assert.True(t, strings.HasPrefix(out.String(), "go: not an event\n 0:00  start p\n 0:01  ok   p  0.5s, 0 passed\n"), "%s", out.String())
}

func TestNoPackageIsAFailure(t *testing.T) {
	var out bytes.Buffer
	began := time.Unix(0, 0)
	r := newReporter(&out, began, 20*time.Second, 5)
	assert.Equal(t, 1, r.finish(began))
	assert.Contains(t, out.String(), "FAIL: go test reported no package\n")
}

func TestAPackageThatDoesNotEndIsAFailure(t *testing.T) {
	var out bytes.Buffer
	began := time.Unix(0, 0)
	r := newReporter(&out, began, 20*time.Second, 5)
	r.line(`{"Action":"start","Package":"p"}`, began)
	r.line(`{"Action":"run","Package":"p","Test":"TestX"}`, began)
	r.line(`{"Action":"output","Package":"p","Test":"TestX","Output":"=== RUN   TestX\n"}`, began)
	assert.Equal(t, 1, r.finish(began.Add(time.Second)))
	assert.Contains(t, out.String(), " 0:01  FAIL p: the events ended before the package did\n=== RUN   TestX\n")
	assert.Contains(t, out.String(), "FAIL: p (did not end)\n")
}

// The heartbeat: after quiet without a line, a line naming each running
// package and the tests running in it, the innermost subtest rather than its
// parent, not the parallel tests waiting their turn.
func TestHeartbeatNamesWhatRuns(t *testing.T) {
	var out bytes.Buffer
	began := time.Unix(0, 0)
	at := func(s int) time.Time { return began.Add(time.Duration(s) * time.Second) }
	r := newReporter(&out, began, 20*time.Second, 5)
	lines := func() []string { return strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") }

	r.tick(at(19))
	assert.Empty(t, out.String(), "no line before quiet has passed")
	r.tick(at(20))
	assert.Equal(t, []string{" 0:20  waiting for go test: no package running (building, linking, or done); 0 ended"}, lines())

	out.Reset()
	r.line(`{"Action":"start","Package":"a"}`, at(21))
	r.line(`{"Action":"run","Package":"a","Test":"TestSlow"}`, at(22))
	r.line(`{"Action":"run","Package":"a","Test":"TestSlow/case"}`, at(25))
	r.line(`{"Action":"start","Package":"b"}`, at(30))
	r.line(`{"Action":"run","Package":"b","Test":"TestWaits"}`, at(30))
	r.line(`{"Action":"pause","Package":"b","Test":"TestWaits"}`, at(30))
	r.line(`{"Action":"run","Package":"b","Test":"TestRuns"}`, at(31))
	r.line(`{"Action":"run","Package":"b","Test":"TestParallel"}`, at(31))
	r.line(`{"Action":"pause","Package":"b","Test":"TestParallel"}`, at(31))
	r.line(`{"Action":"cont","Package":"b","Test":"TestParallel"}`, at(40))
	r.tick(at(49))
	assert.Equal(t, []string{" 0:21  start a", " 0:30  start b"}, lines(), "30 s is the last line: no heartbeat at 49 s")
	r.tick(at(50))
	assert.Equal(t, " 0:50  running a for 29.0s: TestSlow/case (25.0s); b for 20.0s: TestParallel (10.0s), TestRuns (19.0s)", lines()[2])

	r.line(`{"Action":"pass","Package":"b","Test":"TestRuns","Elapsed":19}`, at(50))
	r.line(`{"Action":"pass","Package":"b","Test":"TestParallel","Elapsed":10}`, at(50))
	r.line(`{"Action":"pass","Package":"a","Test":"TestSlow/case","Elapsed":25}`, at(50))
	r.tick(at(69))
	assert.Len(t, lines(), 3)
	r.tick(at(70))
	require.Len(t, lines(), 4)
	assert.Equal(t, " 1:10  running a for 49.0s: TestSlow (48.0s); b for 40.0s: no test running", lines()[3])
	r.tick(at(90))
	require.Len(t, lines(), 5, "a heartbeat after each quiet stretch")
}

// follow prints a heartbeat on a tick with nothing on its input, each event
// as it comes, and the summary when the input ends. The output is a pipe:
// each line is read as the reporter writes it.
func TestFollowPrintsAsItGoes(t *testing.T) {
	began := time.Unix(0, 0)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	tick := make(chan time.Time)
	status := make(chan int, 1)
	go func() {
		r := newReporter(outW, began, 20*time.Second, 5)
		status <- follow(inR, r, tick, func() time.Time { return began.Add(5 * time.Second) })
		outW.Close()
	}()
	out := bufio.NewReader(outR)
	readLine := func() string {
		line, err := out.ReadString('\n')
		require.NoError(t, err)
		return line
	}

	tick <- began.Add(30 * time.Second)
	assert.Equal(t, " 0:30  waiting for go test: no package running (building, linking, or done); 0 ended\n", readLine())
	_, err := io.WriteString(inW, `{"Action":"start","Package":"p"}`+"\n")
	require.NoError(t, err)
	assert.Equal(t, " 0:05  start p\n", readLine())
	_, err = io.WriteString(inW, `{"Action":"pass","Package":"p","Elapsed":1}`+"\n")
	require.NoError(t, err)
	assert.Equal(t, " 0:05  ok   p  1.0s, 0 passed\n", readLine())
	require.NoError(t, inW.Close())
	rest, err := io.ReadAll(out)
	require.NoError(t, err)
	assert.Equal(t, "\n1 package in 5.0s: 1 ok (0 cached), 0 failed, 0 with no test files\n"+
		"tests: 0 passed, 0 failed, 0 skipped; subtests: 0 passed, 0 failed, 0 skipped\nPASS\n", string(rest))
	assert.Equal(t, 0, <-status)
}

func TestDurations(t *testing.T) {
	tests := []struct {
		d         time.Duration
		wantShort string
		wantClock string
	}{
		{0, "0.0s", "0:00"},
		{440 * time.Millisecond, "0.4s", "0:00"},
		{59*time.Second + 940*time.Millisecond, "59.9s", "0:59"},
		{62 * time.Second, "1m02s", "1:02"},
		{23*time.Minute + 29*time.Second + 600*time.Millisecond, "23m30s", "23:29"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.wantShort, duration(tt.d), "duration(%v)", tt.d)
		assert.Equal(t, tt.wantClock, clock(tt.d), "clock(%v)", tt.d)
	}
}
