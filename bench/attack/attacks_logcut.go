package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"example.com/groupmembership/bench/loadtest"
)

// attackLogCut writes memberships that the service acknowledges, kills it
// with SIGKILL, and cuts its newest log in half, as a lost end of a file
// would after a crash. A crash tears at most the record being written; a
// start that takes a cut for a torn write drops acknowledged changes
// without a word. The start must refuse, naming the file, the offset and
// -repair; with -repair it must start.
//
// It is not measured: it holds no clients, and its bound is what a start
// does, not what it costs.
func attackLogCut(ctx context.Context, h *harness, r *row) error {
	const (
		memberships = 200
		// settle is more than the time between two marks of how far the log
		// is complete (at most every 250 ms), so that the last is written.
		settle = 1200 * time.Millisecond
	)
	dir := filepath.Join(h.tmp, "log-cut-data")
	acked, err := writeThenKill(ctx, h, r, dir, memberships, settle)
	if err != nil {
		return err
	}

	log, err := newestLog(dir)
	if err != nil {
		return err
	}
	fi, err := os.Stat(log)
	if err != nil {
		return err
	}
	cutTo := fi.Size() / 2
	if err := os.Truncate(log, cutTo); err != nil {
		return err
	}
	r.notef("killed with SIGKILL; cut %s from %d to %d bytes", filepath.Base(log), fi.Size(), cutTo)

	// The start after the cut: refused, or up with every acknowledged
	// membership.
	s2, out2, ready, err := startOrRefused(ctx, h, "log-cut-2", serviceOptions{dataDir: dir})
	if err != nil {
		return err
	}
	lost := 0
	if ready {
		present, err := members(ctx, s2, "cut")
		s2.stop(10 * time.Second) // SIGTERM: its log goes out through a buffer
		if err != nil {
			return err
		}
		lost = acked - present
		r.notef("the start after the cut was not refused: it serves %d of the %d acknowledged memberships; what it said of %s: %s",
			present, acked, filepath.Base(log), oneLine(grepLog(out2, filepath.Base(log))))
	}
	said := oneLine(grepLog(out2, filepath.Base(log)))
	if said == "" {
		said = tailOf(out2, 3)
	}
	named := !ready && strings.Contains(said, filepath.Base(log)) && regexp.MustCompile(`offset \d+`).MatchString(said) && strings.Contains(said, "-repair")
	verdict := "refused"
	if ready {
		verdict = "started"
	}
	r.check("the start after the cut refuses, naming the file, an offset and -repair", fmt.Sprintf("%s: %.400s", verdict, said), named)
	r.check("acknowledged memberships lost without a word = 0", fmt.Sprintf("%d of %d", lost, acked), lost == 0)

	return checkRepairStarts(ctx, h, r, dir, acked)
}

// writeThenKill starts the service on dir, has it acknowledge up to
// memberships one-membership POSTs, waits settle for the log's last mark,
// and kills it with SIGKILL. It returns how many were acknowledged.
func writeThenKill(ctx context.Context, h *harness, r *row, dir string, memberships int, settle time.Duration) (int, error) {
	s, _, err := startLogged(ctx, h, h.bin, "log-cut-1", serviceOptions{dataDir: dir})
	if err != nil {
		return 0, err
	}
	defer s.kill()
	acked := 0
	for uid := 1; uid <= memberships; uid++ {
		rep := do(ctx, loadClient, http.MethodPost, s.base+"/group-user/cut", loadtest.UsersBody(int64(uid), 1), formType, 10*time.Second)
		if rep.err != nil || rep.status != http.StatusOK {
			r.notef("write of uid %d: %s%s", uid, rep.outcome(), saying(rep.body))
			continue
		}
		acked++
	}
	if err := sleepCtx(ctx, settle); err != nil {
		return 0, err
	}
	r.notef("%d of %d one-membership POSTs acknowledged; after %s the data directory holds %s", acked, memberships, settle, listDir(dir))
	if err := s.cmd.Process.Kill(); err != nil {
		return 0, err
	}
	<-s.exited
	return acked, nil
}

// checkRepairStarts checks that a start with -repair on dir starts, with
// what the log holds.
func checkRepairStarts(ctx context.Context, h *harness, r *row, dir string, acked int) error {
	s3, out3, ready, err := startOrRefused(ctx, h, "log-cut-3", serviceOptions{dataDir: dir, args: []string{"-repair"}})
	if err != nil {
		return err
	}
	got := "exited: " + tailOf(out3, 3)
	if ready {
		present, err := members(ctx, s3, "cut")
		s3.stop(10 * time.Second)
		if err != nil {
			return err
		}
		got = fmt.Sprintf("started, with %d of the %d acknowledged memberships; the data directory then holds %s", present, acked, listDir(dir))
		if warn := oneLine(grepLog(out3, "repair")); warn != "" {
			got += "; it said: " + warn
		}
	}
	r.check("a start with -repair starts", fmt.Sprintf("%.600s", got), ready)
	return nil
}

// startOrRefused starts the service and waits until it is ready or has
// exited; it returns the path of its output, and whether it is ready (the
// caller kills it).
func startOrRefused(ctx context.Context, h *harness, name string, opts serviceOptions) (*service, string, bool, error) {
	path := filepath.Join(h.tmp, name+".log")
	f, err := os.Create(path)
	if err != nil {
		return nil, "", false, err
	}
	opts.out = f
	s, err := launchService(h.bin, opts)
	f.Close()
	if err != nil {
		return nil, "", false, err
	}
	if err := s.waitReady(ctx, 20*time.Second); err != nil {
		if s.alive() {
			s.kill()
			return nil, path, false, fmt.Errorf("%w; its output: %s", err, tailOf(path, 4))
		}
		return s, path, false, nil
	}
	return s, path, true, nil
}

// members counts the members of group.
func members(ctx context.Context, s *service, group string) (int, error) {
	rep := get(ctx, sideClient, s.base+"/group-user/"+group, 5*time.Second)
	if rep.err != nil || rep.status != http.StatusOK {
		return 0, fmt.Errorf("GET /group-user/%s: %s%s", group, rep.outcome(), saying(rep.body))
	}
	var list []struct {
		UID int64 `json:"uid"`
	}
	if err := json.Unmarshal(rep.body, &list); err != nil {
		return 0, fmt.Errorf("GET /group-user/%s: %w", group, err)
	}
	return len(list), nil
}

// newestLog is the path of the log-N.wal of dir with the largest N.
func newestLog(dir string) (string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "log-*.wal"))
	if err != nil || len(names) == 0 {
		return "", fmt.Errorf("no log-*.wal in %s: %s", dir, listDir(dir))
	}
	seq := func(p string) uint64 {
		n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "log-"), ".wal"), 10, 64)
		return n
	}
	return slices.MaxFunc(names, func(a, b string) int { return cmp.Compare(seq(a), seq(b)) }), nil
}

// listDir names the entries of dir, with the size of each file.
func listDir(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && !e.IsDir() {
			parts = append(parts, fmt.Sprintf("%s (%d B)", e.Name(), fi.Size()))
		} else {
			parts = append(parts, e.Name()+"/")
		}
	}
	return strings.Join(parts, ", ")
}

// oneLine joins lines with " | ".
func oneLine(lines []string) string {
	return strings.Join(lines, " | ")
}
