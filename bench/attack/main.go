// Command attack runs thirteen attacks on the membership service, each against
// a fresh process on 127.0.0.1, and checks that the service stays bounded:
// its memory grows by at most 256 MiB, a probe that reads a small group keeps
// a p99 under 100 ms, and its goroutines come back to where they were once
// the attack stops. The attacks on connections (idle-conns, header-stall,
// handshake-stall over TLS, parked-polls, pg-idle-conns) probe /healthz,
// /readyz and /metrics too, each held to the same p99, and check that the
// service's log has no EMFILE; log-cut checks that a log cut after a crash
// is refused rather than taken for a torn write. It prints one table row
// per attack, the figures behind each row, a met / NOT MET line per bound,
// and exits 1 when any is missed.
//
// Run it with `make attack` from the repository root, which builds it into
// bin/attack (the harnesses are a module of their own, bench/go.mod) and
// runs it there. It builds the service from the working tree, or from HEAD in a
// temporary git worktree when the working tree does not compile; and
// membership-postgres the same way, for pg-idle-conns, which starts a
// throwaway PostgreSQL from the machine's initdb and pg_ctl. Two attacks
// mount loop filesystems and one freezes its own: those need root, mkfs.ext4,
// mount and fsfreeze, and are reported as skipped (NOT MET) without them, as
// pg-idle-conns is without PostgreSQL. idle-conns holds 20,000 connections
// in child processes of its own (each process may hold only as many
// descriptors as the hard limit allows). The whole run takes about four
// minutes, at most -budget, and undoes what it set up on every way out,
// Ctrl-C included.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"example.com/groupmembership/bench/loadtest"
	"example.com/groupmembership/internal/fdlimit"
)

// attackSpec is one attack. nominal is its share of the time budget, without
// the wait for goroutines to settle, which takes what the budget leaves.
type attackSpec struct {
	name    string
	nominal time.Duration
	run     func(ctx context.Context, h *harness, r *row) error
}

var attacks = []attackSpec{
	{"feed-churn", 34 * time.Second, attackFeedChurn},
	{"slow-bodies", 24 * time.Second, attackSlowBodies},
	{"big-list", 30 * time.Second, attackBigList},
	{"stalled-stdout", 40 * time.Second, attackStalledStdout},
	{"stalled-disk", 22 * time.Second, attackStalledDisk},
	{"full-disk", 12 * time.Second, attackFullDisk},
	{"metrics-scale", 22 * time.Second, attackMetricsScale},
	{"idle-conns", 30 * time.Second, attackIdleConns},
	{"header-stall", 12 * time.Second, attackHeaderStall},
	{"handshake-stall", 12 * time.Second, attackHandshakeStall},
	{"parked-polls", 20 * time.Second, attackParkedPolls},
	{"log-cut", 5 * time.Second, attackLogCut},
	{"pg-idle-conns", 45 * time.Second, attackPgIdleConns},
}

// defaultBudget is the time of the whole run, builds included.
const defaultBudget = 7 * time.Minute

// harness is what the attacks share.
type harness struct {
	bin string
	// pgBin is membership-postgres, built when an attack first needs it
	// unless -pgbin named one; head says to build from HEAD.
	pgBin string
	head  bool
	tmp   string // the run's temporary directory, removed at exit
	// openRate is how many connections a second the connection attacks
	// open (-open-rate); 0: as fast as they go.
	openRate int
	deadline time.Time
	// reserve is the nominal time of the attacks after the current one.
	reserve time.Duration
	start   time.Time
}

// settleLimit is how long the current attack may wait for goroutines to
// settle: up to maxSettle, but never eating into the time the later attacks
// need. tail is what the attack still has to do after settling.
func (h *harness) settleLimit(tail time.Duration) time.Duration {
	left := time.Until(h.deadline) - h.reserve - tail - 5*time.Second
	return min(maxSettle, max(2*time.Second, left))
}

func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(h.start).Seconds(), fmt.Sprintf(format, args...))
}

func main() {
	if orders := os.Getenv(holderEnv); orders != "" {
		os.Exit(runHolder(orders))
	}
	only := flag.String("only", "", "comma-separated `names` of the attacks to run (default all): "+attackNames())
	bin := flag.String("bin", "", "attack this service `binary` instead of building one")
	pgBin := flag.String("pgbin", "", "attack this membership-postgres `binary` instead of building one")
	head := flag.Bool("head", false, "build the service from HEAD (a temporary git worktree), not the working tree")
	budget := flag.Duration("budget", defaultBudget, "time for the whole run, build included")
	openRate := flag.Int("open-rate", 2000, "connections a second that idle-conns, header-stall, handshake-stall, parked-polls and pg-idle-conns open; 0: as fast as they go, a flood of connections besides")
	flag.Parse()
	os.Exit(run(*only, *bin, *pgBin, *head, *openRate, *budget))
}

func run(only, bin, pgBin string, head bool, openRate int, budget time.Duration) (code int) {
	handleSignals()
	defer func() {
		if r := recover(); r != nil {
			runCleanups()
			panic(r)
		}
		runCleanups()
	}()
	h := &harness{start: time.Now(), deadline: time.Now().Add(budget), head: head, pgBin: pgBin, openRate: openRate}
	// The last resort when something does not honour its deadline: undo
	// everything and leave, rather than hold a frozen filesystem.
	hard := time.AfterFunc(budget+20*time.Second, func() {
		fmt.Fprintln(os.Stderr, "attack: hard deadline passed: cleaning up and exiting")
		runCleanups()
		os.Exit(3)
	})
	defer hard.Stop()
	ctx, cancel := context.WithDeadline(context.Background(), h.deadline)
	defer cancel()

	selected, err := selectAttacks(only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "attack:", err)
		return 2
	}
	raiseNoFile(h)
	tmp, err := os.MkdirTemp("", "membership-attack-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "attack:", err)
		return 2
	}
	defer atExit("remove "+tmp, func() { _ = os.RemoveAll(tmp) })()
	h.tmp = tmp

	if bin == "" {
		h.logf("building the service")
		var from string
		bin, from, err = buildService(ctx, h, tmp, head, buildTarget{pkg: ".", out: "membership"})
		if err != nil {
			fmt.Fprintln(os.Stderr, "attack:", err)
			return 2
		}
		h.logf("built from %s", from)
	}
	h.bin = bin
	for _, b := range []string{bin, pgBin} {
		if fi, err := os.Stat(b); b != "" && (err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0) {
			fmt.Fprintf(os.Stderr, "attack: %s is not an executable file\n", b)
			return 2
		}
	}

	rows := runAttacks(ctx, h, selected)
	report(os.Stdout, rows, time.Since(h.start))
	for _, r := range rows {
		if !r.met() {
			return 1
		}
	}
	return 0
}

func attackNames() string {
	var names []string
	for _, a := range attacks {
		names = append(names, a.name)
	}
	return strings.Join(names, ",")
}

func selectAttacks(only string) ([]attackSpec, error) {
	if only == "" {
		return attacks, nil
	}
	var sel []attackSpec
	for name := range strings.SplitSeq(only, ",") {
		i := slices.IndexFunc(attacks, func(a attackSpec) bool { return a.name == strings.TrimSpace(name) })
		if i < 0 {
			return nil, fmt.Errorf("no attack %q; there are %s", name, attackNames())
		}
		sel = append(sel, attacks[i])
	}
	return sel, nil
}

// raiseNoFile lifts the soft limit on open files to the hard one: the slow
// bodies alone hold 2000 connections, parked-polls 8000, and the service
// inherits the limit (idle-conns sets its own).
func raiseNoFile(h *harness) {
	lim, err := fdlimit.Raise()
	if err != nil {
		h.logf("reading RLIMIT_NOFILE: %v", err)
		return
	}
	if lim.Soft < 4096 {
		h.logf("warning: only %d open files allowed; slow-bodies needs over 2000", lim.Soft)
	}
}

// buildTarget is a command to build: its package, in the module at module
// (a directory of the repository, "" for the root), into a file named out.
type buildTarget struct {
	module, pkg, out string
}

// buildService builds t into dir. The working tree may be in the middle of
// an edit that does not compile; then it tries once more a little later,
// and then builds HEAD in a temporary worktree, which it removes.
func buildService(ctx context.Context, h *harness, dir string, head bool, t buildTarget) (bin, from string, err error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, t.out)
	if !head {
		for attempt := range 2 {
			if err = goBuild(ctx, filepath.Join(root, t.module), t.pkg, bin); err == nil {
				return bin, "the working tree " + root, nil
			}
			h.logf("the working tree does not build (attempt %d): %v", attempt+1, firstLines(err.Error(), 6))
			if attempt == 0 {
				if err := sleepCtx(ctx, 5*time.Second); err != nil {
					return "", "", err
				}
			}
		}
	}
	wt := filepath.Join(dir, "head-"+t.out)
	if err := command(ctx, time.Minute, "git", "-C", root, "worktree", "add", "--detach", wt, "HEAD"); err != nil {
		return "", "", err
	}
	removeWT := atExit("remove worktree "+wt, func() {
		if err := command(context.Background(), time.Minute, "git", "-C", root, "worktree", "remove", "--force", wt); err != nil {
			fmt.Fprintf(os.Stderr, "attack: %v\n", err)
		}
	})
	defer removeWT()
	if err := goBuild(ctx, filepath.Join(wt, t.module), t.pkg, bin); err != nil {
		return "", "", err
	}
	rev, _ := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	return bin, "HEAD " + strings.TrimSpace(string(rev)) + " (a temporary worktree)", nil
}

func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the module: run it from the repository root")
	}
	return filepath.Dir(mod), nil
}

func goBuild(ctx context.Context, dir, pkg, out string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build in %s: %w\n%s", dir, err, b.String())
	}
	return nil
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n    ")
}

// report prints the table, the figures behind each row, and the bounds.
func report(out *os.File, rows []*row, took time.Duration) {
	reportTable(out, rows, took)
	reportFigures(out, rows)
	reportBounds(out, rows)
}

// reportTable prints a line per attack: memory, goroutines, the probe's
// latency, and how many bounds it met.
func reportTable(out *os.File, rows []*row, took time.Duration) {
	fmt.Fprintf(out, "\n== attack results (run took %s) ==\n\n", fmtDur(took))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "attack\tbase RSS\tpeak growth\tgoroutines before/peak/after\tprobe p50\tprobe p99\tbounds met\t")
	for _, r := range rows {
		if r.skipped != "" && r.peakRSS == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t%s\t\n", r.name, r.skipped)
			continue
		}
		p50, p99 := "-", "-"
		if r.probe != nil {
			p50, p99 = r.probe.pctString(50), r.probe.pctString(99)
		}
		base, growth := "-", "-"
		if r.baseRSS > 0 {
			base = loadtest.MiB(r.baseRSS)
		}
		if r.peakRSS > 0 {
			growth = "+" + loadtest.MiB(r.peakRSS-r.baseRSS)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s/%s\t%s\t%s\t%s\t\n", r.name, base, growth,
			fmtCount(r.gBefore), fmtCount(r.gPeak), fmtCount(r.gAfter), p50, p99, metCount(r))
	}
	tw.Flush()
}

// reportFigures prints, for each attack, what it measured and why it failed
// or was skipped.
func reportFigures(out *os.File, rows []*row) {
	fmt.Fprintln(out, "\nfigures:")
	for _, r := range rows {
		fmt.Fprintf(out, "  %s (%s):\n", r.name, fmtDur(r.took))
		if r.skipped != "" {
			fmt.Fprintf(out, "    %s\n", r.skipped)
		}
		if r.err != nil {
			fmt.Fprintf(out, "    ERROR: %s\n", firstLines(r.err.Error(), 8))
		}
		for _, n := range r.notes {
			fmt.Fprintf(out, "    %s\n", n)
		}
	}
}

// reportBounds prints each bound, met or NOT MET, and the count missed.
func reportBounds(out *os.File, rows []*row) {
	fmt.Fprintln(out, "\nbounds:")
	missed := 0
	for _, r := range rows {
		if r.skipped != "" {
			fmt.Fprintf(out, "  NOT MET  %-15s %s\n", r.name, r.skipped)
			missed++
		}
		if r.err != nil {
			fmt.Fprintf(out, "  NOT MET  %-15s the attack failed: %s\n", r.name, firstLines(r.err.Error(), 1))
			missed++
		}
		for _, b := range r.bounds {
			verdict := "met    "
			if !b.ok {
				verdict = "NOT MET"
				missed++
			}
			fmt.Fprintf(out, "  %s  %-15s %s: %s\n", verdict, r.name, b.what, b.got)
		}
	}
	if missed == 0 {
		fmt.Fprintln(out, "\nevery bound met")
	} else {
		fmt.Fprintf(out, "\n%d bounds NOT MET\n", missed)
	}
}

func metCount(r *row) string {
	ok := 0
	for _, b := range r.bounds {
		if b.ok {
			ok++
		}
	}
	s := fmt.Sprintf("%d/%d", ok, len(r.bounds))
	if r.err != nil {
		s += " (failed)"
	}
	return s
}

func fmtCount(n int) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// runAttacks runs the selected attacks in turn, each with the time the later
// ones need held back, and returns a row for each.
func runAttacks(ctx context.Context, h *harness, selected []attackSpec) []*row {
	var rows []*row
	for i, a := range selected {
		r := newRow(a.name)
		rows = append(rows, r)
		h.reserve = 0
		for _, later := range selected[i+1:] {
			h.reserve += later.nominal
		}
		if time.Until(h.deadline) < a.nominal/2 {
			r.skipped = "not run: the time budget is spent"
			h.logf("%s: %s", a.name, r.skipped)
			continue
		}
		h.logf("%s: start", a.name)
		start := time.Now()
		err := a.run(ctx, h, r)
		r.took = time.Since(start)
		var skip errSkip
		switch {
		case errors.As(err, &skip):
			r.skipped = "skipped: " + string(skip)
		case err != nil:
			r.err = err
		}
		h.logf("%s: done in %s", a.name, fmtDur(r.took))
	}
	return rows
}
