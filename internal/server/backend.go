package server

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"
)

// Backend is a store other than the built-in ones (memory, -data-dir),
// served by a command of its own with the same flags, routes and replies:
// the PostgreSQL store's membership-postgres is one.
type Backend struct {
	// Name is the command's name, for its usage and its messages.
	Name string
	// About says in a sentence where the command keeps its data, for -h.
	About string
	// AddFlags adds the backend's own flags; nil when it has none.
	AddFlags func(fs *flag.FlagSet)
	// Descriptors is the most file descriptors the store holds open at
	// once (its database connections): the connection budget leaves them
	// aside.
	Descriptors int
	// Check, when not nil, is called before the service listens, with the
	// environment: it refuses what the store could never open with (no
	// database named, a malformed URL), so that the command fails at once
	// instead of listening first.
	Check func(getenv func(string) string) error
	// Open opens the store once the service listens (answering 503
	// starting meanwhile). ctx ends on the first signal.
	Open func(ctx context.Context, o StoreOptions) (Store, error)
}

// StoreOptions are the flags a backend's store takes, and the environment.
type StoreOptions struct {
	ChangesKeep      int
	ChangesKeepBytes int64
	// IdempotencyBytes and IdempotencyRetention bound the
	// Idempotency-Keys the store remembers, as in memory.Options.
	IdempotencyBytes     int64
	IdempotencyRetention time.Duration
	CommitTimeout        time.Duration
	Logger               *slog.Logger
	Getenv               func(string) string
}

// RunBackend is Run for a command that serves b. The flags that only a
// data directory takes (-data-dir, -repair, -restore) are refused.
func RunBackend(ctx context.Context, b *Backend, args []string, lookupenv func(string) (string, bool), stdout, stderr io.Writer) error {
	return run(ctx, b, args, lookupenv, stdout, stderr)
}

// Main is a command's main: it calls run with the process's arguments,
// environment and output, and exits 1 when it fails. The first SIGINT or
// SIGTERM cancels run's context (a graceful shutdown); a second one ends
// the process at once, with the shell's status for a signal.
func Main(name string, run func(ctx context.Context, args []string, lookupenv func(string) (string, bool), stdout, stderr io.Writer) error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		cancel()
		sig := <-signals
		fmt.Fprintf(os.Stderr, "%s: %v again: exiting at once\n", name, sig)
		os.Exit(128 + int(sig.(syscall.Signal)))
	}()
	setGCPercent(os.Getenv)
	if err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// gcPercent is the garbage collector's target that the service runs with
// unless GOGC says otherwise: a collection when the heap has grown by half
// of what was live, not by all of it (Go's default, GOGC=100). The
// service's heap is mostly its indexes, which live long and hold few
// pointers, so collecting more often costs little time, while the memory a
// process holds beyond its live heap shrinks by about a third (make bench
// measures both).
const gcPercent = 50

// setGCPercent sets the garbage collector's target to gcPercent, unless
// the environment's GOGC has set it.
func setGCPercent(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}

// dataDirFlags are the flags of a data directory, which a backend does not
// take.
var dataDirFlags = map[string]bool{"data-dir": true, "repair": true, "restore": true, "snapshot-bytes": true, "commit-queue-bytes": true}

// checkBackendFlags refuses, for a backend, the flags of a data directory.
func checkBackendFlags(fs *flag.FlagSet, b *Backend) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if dataDirFlags[f.Name] && err == nil {
			err = fmt.Errorf("-%s is for membership, which keeps its data in a directory; %s does not take it (see -h)", f.Name, b.Name)
		}
	})
	return err
}
