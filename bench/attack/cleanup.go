package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"
	"time"
)

// The harness freezes filesystems, mounts loop devices and starts services.
// A frozen filesystem left behind hangs every later sync and unmount on the
// machine, so whatever it sets up is undone on every way out: the normal end
// of main, a signal, a panic in any goroutine the harness starts, the hard
// deadline. Each undo runs at most once, newest first.

type cleanupFunc struct {
	name string
	once sync.Once
	fn   func()
}

var cleanups struct {
	mu    sync.Mutex
	funcs []*cleanupFunc
}

// atExit registers fn to run on the way out and returns a function that runs
// it now instead; either way it runs once. fn must bound its own waits: a
// signal handler may be waiting on it.
func atExit(name string, fn func()) (runNow func()) {
	c := &cleanupFunc{name: name, fn: fn}
	cleanups.mu.Lock()
	cleanups.funcs = append(cleanups.funcs, c)
	cleanups.mu.Unlock()
	return func() { c.once.Do(c.fn) }
}

// runCleanups runs every registered cleanup not yet run, newest first. A
// cleanup that panics does not stop the ones after it.
func runCleanups() {
	cleanups.mu.Lock()
	funcs := append([]*cleanupFunc(nil), cleanups.funcs...)
	cleanups.mu.Unlock()
	for i := len(funcs) - 1; i >= 0; i-- {
		c := funcs[i]
		func() {
			defer func() {
				if r := recover(); r != nil {
					fmt.Fprintf(os.Stderr, "attack: cleanup %q panicked: %v\n", c.name, r)
				}
			}()
			c.once.Do(c.fn)
		}()
	}
}

// handleSignals undoes everything and exits on SIGINT, SIGTERM or SIGHUP.
// Later signals are ignored while the cleanups run, so that a second Ctrl-C
// cannot leave a filesystem frozen.
func handleSignals() {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		sig := <-ch
		fmt.Fprintf(os.Stderr, "\nattack: %v: cleaning up (thaw, stop services, unmount)\n", sig)
		runCleanups()
		os.Exit(130)
	}()
}

// guard turns a panic in a harness goroutine into cleanups and an exit. A
// panic in a goroutine does not run main's deferred calls, so without this a
// crash could leave a filesystem frozen.
func guard() {
	if r := recover(); r != nil {
		fmt.Fprintf(os.Stderr, "attack: panic: %v\n%s", r, debug.Stack())
		runCleanups()
		os.Exit(2)
	}
}

// spawn runs fn in a guarded goroutine counted by wg.
func spawn(wg *sync.WaitGroup, fn func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer guard()
		fn()
	}()
}

// spawnEvery calls fn, in a guarded goroutine counted by wg, at once and
// then every d, until ctx ends.
func spawnEvery(ctx context.Context, wg *sync.WaitGroup, d time.Duration, fn func()) {
	spawn(wg, func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for ctx.Err() == nil {
			fn()
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
	})
}
