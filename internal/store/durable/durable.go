package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/internal/fileutil"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/wal"
	"example.com/groupmembership/internal/store/wal/record"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/directory"
)

// DefaultSnapshotBytes is the default log size past which a snapshot is
// written and the log restarted.
const DefaultSnapshotBytes = 64 << 20

// maxBatch bounds how many changes share one fsync, and how many wait for
// one: the queue of changes holds at most this many.
const maxBatch = 4096

// Defaults for Options.
const (
	DefaultCommitTimeout = 5 * time.Second
	DefaultQueueBytes    = 64 << 20
)

// MaxEntryBytes is the most bytes one change takes in the log: a change
// whose record is larger is refused. A caller that bounds the size of a
// change (the largest body, the most users) checks LargestEntry against
// it.
const MaxEntryBytes = wal.MaxPayload

// LargestEntry bounds the log record of one change that requests of at
// most maxBodyBytes and maxUsers users, and batches of at most
// maxBatchWrites writes, can ask for: see record.Largest.
func LargestEntry(maxBodyBytes int64, maxUsers, maxBatchWrites int) int64 {
	return record.Largest(maxBodyBytes, maxUsers, maxBatchWrites)
}

// MaxOpenFiles is the most file descriptors a Store holds open at once,
// from the lock (LockDataDir, or Open) to Close, for a caller that
// keeps a reserve of descriptors for its data directory:
//
//   - 2 for the lock, held throughout: the directory itself and LOCK;
//   - 1 for MARK, held throughout (written in place);
//   - 2 for the committer goroutine: the log, and either the next log while
//     a snapshot switches to it, or one file at a time that it opens and
//     closes (a new log being created, DATA or its temporary file, the
//     directory to fsync, a file to fsync after a failed write, the probe
//     of a failing disk);
//   - 1 for the snapshot goroutine, one file at a time: its temporary file,
//     the directory to fsync, the snapshot read back, the directory listed.
//
// The marker goroutine opens nothing. Recovery, before the goroutines
// start, holds the lock, the log, MARK and one file at a time at most;
// Close, after they stopped, the lock, the log, MARK and one more.
const MaxOpenFiles = 6

// probeInterval is how often a store whose last write failed tries the disk
// again by itself, so that it says it is writable again without waiting for
// a change to try.
const probeInterval = time.Second

// Options configure Open.
type Options struct {
	// SnapshotBytes is the log size past which a snapshot is written in the
	// background and the log restarted; DefaultSnapshotBytes when <= 0.
	SnapshotBytes int64
	// Repair truncates the log at a corrupt record that valid records follow,
	// dropping them, instead of refusing to open.
	Repair bool
	// Logger gets recovery warnings, snapshot progress and write failures.
	// Nil discards them.
	Logger *slog.Logger
	// ChangesKeep is how many of the latest changes the change feed keeps,
	// as in memory.Options: 0 keeps none. The feed's kept changes are in the snapshots, so
	// it continues across restarts.
	ChangesKeep int
	// ChangesKeepBytes bounds the memory of the kept changes, as in
	// memory.Options.
	ChangesKeepBytes int64
	// IdempotencyBytes and IdempotencyRetention bound the
	// Idempotency-Keys remembered, as in memory.Options; the keys are in
	// the log and the snapshots, so they are remembered across restarts.
	// A store reopened with smaller bounds may forget keys sooner.
	IdempotencyBytes     int64
	IdempotencyRetention time.Duration
	// CommitTimeout is the longest a change waits to be written and
	// fsynced; past it the caller gets CodeUnavailable (the change may still
	// be applied later). DefaultCommitTimeout when <= 0. Close waits as long
	// for the last writes.
	CommitTimeout time.Duration
	// QueueBytes bounds the memory of the changes waiting for the disk;
	// past it, and past maxBatch changes, a change is refused at once.
	// DefaultQueueBytes when <= 0.
	QueueBytes int64
	// NoGroupCommit gives every change its own write and fsync, for
	// measuring what group commit buys. Never set it in production.
	NoGroupCommit bool
	// Lock is the directory's lock, taken by LockDataDir: Open then
	// holds it, and releases it on Close or when it fails. When nil,
	// Open takes it.
	Lock *fileutil.DirLock

	// openLog opens a log file for appending, openMark the mark (see
	// wal.Options), and probe checks that the directory takes writes (see
	// probeDisk); tests replace them to simulate failing disks.
	openLog  func(path string) (wal.File, error)
	openMark func(path string) (wal.MarkFile, error)
	probe    func(dir string) error
	// markEvery is how often the mark is written, at most; markInterval
	// when 0. Tests set it long, and write the mark with the log's Mark.
	markEvery time.Duration
}

// withDefaults returns opts with every unset field set to its default.
func (opts Options) withDefaults() Options {
	if opts.SnapshotBytes <= 0 {
		opts.SnapshotBytes = DefaultSnapshotBytes
	}
	if opts.CommitTimeout <= 0 {
		opts.CommitTimeout = DefaultCommitTimeout
	}
	if opts.QueueBytes <= 0 {
		opts.QueueBytes = DefaultQueueBytes
	}
	if opts.probe == nil {
		opts.probe = writeProbe
	}
	if opts.markEvery <= 0 {
		opts.markEvery = markInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return opts
}

// Store is a membership.Store that keeps its state in memory and makes
// every change durable in a directory before applying it: a checksummed
// write-ahead log, fsynced before the change is applied or acknowledged, and
// snapshots that let the log restart. Concurrent changes share fsyncs (group
// commit). Reads are served from memory and never touch the disk.
//
// Files in the directory: LOCK (held with flock while open, as is the
// directory itself), DATA (what the directory holds, see dataFileName),
// the log's (package wal: log-N.wal, N counting up, and MARK),
// snapshot-N.snap (the whole state before log-N.wal). The directory is
// 0700, the files 0600.
type Store struct {
	// ReadOnly serves the reads from memory, which holds what was
	// replayed and loaded from the snapshot at start: the feed continues
	// across restarts. ExpiryQueue says which expiries are due, and
	// Nesting and Directory serve the reads of groups in groups and of
	// the directory so.
	memory.ReadOnly
	memory.ExpiryQueue
	membership.Nesting
	directory.Reader
	mem    *memory.Store
	dir    string
	opts   Options
	logger *slog.Logger
	lock   *fileutil.DirLock

	changes     chan *pending
	stop        chan struct{}
	stopped     chan struct{} // closed when the committer has stopped
	markStopped chan struct{} // closed when the marker has stopped

	// closeMu guards closed. Changes are queued under its read lock, so that
	// once Close holds it no change can be queued that nobody will answer.
	closeMu sync.RWMutex
	closed  bool

	// queue holds the cost of the changes queued or being written.
	queue *budget.Bytes
	// health is what Writable reports; the committer sets it.
	health health

	// applyMu is held by the committer while it applies the changes of a
	// commit to memory, and by Backup while it copies memory: memory
	// remembers an Idempotency-Key just after it applied its write, and a
	// backup must not come between. Memory's locks are taken while it is
	// held, never the other way round.
	applyMu sync.Mutex

	// keySlots serializes the keyed writes of each Idempotency-Key.
	keySlots keySlots

	// The committer goroutine owns everything below (recover before it
	// starts, and Close after it stopped, touch it too), but snapshotWG and
	// snapping, which the snapshot goroutine it starts shares, and the
	// log's Mark and Stats (see doc.go).
	dataFile   dataFile
	log        *wal.Log
	snapshotWG sync.WaitGroup
	snapping   atomic.Bool

	stats durableStats
}

// health records why the store cannot take changes, for Writable. The
// committer writes it; anyone reads it.
type health struct {
	// broken is set, for good, when the log can no longer be trusted: a
	// failed write could not be undone, or the log was removed or replaced.
	// Only the committer sets it.
	broken atomic.Pointer[string]
	// failing is set while writes fail (a full disk) and cleared when one,
	// or a probe of the disk, succeeds.
	failing atomic.Pointer[string]
	// writeStart is when the write in progress began (unix nanoseconds),
	// 0 when none is.
	writeStart atomic.Int64
}

// durableStats are the disk's figures for Metrics, beside the log's.
type durableStats struct {
	snapshots    atomic.Uint64
	lastSnapshot atomic.Int64 // nanoseconds
	// Changes refused because the queue was full, and those whose commit
	// took longer than CommitTimeout.
	queueFull      atomic.Uint64
	commitTimeouts atomic.Uint64
}

// pending is one change waiting for the committer.
type pending struct {
	req record.Record
	// queued holds the change's cost in the queue: the caller takes it,
	// the committer releases it as it answers.
	queued  budget.Lease
	applied result // what applying it gave, once written
	done    chan result
	// release, when not nil, frees the slot of its Idempotency-Key
	// (keySlots) once it is decided.
	release func()
}

// result is what applying a record gave: a write's res, or a batch's
// batch, or err.
type result struct {
	res   membership.Result
	batch membership.BatchResult
	err   error
}

var _ membership.Store = (*Store)(nil)

// Open opens, or creates, the data directory dir, recovers the state it
// holds and starts taking changes. Only one process may have a directory
// open. Close it to stop.
func Open(dir string, opts Options) (*Store, error) {
	lock, err := takeLock(dir, opts.Lock)
	if err != nil {
		return nil, err
	}
	d, err := openDurable(dir, opts.withDefaults(), lock)
	if err != nil {
		_ = lock.Release()
		return nil, err
	}
	return d, nil
}

// openDurable opens dir, which lock holds, as Open does.
func openDurable(dir string, opts Options, lock *fileutil.DirLock) (*Store, error) {
	if err := makePrivateDir(dir, opts.Logger); err != nil {
		return nil, err
	}
	d := &Store{
		dir:         dir,
		opts:        opts,
		logger:      opts.Logger,
		lock:        lock,
		changes:     make(chan *pending, maxBatch),
		queue:       budget.New(opts.QueueBytes),
		stop:        make(chan struct{}),
		stopped:     make(chan struct{}),
		markStopped: make(chan struct{}),
	}
	d.mem = d.newMemory()
	if err := d.recover(); err != nil {
		return nil, err
	}
	d.ReadOnly, d.ExpiryQueue, d.Nesting, d.Reader = d.mem, d.mem, d.mem, d.mem // recover may have started a new one
	go d.commitLoop()
	go d.markLoop()
	return d, nil
}

// newMemory returns an empty memory store with d's options.
func (d *Store) newMemory() *memory.Store {
	o := d.opts
	return memory.NewWith(memory.Options{ChangesKeep: o.ChangesKeep, ChangesKeepBytes: o.ChangesKeepBytes,
		IdempotencyBytes: o.IdempotencyBytes, IdempotencyRetention: o.IdempotencyRetention})
}

// Close stops taking changes, waits for a snapshot in progress, and releases
// the directory. Every change acknowledged before is already on disk. It
// waits at most CommitTimeout for the disk to finish what it was given: past
// it, it returns an error and leaves the files open to the stuck writes.
// Closing again does nothing.
func (d *Store) Close() error {
	d.closeMu.Lock()
	if d.closed {
		d.closeMu.Unlock()
		return nil // closed already
	}
	d.closed = true
	d.closeMu.Unlock()
	close(d.stop)
	finished := make(chan struct{})
	go func() {
		<-d.stopped
		<-d.markStopped
		d.snapshotWG.Wait()
		close(finished)
	}()
	t := time.NewTimer(d.opts.CommitTimeout)
	defer t.Stop()
	select {
	case <-finished:
	case <-t.C:
		return fmt.Errorf("the disk did not finish writing within %s: the changes not acknowledged may or may not be kept", d.opts.CommitTimeout)
	}
	return errors.Join(d.log.Close(), d.lock.Release())
}

// recordNewestLog records in DATA that log seq is the newest, appended to
// from now on: no clean stop until the next.
func (d *Store) recordNewestLog(seq uint64) error {
	d.dataFile.lastLog, d.dataFile.closedLog, d.dataFile.closedSize = seq, 0, 0
	return d.dataFile.write(d.dir)
}

// recordCleanStop records in DATA, after the log closed, the size of the
// last log, so that a log cut while the service is stopped is noticed at
// the next start; not for a log that cannot be trusted.
func (d *Store) recordCleanStop(seq uint64, size int64) error {
	if d.health.broken.Load() != nil {
		return nil
	}
	d.dataFile.closedLog, d.dataFile.closedSize = seq, size
	return d.dataFile.write(d.dir)
}

// Epoch implements membership.Store: the data directory's, kept in DATA.
func (d *Store) Epoch() uint64 { return d.dataFile.epoch }

// Writable returns nil when the store takes changes, and otherwise an error
// that says why not: the log failed in a way only a restart mends, writes
// fail (a full disk), a write has waited on the disk past CommitTimeout, or
// the queue of changes is full. It is cheap: readiness checks call it.
func (d *Store) Writable() error {
	unavailable := func(format string, args ...any) error {
		return membership.Errorf(membership.CodeUnavailable, format, args...)
	}
	if msg := d.health.broken.Load(); msg != nil {
		return unavailable("the store takes no changes until restarted: %s", *msg)
	}
	if msg := d.health.failing.Load(); msg != nil {
		return unavailable("writes to the log fail: %s", *msg)
	}
	if waited, ok := d.stuck(); ok {
		return unavailable("a write to the log has waited on the disk for %s, longer than the commit timeout (%s)", waited, d.opts.CommitTimeout)
	}
	if len(d.changes) == cap(d.changes) || !d.queue.Has(smallChangeCost) {
		return unavailable("the queue of changes waiting for the disk is full")
	}
	return nil
}

// makePrivateDir creates dir with fileutil.DirMode, or tightens an
// existing one that group or others may enter.
func makePrivateDir(dir string, logger *slog.Logger) error {
	if err := os.MkdirAll(dir, fileutil.DirMode); err != nil {
		return err
	}
	info, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if info.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, fileutil.DirMode); err != nil {
			logger.Warn("the data directory is open to other users, and tightening it failed", "dir", dir, "mode", info.Mode().Perm(), "err", err)
			return nil
		}
		logger.Warn("the data directory was open to other users: made it 0700", "dir", dir, "was", info.Mode().Perm())
	}
	return nil
}

// removeTemps removes the temporary files a crash left behind.
func removeTemps(dir string) error {
	tmps, err := filepath.Glob(filepath.Join(dir, "*.tmp"))
	for _, tmp := range tmps {
		err = errors.Join(err, os.Remove(tmp))
	}
	return err
}

// Write implements membership.Store. It returns once the change is on disk
// and applied, or with CodeUnavailable and nothing changed. A write that
// would change nothing, or whose precondition fails, is answered from
// memory without a record; the precondition is checked again when the
// write is applied, in log order.
//
// A write with an Idempotency key (w.Idem) is applied once for its key,
// w.Principal's own: first, before any check, memory is asked whether it
// remembers the key
// (memory.Store.ReplayWrite); a repeat is answered the first write's Result,
// Replayed, without a record, and the key of another request is refused,
// CodeIdempotencyKeyReused. Otherwise the write is logged with its key,
// even when it would change nothing (its key must be remembered across
// restarts too), but not when its precondition fails already (its key
// stays free); memory remembers the key when the committer applies the
// record, and on every replay of the log.
//
// A user's or a subgroup's TTL is turned into the time it sets as of the
// write's commit before the write is logged: the log keeps times only. An
// expire (membership.OpExpire, membership.OpExpireGroups, the expirer's
// writes) is logged as any other write, when it would end a membership or
// a nesting.
//
// A nesting write is checked against memory as the others are: one that
// would make a cycle, a chain deeper than w.MaxDepth or a group below
// more than w.MaxAncestors groups is refused without a record. Its record
// keeps both bounds, and memory applies it with them when the record is committed and on every replay, so that a write
// another overtook between its check and its turn (a into b, racing b
// into a) fails, taking no revision, both times.
//
// Errors: CodePreconditionFailed, CodeCycle, CodeTooDeep,
// CodeTooManyAncestors, CodeInvalidQuery (more than record.MaxPreconditionRevisions revisions
// the group has not passed, an expire of more than record.MaxExpireUIDs
// uids, or an expire_groups of more than record.MaxExpireGroups
// subgroups), CodeInvalidUsers or CodeInvalidGroups (an expiry not after
// 1970), CodeIdempotencyKeyReused, CodeUnavailable, CodeBodyTooLarge.
func (d *Store) Write(_ context.Context, w membership.Write) (membership.Result, error) {
	if err := loggable(w); err != nil {
		return membership.Result{}, err
	}
	var release func()
	if w.Idem.Key != "" {
		var err error
		if release, err = d.keySlots.take(w.Principal, w.Idem.Key, d.opts.CommitTimeout); err != nil {
			return membership.Result{}, err
		}
		defer func() {
			if release != nil {
				release()
			}
		}()
		if res, replayed, err := d.mem.ReplayWrite(w.Principal, w.Idem, time.Now()); replayed || err != nil {
			return res, err
		}
	}
	rev, changes, err := d.mem.Check(w)
	switch {
	case err != nil:
		return membership.Result{}, err
	case !changes && w.Idem.Key == "":
		return membership.Result{Revision: rev}, nil
	}
	c := record.Write(logged(w))
	if c.Op == membership.OpRemoveUser {
		c.GroupID, c.If = "", membership.Precondition{} // memory checks none
	}
	if c.If.Revisions, err = pendingRevisions(w.If.Revisions, rev); err != nil {
		return membership.Result{}, err
	}
	r := d.commitHolding(&c, release)
	release = nil // the committer's to release, once it has decided c
	return r.res, r.err
}

// loggable returns an error unless w is a write its record can hold as
// it is: an expire of at most record.MaxExpireUIDs uids, or an
// expire_groups of at most record.MaxExpireGroups subgroups (so that
// LargestEntry bounds its record), and expiries after 1970 (a record holds
// an expiry as milliseconds since 1970, 0 for none; the Service takes
// expiries ahead of its clock only).
func loggable(w membership.Write) error {
	if w.Op == membership.OpExpire && len(w.UIDs) > record.MaxExpireUIDs {
		return membership.Errorf(membership.CodeInvalidQuery,
			"an expire names %d uids, more than %d; nothing was changed", len(w.UIDs), record.MaxExpireUIDs)
	}
	if w.Op == membership.OpExpireGroups && len(w.Subgroups) > record.MaxExpireGroups {
		return membership.Errorf(membership.CodeInvalidQuery,
			"an expire_groups names %d subgroups, more than %d; nothing was changed", len(w.Subgroups), record.MaxExpireGroups)
	}
	for i, u := range w.Users {
		if notAfter1970(u.Expiry) {
			return membership.Errorf(membership.CodeInvalidUsers,
				"element %d: the expiry %s is not after 1970; nothing was changed", i, u.Expiry.At.UTC().Format(time.RFC3339Nano))
		}
	}
	for i, g := range logged(w).Subgroups {
		if notAfter1970(g.Expiry) {
			return membership.Errorf(membership.CodeInvalidGroups,
				"groups element %d: the expiry %s is not after 1970; nothing was changed", i, g.Expiry.At.UTC().Format(time.RFC3339Nano))
		}
	}
	return nil
}

// logged returns w as its record keeps it, so that the committer applies
// what a replay will: a remove_groups or an expire_groups without the
// expiries of its subgroups, which they ignore (a record need not hold
// them), and without bounds on depth and ancestors, which only an
// add_groups or a replace_groups keeps (nothing else can deepen a chain
// or give a group ancestors).
func logged(w membership.Write) membership.Write {
	if w.Op != membership.OpAddGroups && w.Op != membership.OpReplaceGroups {
		w.MaxDepth, w.MaxAncestors = 0, 0
	}
	if w.Op != membership.OpRemoveGroups && w.Op != membership.OpExpireGroups ||
		!slices.ContainsFunc(w.Subgroups, func(g membership.Subgroup) bool { return g.Expiry != membership.Expiry{} }) {
		return w
	}
	groups := make([]membership.Subgroup, len(w.Subgroups))
	for i, g := range w.Subgroups {
		groups[i] = membership.Subgroup{GroupID: g.GroupID}
	}
	w.Subgroups = groups
	return w
}

// notAfter1970 reports whether e sets a time that a record cannot hold.
func notAfter1970(e membership.Expiry) bool {
	return e.Set && !e.At.IsZero() && e.At.UnixMilli() <= 0
}

// pendingRevisions returns the revisions of an If-Match that the group,
// now at rev, may still have when the write is applied: those from rev on,
// ascending and once each, since a group's revision never goes down. The
// rest can never match, so logging them would only cost room.
func pendingRevisions(revs []membership.Revision, rev membership.Revision) ([]membership.Revision, error) {
	var out []membership.Revision
	for _, r := range revs {
		if r >= rev {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > record.MaxPreconditionRevisions {
		return nil, membership.Errorf(membership.CodeInvalidQuery,
			"the precondition names %d revisions the group has not passed, more than %d; nothing was changed", len(out), record.MaxPreconditionRevisions)
	}
	return out, nil
}

// commitHolding queues c for the committer and waits for its answer, at
// most CommitTimeout. A full queue refuses c at once: a stuck disk must
// not pile up waiting callers, nor their changes in memory. A keyed write
// holds its key's slot: release, when not nil, is called once c is
// decided, refused before it is queued or answered by the committer, even
// after its caller stopped waiting, so that no other write of its key is
// logged before c is applied.
func (d *Store) commitHolding(c record.Record, release func()) result {
	p, refused := d.enqueue(c, release)
	if refused != nil {
		return *refused
	}
	return d.await(p, time.Now().Add(d.opts.CommitTimeout))
}

// enqueue queues c for the committer, or refuses it at once (a full queue,
// a stuck disk, a store shutting down), calling release then.
func (d *Store) enqueue(c record.Record, release func()) (*pending, *result) {
	p := &pending{req: c, done: make(chan result, 1), release: release}
	refused := func(r result) (*pending, *result) {
		if release != nil {
			release()
		}
		return nil, &r
	}
	if waited, ok := d.stuck(); ok { // fail fast: queued, it would wait the whole deadline
		return refused(result{err: membership.Errorf(membership.CodeUnavailable,
			"a write to the log has waited on the disk for %s, longer than the commit timeout (%s); nothing was changed: try again later",
			waited, d.opts.CommitTimeout)})
	}
	var ok bool
	if p.queued, ok = d.queue.Take(c.Cost()); !ok { // a change larger than the whole queue is taken alone
		d.stats.queueFull.Add(1)
		return refused(result{err: errQueueFull})
	}
	d.closeMu.RLock()
	if d.closed {
		d.closeMu.RUnlock()
		p.queued.Release()
		return refused(result{err: membership.Errorf(membership.CodeUnavailable, "the store is shutting down; nothing was changed")})
	}
	select {
	case d.changes <- p:
		d.closeMu.RUnlock()
	default:
		d.closeMu.RUnlock()
		p.queued.Release()
		d.stats.queueFull.Add(1)
		return refused(result{err: errQueueFull})
	}
	return p, nil
}

// await waits for the answer to p, queued, until deadline. Once queued, the
// change will be decided whether or not its caller still waits; the caller
// waits for that, even if its client has gone, but no longer than the
// deadline.
func (d *Store) await(p *pending, deadline time.Time) result {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case r := <-p.done:
		return r
	case <-t.C:
		d.stats.commitTimeouts.Add(1)
		return result{err: membership.Errorf(membership.CodeUnavailable,
			"the change was not written to disk within %s (the disk is slow or stuck); it may still be applied: read to find out",
			d.opts.CommitTimeout)}
	}
}

// WriteExpiries is how the expirer writes a round (expiry.roundWriter):
// its expires and expire_groups, each a change of its own as Write logs
// it, are queued for the committer all at once, so that one commit logs
// them and memory applies them together (apply), in the order given:
// roundWindow at a time. Those that would end nothing are answered from memory, without a
// record. It returns the first error, once every change it queued is
// decided (or its window's deadline passed); a change refused stops it
// from queuing more. Any op but an unkeyed expire or expire_groups is
// refused, and nothing queued.
func (d *Store) WriteExpiries(_ context.Context, ws []membership.Write) ([]membership.Result, error) {
	for i, w := range ws {
		if w.Op != membership.OpExpire && w.Op != membership.OpExpireGroups || w.Idem.Key != "" {
			return nil, fmt.Errorf("write %d: not an expire without an Idempotency key", i)
		}
		if err := loggable(w); err != nil {
			return nil, err
		}
	}
	results := make([]membership.Result, len(ws))
	queued := make([]*pending, len(ws))
	var firstErr error
	// A window at a time, so that a round of many small groups never
	// fills the committer's queue (maxBatch changes): each window is a
	// commit or two, and the next is queued once it is decided.
	for from := 0; from < len(ws) && firstErr == nil; from += roundWindow {
		to := min(from+roundWindow, len(ws))
		for i := from; i < to; i++ {
			rev, changes, err := d.mem.Check(ws[i])
			if err != nil {
				firstErr = err
				break
			}
			if !changes {
				results[i].Revision = rev
				continue
			}
			c := record.Write(logged(ws[i]))
			p, refused := d.enqueue(&c, nil)
			if refused != nil {
				firstErr = refused.err
				break
			}
			queued[i] = p
		}
		deadline := time.Now().Add(d.opts.CommitTimeout)
		for i := from; i < to; i++ {
			if queued[i] == nil {
				continue
			}
			r := d.await(queued[i], deadline)
			if r.err != nil {
				if firstErr == nil {
					firstErr = r.err
				}
				continue
			}
			results[i] = r.res
		}
	}
	return results, firstErr
}

// roundWindow is how many of a round's changes WriteExpiries queues at
// once: a quarter of the committer's queue, room left for other writers.
const roundWindow = maxBatch / 4

// stuck returns how long the write in progress has waited on the disk, when
// that is longer than CommitTimeout.
func (d *Store) stuck() (time.Duration, bool) {
	if start := d.health.writeStart.Load(); start != 0 {
		if waited := time.Since(time.Unix(0, start)); waited > d.opts.CommitTimeout {
			return waited.Round(time.Millisecond), true
		}
	}
	return 0, false
}

// smallChangeCost is the cost of a change of one user: when the queue has
// no room for it, the store says it cannot take changes.
var smallChangeCost = (&record.Write{Op: membership.OpAdd, Users: make([]membership.User, 1)}).Cost()

var errQueueFull = membership.Errorf(membership.CodeUnavailable,
	"too many changes are waiting for the disk; nothing was changed: try again later")

// answer releases p's place in the queue and sends p its result, in that
// order: a caller that has its answer finds the queue without it.
func (d *Store) answer(p *pending, r result) {
	p.queued.Release()
	if p.release != nil {
		p.release()
	}
	p.done <- r
}

// commitLoop is the one goroutine that writes the log and changes memory:
// it takes every change waiting, writes them all, fsyncs once, and only then
// applies them, in log order, and answers their callers.
func (d *Store) commitLoop() {
	defer close(d.stopped)
	batch := make([]*pending, 0, maxBatch)
	var buf []byte
	probe := time.NewTicker(probeInterval)
	defer probe.Stop()
	for {
		select {
		case p := <-d.changes:
			batch = d.gather(append(batch[:0], p))
		case <-probe.C:
			if d.health.failing.Load() != nil && d.health.broken.Load() == nil {
				d.probeDisk()
			}
			continue
		case <-d.stop:
			d.drain()
			return
		}
		buf, batch = d.encode(buf[:0], batch)
		if len(batch) > 0 {
			d.commitBatch(buf, batch)
		}
		if len(buf) > 1<<20 {
			buf = nil // one large batch must not keep its buffer for good
		}
	}
}

// gather adds to batch the changes waiting, up to maxBatch, without
// waiting for more.
func (d *Store) gather(batch []*pending) []*pending {
	for !d.opts.NoGroupCommit && len(batch) < maxBatch {
		select {
		case p := <-d.changes:
			batch = append(batch, p)
		default:
			return batch
		}
	}
	return batch
}

// encode appends the log records of batch to buf, and returns them with the
// changes they hold: a change too large for one record is answered, refused,
// and dropped from the batch. Every change of the batch is stamped with
// one time, now, as its commit's: the record keeps it, so that a replay
// gives the change the time it had.
func (d *Store) encode(buf []byte, batch []*pending) ([]byte, []*pending) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	n := 0
	for _, p := range batch {
		p.req.SetTime(now)
		var err error
		if buf, err = wal.Append(buf, p.req.Append); err != nil {
			// Unreachable with the flags run checks; refused, not
			// written, if it ever comes.
			d.answer(p, result{err: membership.Errorf(membership.CodeBodyTooLarge,
				"the change is too large for one log record (%d bytes at most): send it in parts; nothing was changed", wal.MaxPayload)})
			continue
		}
		batch[n] = p
		n++
	}
	return buf, batch[:n]
}

// commitBatch writes and fsyncs buf, the records of batch, then applies the
// changes and answers them, or answers them all with the write's error. It
// starts a snapshot when the log has grown past SnapshotBytes.
func (d *Store) commitBatch(buf []byte, batch []*pending) {
	if err := d.write(buf); err != nil {
		for _, p := range batch {
			d.answer(p, result{err: err})
		}
		return
	}
	d.applyMu.Lock()
	d.apply(batch)
	d.applyMu.Unlock()
	d.log.SetSynced(uint64(d.mem.LatestRevision())) // before the answers: a change acknowledged is in the next mark
	for _, p := range batch {
		d.answer(p, p.applied)
	}
	if d.log.Size() >= d.opts.SnapshotBytes && !d.snapping.Load() {
		// Starting a new log writes and fsyncs too: a stuck disk here
		// shows as a stuck write.
		d.health.writeStart.Store(time.Now().UnixNano())
		d.startSnapshot()
		d.health.writeStart.Store(0)
	}
}

// apply applies the changes of batch, written, in order: a run of the
// expirer's expires together (memory.Store.ApplyExpiries), each a change
// of its own, at about half the cost of one after another; every other
// change on its own.
func (d *Store) apply(batch []*pending) {
	for i := 0; i < len(batch); {
		j := i
		for j < len(batch) && isExpire(batch[j].req) {
			j++
		}
		if j-i < 2 {
			batch[i].applied = applyRecord(d.mem, batch[i].req)
			i++
			continue
		}
		ws := make([]membership.Write, 0, j-i)
		for _, p := range batch[i:j] {
			ws = append(ws, membership.Write(*p.req.(*record.Write)))
		}
		results, err := d.mem.ApplyExpiries(ws)
		for k, p := range batch[i:j] {
			if err != nil {
				p.applied = result{err: err}
			} else {
				p.applied = result{res: results[k]}
			}
		}
		i = j
	}
}

// isExpire reports whether r is an expire without an Idempotency key: the
// expirer's.
func isExpire(r record.Record) bool {
	c, ok := r.(*record.Write)
	return ok && c.Op == membership.OpExpire && c.Idem.Key == ""
}

// applyRecord applies r to m. Memory gives it its revision, so replaying
// the log after the same snapshot gives every change the revision it had;
// and checks its preconditions, so a change that another overtook between
// its check and its turn fails, taking no revision, when it is replayed
// too. It takes r's time as it is: a change the committer stamped gets the
// time it got when it was first applied, and one an older build logged
// without a time gets none. A keyed write or batch is applied once for
// its key, as of that time: a repeat that was logged before its first
// write was applied is a replay (memory decides, as it does on every
// replay of the log), and its caller gets the first write's result,
// Replayed.
func applyRecord(m *memory.Store, r record.Record) result {
	if w, ok := r.(*record.Write); ok {
		res, err := m.ApplyLogged(membership.Write(*w))
		return result{res: res, err: err}
	}
	res, err := m.BatchLogged(membership.Batch(*r.(*record.Batch)))
	return result{batch: res, err: err}
}

// drain answers the changes still queued at shutdown: nothing was changed.
func (d *Store) drain() {
	for {
		select {
		case p := <-d.changes:
			d.answer(p, result{err: membership.Errorf(membership.CodeUnavailable, "the store is shutting down; nothing was changed")})
		default:
			return
		}
	}
}

// write saves buf, the records of a commit, to the log (wal.Log.Save).
// When the write fails (a full disk, say) the log is cut back to where it
// was, so that the refused changes are not replayed later, and the store
// carries on; when the log can no longer be trusted (a failed fsync, say),
// the store takes no more changes until restarted.
func (d *Store) write(buf []byte) error {
	if d.health.broken.Load() != nil {
		return membership.Errorf(membership.CodeUnavailable, "the store stopped taking changes after a disk failure; restart it; nothing was changed")
	}
	d.health.writeStart.Store(time.Now().UnixNano())
	defer d.health.writeStart.Store(0)
	err, broken := d.log.Save(buf)
	if err != nil {
		msg := err.Error()
		d.health.failing.Store(&msg)
	} else {
		d.health.failing.Store(nil)
	}
	if broken != nil {
		d.setBroken(broken)
	}
	switch {
	case err != nil:
		return membership.Errorf(membership.CodeUnavailable, "the change could not be written to disk; nothing was changed")
	case broken != nil:
		return membership.Errorf(membership.CodeUnavailable,
			"the log file was removed or replaced while the service ran; the change is not kept: restart the service")
	}
	return nil
}

// setBroken makes the store refuse every change until restarted. Only the
// committer calls it.
func (d *Store) setBroken(err error) {
	msg := err.Error()
	d.health.broken.Store(&msg)
	d.logger.Error("refusing all changes until restart", "err", err)
}

// probeDisk checks whether the disk takes writes again after a write
// failed. Only the committer calls it, so a stuck probe shows as a stuck
// write.
func (d *Store) probeDisk() {
	d.health.writeStart.Store(time.Now().UnixNano())
	defer d.health.writeStart.Store(0)
	if err := d.opts.probe(d.dir); err != nil {
		msg := err.Error()
		d.health.failing.Store(&msg)
		return
	}
	d.logger.Info("the disk takes writes again")
	d.health.failing.Store(nil)
}

// writeProbe writes, fsyncs and removes a small file in dir (a .tmp file,
// which a start after a crash removes).
func writeProbe(dir string) error {
	path := filepath.Join(dir, "probe.tmp")
	err := os.WriteFile(path, make([]byte, 4096), fileutil.FileMode)
	if err == nil {
		err = fileutil.SyncFile(path)
	}
	return errors.Join(err, os.Remove(path))
}

// startSnapshot starts a new log (wal.Log.Cut) and writes, in the
// background, a snapshot of the state as of the end of the old one; then
// it removes what the snapshot covers. Copying the state is the only part
// that holds up changes.
func (d *Store) startSnapshot() {
	next, ok := d.log.Cut(uint64(d.mem.LatestRevision()))
	if !ok {
		return
	}
	start := time.Now()
	st := d.mem.Export() // consistent: only this goroutine changes memory
	d.snapping.Store(true)
	d.snapshotWG.Add(1)
	go func() {
		defer d.snapshotWG.Done()
		defer d.snapping.Store(false)
		path := snap.Path(d.dir, next)
		if err := snap.WriteFile(path, st); err != nil {
			d.logger.Error("writing a snapshot failed; the logs are kept", "file", path, "err", err)
			return
		}
		if _, err := checkSnapshot(path); err != nil {
			d.logger.Error("a snapshot just written does not read back; the files before it are kept", "file", path, "err", err)
			return
		}
		d.stats.snapshots.Add(1)
		d.stats.lastSnapshot.Store(int64(time.Since(start)))
		d.removeSuperseded(next)
		d.logger.Info("wrote a snapshot", "file", path, "groups", len(st.Groups))
	}()
}

// removeSuperseded removes the files that snapshot newest, just
// written and read back, makes needless: it keeps the snapshot before it and
// the logs after that one, so that should newest be damaged later, -repair
// recovers every change from them. Everything older goes.
func (d *Store) removeSuperseded(newest uint64) {
	snapshots, err := snap.List(d.dir)
	keep := uint64(0)
	for _, n := range snapshots {
		if n < newest {
			keep = n
		}
	}
	if err == nil {
		err = d.log.RemoveBefore(keep)
	}
	if err != nil {
		d.logger.Error("listing the data directory failed", "err", err)
		return
	}
	for _, n := range snapshots {
		if n < keep {
			_ = os.Remove(snap.Path(d.dir, n))
		}
	}
}
