package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"example.com/groupmembership/bench/loadtest"
)

// The service's default bounds on one request, which the loading fills:
// -max-users (a batch's users in all), -max-batch, and -max-body, which
// the bodies stay under (10,000 uids of 8 digits and 1,000 changes take
// about 150 KB).
const (
	maxUsers   = 10_000
	maxChanges = 1_000
)

// How long the large service may take to get ready, and to stop.
const (
	readyWait = 10 * time.Minute
	stopWait  = 5 * time.Minute
)

// serviceArgs are the flags of both services but -addr: the feed off,
// -data-dir, and any -service-args.
func (h *harness) serviceArgs(dataDir string) []string {
	return append([]string{"-changes-keep", "0", "-data-dir", dataDir}, strings.Fields(h.opts.serviceArgs)...)
}

// loadLarge starts the large service, loads it, waits for the snapshot
// its log started to be written, measures its memory, stops it, and looks
// at its data directory.
func (h *harness) loadLarge(ctx context.Context, st state, r *report) (*service, error) {
	dataDir := filepath.Join(h.tmp, "large")
	s, _, err := startService(ctx, h.kids, h.bin, h.tmp, "large", h.serviceArgs(dataDir), nil, time.Minute)
	if err != nil {
		return nil, err
	}
	if r.rssEmpty, _, err = s.rss(); err != nil {
		return nil, err
	}
	total := st.memberships()
	fmt.Printf("loading: POST /batch of at most %d users and %d changes (the service's defaults), from %d connections; RSS of the empty service %s\n",
		maxUsers, maxChanges, h.opts.loadConns, loadtest.MiB(r.rssEmpty))
	p := &batcher{st: st, maxUsers: maxUsers, maxChanges: maxChanges}
	if r.load, err = load(ctx, s, p, h.opts.loadConns, total); err != nil {
		return nil, err
	}
	fmt.Printf("  loaded %d memberships in %s: %d requests, the slowest %s; sent again: %d after a 503, %d after a 409; of them, %d replayed (the first attempt was applied)\n",
		r.load.memberships, r.load.took.Round(time.Millisecond), r.load.requests, r.load.slowest.Round(time.Millisecond),
		r.load.unavailable, r.load.inFlight, r.load.replayed)
	if r.keysBytes, err = s.metric(ctx, "membership_idempotency_keys_bytes"); err != nil {
		return nil, err
	}
	if err := waitSnapshots(ctx, s, dataDir); err != nil {
		return nil, err
	}
	if r.snapshots, err = s.metric(ctx, "membership_snapshots_total"); err != nil {
		return nil, err
	}
	if r.lastSnapshot, err = s.metric(ctx, "membership_last_snapshot_duration_seconds"); err != nil {
		return nil, err
	}
	if r.rssLoaded, r.peakLoaded, err = s.rss(); err != nil {
		return nil, err
	}
	fmt.Printf("  RSS %s after the loading (peak %s); %s\n", loadtest.MiB(r.rssLoaded), loadtest.MiB(r.peakLoaded), r.snapshotsWritten())
	if r.rssSettled, err = settle(ctx, s, h.opts.settle); err != nil {
		return nil, err
	}
	if r.stop, err = s.stop(stopWait); err != nil {
		return nil, err
	}
	r.files, err = dirFiles(dataDir)
	return s, err
}

// releaseAfter is how long after its last burst the service gives its
// free memory back, at the latest: 30 s idle, looked at every 5 s
// (internal/memrelease).
const releaseAfter = 35 * time.Second

// settle leaves the service idle for d, so that the garbage of the loading
// is collected and given back to the system (by the service once idle,
// and by the runtime, which forces a collection every 2 minutes), and
// returns its RSS then.
func settle(ctx context.Context, s *service, d time.Duration) (int64, error) {
	if d <= 0 {
		rss, _, err := s.rss()
		return rss, err
	}
	if d < releaseAfter {
		fmt.Printf("  note: -settle %s ends before the service gives its free memory back (up to %s idle after the loading): the idle RSS is not the one the target is stated for\n", d, releaseAfter)
	}
	fmt.Printf("  idle for %s (-settle), so that the garbage of the loading is collected and given back:", d)
	defer fmt.Println()
	end := time.Now().Add(d)
	for {
		rss, _, err := s.rss()
		if err != nil {
			return 0, err
		}
		fmt.Printf(" %s", loadtest.MiB(rss))
		if !time.Now().Before(end) {
			return rss, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(min(15*time.Second, time.Until(end))):
		}
	}
}

// waitSnapshots waits until the snapshots the service started are written
// and read back: in a new data directory, the service wrote one for each
// log after the first.
func waitSnapshots(ctx context.Context, s *service, dataDir string) error {
	deadline := time.Now().Add(stopWait)
	for {
		files, err := dirFiles(dataDir)
		if err != nil {
			return err
		}
		newest := 0
		for _, f := range files {
			var n int
			if _, err := fmt.Sscanf(f.name, "log-%d.wal", &n); err == nil {
				newest = max(newest, n)
			}
		}
		written, err := s.metric(ctx, "membership_snapshots_total")
		if err != nil {
			return err
		}
		if int(written) >= newest-1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the service wrote %v snapshots of %d in %s", written, newest-1, stopWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// file is one file of the data directory.
type file struct {
	name         string
	size, onDisk int64 // bytes, and the blocks it takes
}

func dirFiles(dir string) ([]file, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []file
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		f := file{name: e.Name(), size: info.Size()}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			f.onDisk = st.Blocks * 512
		}
		files = append(files, f)
	}
	return files, nil
}

// restart starts the large service again on its data directory and times
// it until /readyz answers 200.
func (h *harness) restart(ctx context.Context, r *report) (*service, error) {
	dataDir := filepath.Join(h.tmp, "large")
	fmt.Println("restarting the large service on its data directory")
	logPath := filepath.Join(h.tmp, "large.log")
	info, err := os.Stat(logPath)
	if err != nil {
		return nil, err
	}
	s, took, err := startService(ctx, h.kids, h.bin, h.tmp, "large", h.serviceArgs(dataDir), nil, readyWait)
	if err != nil {
		return nil, err
	}
	r.restart = took
	if r.rssRestarted, r.peakRestarted, err = s.rss(); err != nil {
		return nil, err
	}
	// The phases of the start, from the times of its log lines: reading
	// the snapshot into memory, then replaying the log after it.
	times := logTimes(ctx, logPath, info.Size(), "loaded snapshot", "opened the data directory", "ready")
	loaded := times["loaded snapshot"]
	if loaded.IsZero() { // no snapshot: the log alone
		loaded = times[""]
	}
	r.snapshotLoad = loaded.Sub(times[""])
	r.replay = times["opened the data directory"].Sub(loaded)
	fmt.Printf("  ready in %s (the snapshot read and loaded in %s, the log after it replayed in %s, by the service's log); RSS %s (peak %s)\n",
		took.Round(time.Millisecond), r.snapshotLoad, r.replay, loadtest.MiB(r.rssRestarted), loadtest.MiB(r.peakRestarted))
	return s, nil
}

// logTimes returns the time of the first line of the log from offset on,
// under "", and of the first line after it that holds each of msgs, once
// the last of msgs is there, within 2 s (the service writes its log every
// 100 ms). A msg never found has the zero time.
func logTimes(ctx context.Context, path string, offset int64, msgs ...string) map[string]time.Time {
	var times map[string]time.Time
	for range 20 {
		times = map[string]time.Time{}
		data, err := os.ReadFile(path)
		if err != nil || int64(len(data)) < offset {
			return times
		}
		for line := range strings.SplitSeq(string(data[offset:]), "\n") {
			stamp, ok := strings.CutPrefix(line, "time=")
			if !ok {
				continue
			}
			at, err := time.Parse(time.RFC3339Nano, strings.Fields(stamp)[0])
			if err != nil {
				continue
			}
			if _, ok := times[""]; !ok {
				times[""] = at
			}
			for _, msg := range msgs {
				if _, ok := times[msg]; !ok && (strings.Contains(line, "msg=\""+msg+"\"") || strings.Contains(line, "msg="+msg+" ")) {
					times[msg] = at
				}
			}
		}
		if _, ok := times[msgs[len(msgs)-1]]; ok {
			return times
		}
		select {
		case <-ctx.Done():
			return times
		case <-time.After(100 * time.Millisecond):
		}
	}
	return times
}

// startSmall starts the service of 1,000 memberships, with the same flags.
func (h *harness) startSmall(ctx context.Context) (*service, error) {
	s, _, err := startService(ctx, h.kids, h.bin, h.tmp, "small", h.serviceArgs(filepath.Join(h.tmp, "small")), nil, time.Minute)
	if err != nil {
		return nil, err
	}
	p := &batcher{st: smallState(h.opts.users), maxUsers: maxUsers, maxChanges: maxChanges}
	client := &http.Client{Timeout: time.Minute}
	for n := 0; ; n++ {
		b := p.batch()
		if b == nil {
			break
		}
		if _, err := postBatch(ctx, client, s.base, b.appendBody(nil), b.users(), fmt.Sprintf("bench-scale-small-%d", n)); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// kinds picks the paths of the four requests on either service.
func (h *harness) kinds(ctx context.Context, big *service, large state, small *service) ([]kind, error) {
	sm := smallState(h.opts.users)
	kinds := []kind{{name: "GET 10"}, {name: "page of 100, largest group"}, {name: "member check"}, {name: "/user-group, 10 groups"}}
	for i, st := range []state{large, sm} {
		s := big
		rng := rand.New(rand.NewPCG(seedPicks, 0))
		// Users in 10 groups: among random users of the large service
		// (about one in eight), and the small one's 50 built so.
		candidates := loadtest.RandomUIDs(rng, 20*picks, int64(h.opts.users))
		if i == 1 {
			s = small
			candidates = nil
			for g := range 50 {
				candidates = append(candidates, sm.members(g)...)
			}
			slices.Sort(candidates)
			candidates = slices.Compact(candidates)
		}
		var paths [4][]string
		var err error
		if paths[0], err = get10Paths(st, rng); err != nil {
			return nil, fmt.Errorf("the %s service: %w", s.name, err)
		}
		if paths[1], err = pagePaths(st, rng); err != nil {
			return nil, fmt.Errorf("the %s service: %w", s.name, err)
		}
		paths[2] = checkPaths(st, rng)
		if paths[3], err = userGroupsPaths(ctx, s, candidates, 10); err != nil {
			return nil, err
		}
		for k := range kinds {
			kinds[k].paths[i] = paths[k]
		}
	}
	return kinds, nil
}

// profileRestart restarts the large service once more, under perf record
// -g, until /readyz answers 200, stops it, and returns perf's report of
// the functions the restart spent its samples in, itself and with what
// they called.
func (h *harness) profileRestart(ctx context.Context) (string, error) {
	if _, err := exec.LookPath("perf"); err != nil {
		return "perf is not installed (apt-get install linux-perf): no profile of the restart", nil
	}
	data := filepath.Join(h.tmp, "restart.perf")
	fmt.Println("restarting the large service under perf record -g, for a profile of the restart")
	wrapper := []string{"perf", "record", "-g", "-F", "499", "-o", data, "--"}
	s, took, err := startService(ctx, h.kids, h.bin, h.tmp, "large", h.serviceArgs(filepath.Join(h.tmp, "large")), wrapper, readyWait)
	if err != nil {
		return "", err
	}
	// SIGTERM to perf: it stops recording, passes the signal on to the
	// service, and writes its data once the service has exited.
	if _, err := s.stop(stopWait); err != nil {
		return "", err
	}
	var out strings.Builder
	fmt.Fprintf(&out, "A restart under perf record -g -F 499 (ready in %s), the functions that took 2%% of the samples or more:\n", took.Round(time.Millisecond))
	for _, mode := range []string{"--no-children", "--children"} {
		report, err := exec.CommandContext(ctx, "perf", "report", "-i", data, "--stdio", "-g", "none", "--percent-limit", "2", mode, "--sort", "sym").Output()
		if err != nil {
			return "", fmt.Errorf("perf report: %v", err)
		}
		fmt.Fprintf(&out, "\nperf report %s --sort sym (%s):\n", mode, map[string]string{"--no-children": "self", "--children": "with what they called, and self"}[mode])
		lines := 0
		for line := range strings.SplitSeq(string(report), "\n") {
			if line = strings.TrimRight(line, " -"); line != "" && !strings.HasPrefix(line, "#") && lines < 40 {
				out.WriteString(line + "\n")
				lines++
			}
		}
	}
	return out.String(), nil
}

// sortedFiles returns files by name.
func sortedFiles(files []file) []file {
	return slices.SortedFunc(slices.Values(files), func(a, b file) int { return strings.Compare(a.name, b.name) })
}
