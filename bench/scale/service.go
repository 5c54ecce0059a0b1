package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"example.com/groupmembership/bench/loadtest"
)

// children are the processes the harness started. kill ends those still
// running, so that no exit path leaves one behind; each is also started
// with a parent-death signal, for when the harness itself is killed.
type children struct {
	mu   sync.Mutex // guards cmds
	cmds map[*exec.Cmd]bool
}

func (c *children) start(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	c.cmds[cmd] = true
	return nil
}

// forget is called once cmd has been waited for.
func (c *children) forget(cmd *exec.Cmd) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.cmds, cmd)
}

// kill kills every child still running, by its process id.
func (c *children) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for cmd := range c.cmds {
		_ = cmd.Process.Kill()
	}
}

// service is one run of the service binary.
type service struct {
	name string
	base string // http://127.0.0.1:port
	pid  int
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// serviceEnv is the harness's environment without what would change how
// the service's collector runs: it runs with its own defaults (GOGC=50).
func serviceEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "GOGC=") || strings.HasPrefix(kv, "GOMEMLIMIT=")
	})
}

// startService starts bin with args on a free loopback port, its output
// appended to DIR/NAME.log, under wrapper (such as perf record) when given,
// and waits until /readyz answers 200, at most wait. It returns the time
// from the start of the process to its first 200.
func startService(ctx context.Context, kids *children, bin, dir, name string, args, wrapper []string, wait time.Duration) (*service, time.Duration, error) {
	addr, err := loadtest.FreeAddr()
	if err != nil {
		return nil, 0, err
	}
	logFile, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, 0, err
	}
	argv := append(append(append([]string{}, wrapper...), bin, "-addr", addr), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr, cmd.Env = logFile, logFile, serviceEnv()
	s := &service{name: name, base: "http://" + addr, cmd: cmd, done: make(chan struct{})}
	start := time.Now()
	if err := kids.start(cmd); err != nil {
		logFile.Close()
		return nil, 0, err
	}
	s.pid = cmd.Process.Pid
	go func() {
		_ = cmd.Wait()
		kids.forget(cmd)
		logFile.Close()
		close(s.done)
	}()
	if err := loadtest.WaitHTTP(ctx, s.base+"/readyz", wait, s.done); err != nil {
		s.kill()
		return nil, 0, fmt.Errorf("the %s service did not get ready: %w (its log: %s)", name, err, logFile.Name())
	}
	return s, time.Since(start), nil
}

// stop sends SIGTERM to the process (the wrapper, when there is one) and
// waits for it to exit, at most wait; then kills it. It returns how long
// the stop took.
func (s *service) stop(wait time.Duration) (time.Duration, error) {
	start := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	select {
	case <-s.done:
		return time.Since(start), nil
	case <-time.After(wait):
		s.kill()
		return time.Since(start), fmt.Errorf("the %s service did not stop within %s of SIGTERM: killed", s.name, wait)
	}
}

// kill kills the process and waits for it.
func (s *service) kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// rss returns the service's VmRSS, and its peak, VmHWM, in bytes.
func (s *service) rss() (rss, peak int64, err error) {
	if rss, err = loadtest.RSS(s.pid); err != nil {
		return 0, 0, err
	}
	peak, err = loadtest.PeakRSS(s.pid)
	return rss, peak, err
}

// metric returns the value of an unlabelled metric of /metrics.
func (s *service) metric(ctx context.Context, name string) (float64, error) {
	body, err := loadtest.Get(ctx, http.DefaultClient, s.base+"/metrics")
	if err != nil {
		return 0, err
	}
	if v, ok := loadtest.ParseMetrics(body)[name]; ok {
		return v, nil
	}
	return 0, fmt.Errorf("no %s in /metrics", name)
}
