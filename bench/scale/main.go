// Command scale measures the service at the size its targets are stated
// for: 100 million memberships (a million groups whose sizes follow a power law
// from 1 to 100,000 members, of 10 million users), loaded through the
// HTTP API with bulk adds (POST /batch) into the service built from this
// checkout, with -data-dir and the change feed off (-changes-keep 0). It
// reports the RSS growth per membership, the time to load, the snapshot
// and log on disk, the time to restart from them until /readyz answers
// 200, and four requests at 50 connections (GET of a group of 10, a page
// of 100 of the largest group, a member check, GET /user-group of a user
// in 10 groups), each as a ratio to the same request on a service holding
// 1,000 memberships, with the same flags, side by side in one run. It
// prints each target and whether it is met.
//
// Run it with `make bench-scale` from the repository root. Before it
// starts it says how much memory and disk the run needs and refuses to
// start without them; it stops by itself (-timeout) and removes its
// temporary directory and every process it started on every exit,
// Ctrl-C included.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

type options struct {
	groups, users, maxGroup int
	exponent                float64
	loadConns               int
	rounds                  int
	duration                time.Duration
	settle                  time.Duration
	timeout                 time.Duration
	profile                 string // when to profile a restart: auto, always, never
	serviceArgs             string // more flags for both services
}

// The targets: RSS growth per membership (feed off, idle), restart time,
// and each request's ratio of the large service to the small one.
const (
	targetBytesPerMembership = 16
	targetRestart            = 30 * time.Second
	targetRatio              = 0.8
)

func main() {
	var opts options
	flag.IntVar(&opts.groups, "groups", 1_000_000, "groups of the large service")
	flag.IntVar(&opts.users, "users", 10_000_000, "uids are drawn from 1 to this")
	flag.IntVar(&opts.maxGroup, "max-group", 100_000, "the largest group size the power law draws")
	flag.Float64Var(&opts.exponent, "exponent", defaultExponent, "the power law's exponent: P(size = s) is proportional to s^-exponent")
	flag.IntVar(&opts.loadConns, "load-conns", 4, "connections that load the memberships at once")
	flag.IntVar(&opts.rounds, "rounds", 3, "rounds of the load of each request; the tables show medians")
	flag.DurationVar(&opts.duration, "duration", 5*time.Second, "length of each load run")
	flag.DurationVar(&opts.settle, "settle", 4*time.Minute, "how long the loaded service is left idle before its RSS is taken again")
	flag.DurationVar(&opts.timeout, "timeout", 75*time.Minute, "stop, clean up and fail when the run takes longer than this")
	flag.StringVar(&opts.profile, "profile-restart", "auto", "profile a further restart with perf record -g: auto (when the restart misses its target), always or never")
	flag.StringVar(&opts.serviceArgs, "service-args", "", "more flags for both services, such as \"-snapshot-bytes 16777216\" (the figures are then not those the targets are stated for)")
	flag.Parse()
	if err := opts.check(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(2)
	}
	os.Exit(runMain(opts))
}

func (o options) check() error {
	switch {
	case o.groups < 1, o.maxGroup < 1, o.users < 1, o.loadConns < 1, o.rounds < 1:
		return errors.New("-groups, -users, -max-group, -load-conns and -rounds must be at least 1")
	case o.maxGroup > o.users:
		return fmt.Errorf("-max-group %d is more than the users (-users %d)", o.maxGroup, o.users)
	case o.profile != "auto" && o.profile != "always" && o.profile != "never":
		return fmt.Errorf("-profile-restart is auto, always or never, not %q", o.profile)
	}
	return nil
}

// runMain runs the benchmark under a deadline and Ctrl-C, and returns the
// exit status. Whatever ends it, the children are killed and the
// temporary directory removed; should the run not return within 30 s of
// being stopped, that is done here, and the harness exits.
func runMain(opts options) int {
	ctx, cancel := context.WithTimeoutCause(context.Background(), opts.timeout,
		fmt.Errorf("the run took longer than -timeout %s: stopped before it finished", opts.timeout))
	defer cancel()
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	h := &harness{opts: opts, kids: &children{cmds: map[*exec.Cmd]bool{}}}
	defer h.cleanup()
	go func() {
		<-ctx.Done()
		time.Sleep(30 * time.Second)
		fmt.Fprintln(os.Stderr, "bench-scale: the run did not stop within 30 s of being stopped: killing its processes")
		h.cleanup()
		os.Exit(1)
	}()
	err := h.run(ctx)
	if err == nil {
		return 0
	}
	if ctx.Err() != nil {
		err = context.Cause(ctx)
		if errors.Is(err, context.Canceled) {
			err = errors.New("interrupted: stopped the services and removed the temporary directory")
		}
	}
	fmt.Fprintln(os.Stderr, "bench-scale:", err)
	return 1
}

// harness is one run.
type harness struct {
	opts options
	kids *children
	tmp  string // the temporary directory, removed at the end
	bin  string // the service, built from the checkout
}

// cleanup kills the children still running and removes the temporary
// directory. It may run twice.
func (h *harness) cleanup() {
	h.kids.kill()
	if h.tmp != "" {
		_ = os.RemoveAll(h.tmp)
	}
}

func (h *harness) run(ctx context.Context) error {
	opts := h.opts
	if _, err := exec.LookPath("wrk"); err != nil {
		return errors.New("wrk is not installed: run `make bench-scale`, which installs it")
	}
	// Refuse a run the machine cannot hold before drawing its groups, which
	// for a huge -groups takes minutes and gigabytes itself: the law's mean
	// tells the memberships (the draw follows it to a fraction of a
	// percent).
	estimate := int64(math.Ceil(float64(opts.groups) * powerLawMean(opts.maxGroup, opts.exponent) * 1.01))
	if have, err := haveFor(os.TempDir()); err != nil {
		return err
	} else if err := needsFor(estimate).check(have, os.TempDir()); err != nil {
		return fmt.Errorf("refusing to start: about %d memberships: %w", estimate, err)
	}
	sizes := groupSizes(opts.groups, opts.maxGroup, opts.exponent)
	large := state{sizes: sizes, members: func(g int) []int64 { return members(g, int(sizes[g]), opts.users) }}
	total := large.memberships()
	fmt.Printf("bench-scale: %d memberships in %d groups (power law, exponent %.2f, sizes 1 to %d, mean %.2f), uids uniform in 1..%d; -data-dir, -changes-keep 0 %s\n",
		total, opts.groups, opts.exponent, opts.maxGroup, float64(total)/float64(opts.groups), opts.users, opts.serviceArgs)
	if err := h.preflight(total); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "membership-bench-scale-")
	if err != nil {
		return err
	}
	h.tmp = tmp
	h.bin = filepath.Join(tmp, "membership")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", h.bin, ".").CombinedOutput(); err != nil {
		return fmt.Errorf("building the service: %v\n%s", err, out)
	}
	var r report
	r.memberships, r.groups = total, opts.groups
	big, err := h.loadLarge(ctx, large, &r)
	if err != nil {
		return err
	}
	if big, err = h.restart(ctx, &r); err != nil {
		return err
	}
	small, err := h.startSmall(ctx)
	if err != nil {
		return err
	}
	kinds, err := h.kinds(ctx, big, large, small)
	if err != nil {
		return err
	}
	fmt.Printf("measuring: %d rounds of %s, wrk -t2 -c50, each request cycling through %d paths on either service\n", opts.rounds, opts.duration, picks)
	if r.results, err = measure(ctx, tmp, kinds, big, small, opts.rounds, opts.duration); err != nil {
		return err
	}
	r.kinds = kinds
	for _, s := range []*service{big, small} {
		if _, err := s.stop(time.Minute); err != nil {
			return err
		}
	}
	if opts.profile == "always" || (opts.profile == "auto" && r.restart > targetRestart) {
		if r.profile, err = h.profileRestart(ctx); err != nil {
			return err
		}
	}
	r.print()
	return nil
}

// preflight prints what the run needs and what the machine has, and
// refuses when it has less.
func (h *harness) preflight(total int64) error {
	n := needsFor(total)
	dir := os.TempDir()
	have, err := haveFor(dir)
	if err != nil {
		return err
	}
	fmt.Printf("needs: %s of memory (%d B a membership for the large service's peak, while it writes a snapshot or restarts, + %s), %s of disk in %s (3 snapshots of at most %d B a membership + 3 logs of 64 MiB + %s for the services' logs); has: MemAvailable %s, %s free",
		gib(n.memory), peakBytesPerMembership, gib(memoryHeadroom), gib(n.disk), dir, snapshotBytesPerMembership, gib(diskHeadroom), gib(have.memory), gib(have.disk))
	if have.tmpfs {
		fmt.Print(" (a tmpfs: its files count as memory)")
	}
	fmt.Println()
	if err := n.check(have, dir); err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	return nil
}
