package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"example.com/groupmembership/bench/loadtest"
)

// service is one process of the service under attack, on 127.0.0.1.
type service struct {
	*child
	addr   string // host:port
	base   string // http://host:port, or https://
	pid    int
	stderr *tailBuffer // nil when the caller gave its own output
}

// child is a process the harness started: a service or a holder.
type child struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
	waitErr error         // set before exited is closed
	kill    func()        // kills it now; also registered with atExit
}

// startChild starts cmd, what ("service", "holder") naming it in
// messages. Its own process group keeps a terminal's Ctrl-C for the
// harness, which stops things in a safe order (thaw first); Pdeathsig
// kills it if the harness dies without running its cleanups.
func startChild(cmd *exec.Cmd, what string) (*child, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	pid := cmd.Process.Pid
	c.kill = atExit(fmt.Sprintf("kill %s pid %d", what, pid), func() {
		_ = cmd.Process.Kill() // a no-op once it has been waited for
		select {
		case <-c.exited:
		case <-time.After(5 * time.Second):
			fmt.Fprintf(os.Stderr, "attack: %s pid %d did not die within 5s of SIGKILL\n", what, pid)
		}
	})
	return c, nil
}

type serviceOptions struct {
	dataDir string
	// args are more flags, after -addr and -data-dir.
	args []string
	// nofile, when set, is the service's limit of open descriptors, soft
	// and hard, set by a shell's ulimit that then execs the service.
	nofile int
	// out, when set, receives the service's stdout and stderr; otherwise
	// stdout goes to /dev/null and the end of stderr is kept for errors.
	out *os.File
	// tls says that args serve HTTPS (tlsOptions): base is https://.
	tls bool
}

// startService starts a fresh process on a free port and waits until
// /readyz says 200.
func startService(ctx context.Context, bin string, opts serviceOptions) (*service, error) {
	s, err := launchService(bin, opts)
	if err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx, 20*time.Second); err != nil {
		s.kill()
		return nil, err
	}
	return s, nil
}

// launchService starts a fresh process on a free port and returns at once;
// the caller waits for it to be ready, or to exit.
func launchService(bin string, opts serviceOptions) (*service, error) {
	addr, err := loadtest.FreeAddr()
	if err != nil {
		return nil, fmt.Errorf("finding a free port: %w", err)
	}
	args := []string{"-addr", addr}
	if opts.dataDir != "" {
		args = append(args, "-data-dir", opts.dataDir)
	}
	args = append(args, opts.args...)
	cmd := exec.Command(bin, args...)
	if opts.nofile > 0 {
		// The shell execs the service: the pid stays the service's.
		cmd = exec.Command("/bin/sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, opts.nofile), bin}, args...)...)
	}
	s := &service{addr: addr, base: "http://" + addr}
	if opts.tls {
		s.base = "https://" + addr
	}
	if opts.out != nil {
		cmd.Stdout, cmd.Stderr = opts.out, opts.out
	} else {
		s.stderr = &tailBuffer{max: 4 << 10}
		cmd.Stderr = s.stderr
	}
	c, err := startChild(cmd, "service")
	if err != nil {
		return nil, fmt.Errorf("starting the service: %w", err)
	}
	s.child, s.pid = c, cmd.Process.Pid
	return s, nil
}

func (s *service) alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

func (s *service) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		rep := get(ctx, sideClient, s.base+"/readyz", time.Second)
		if rep.status == http.StatusOK {
			return nil
		}
		if !s.alive() {
			return fmt.Errorf("the service exited before it was ready (%v): %s", s.waitErr, s.stderrTail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the service was not ready within %s (last: %s)", limit, rep.outcome())
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// stop sends SIGTERM and waits up to limit for the process to exit; then it
// kills it. It reports how long the exit took and whether it was clean.
func (s *service) stop(limit time.Duration) (took time.Duration, exitedInTime bool) {
	start := time.Now()
	if s.alive() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-s.exited:
		return time.Since(start), true
	case <-time.After(limit):
		s.kill()
		return time.Since(start), false
	}
}

// rss is the service's resident set (VmRSS), in bytes; 0 when unreadable.
func (s *service) rss() int64 {
	rss, _ := loadtest.RSS(s.pid)
	return rss
}

func (s *service) stderrTail() string {
	if s.stderr == nil {
		return "(output not kept)"
	}
	return strings.TrimSpace(s.stderr.String())
}

// metrics scrapes /metrics into series (name with labels, as written) and
// values.
func (s *service) metrics(ctx context.Context, timeout time.Duration) (map[string]float64, error) {
	rep := get(ctx, sideClient, s.base+"/metrics", timeout)
	if rep.err != nil {
		return nil, rep.err
	}
	if rep.status != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", rep.outcome())
	}
	return loadtest.ParseMetrics(rep.body), nil
}

// gauge reads one unlabelled series; ok is false when the scrape failed or
// the service does not have it.
func (s *service) gauge(ctx context.Context, name string, timeout time.Duration) (float64, bool) {
	m, err := s.metrics(ctx, timeout)
	if err != nil {
		return 0, false
	}
	v, ok := m[name]
	return v, ok
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startProbed starts a service as startService does and gives the probe's
// group its 10 members; the caller kills it.
func startProbed(ctx context.Context, bin string, opts serviceOptions) (*service, error) {
	s, err := startService(ctx, bin, opts)
	if err != nil {
		return nil, err
	}
	if err := seed(ctx, s, "probe", 1, 10); err != nil {
		s.kill()
		return nil, err
	}
	return s, nil
}
