// Package wal is the write-ahead log of a data directory: the files
// log-N.wal, N counting up, each holding the records written after
// snapshot N (or after the start, before the first snapshot), and MARK,
// which says how far the newest is known to be complete. It names them,
// creates and opens them, replays them in one pass that tells a write a
// crash tore from damage, repairs what a repair can mend, appends records
// and fsyncs them, cuts (starts the next log), and checks that the log it
// appends to is the file its name gives.
//
// How a log file is laid out is in frame.go; what a record holds, in
// package record. The store that keeps the log applies what Open replays,
// writes the snapshots, and keeps the directory's DATA, which says what
// the logs should be: Options carries what DATA says to Open, and the
// hooks through which the log tells the store what DATA must say next.
//
// A Log is not safe for concurrent use but where a method says so: one
// goroutine saves, cuts and closes it; another may call Mark.
package wal

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/internal/store"
)

// File is what a log is appended through: an *os.File; tests replace it
// to simulate failing disks.
type File interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
	Stat() (os.FileInfo, error)
}

// Options configure Open.
type Options struct {
	// Repair mends the damage a repair can mend (see Open), keeping what
	// it drops in a repair directory, instead of refusing to open.
	Repair bool
	// Logger gets the warnings of the replay and the repairs, and the
	// failures of writes, cuts and MARK.
	Logger *slog.Logger

	// What DATA says: the directory's id, which every log's header and
	// MARK carry (DataMissing says that DATA was missing, the id drawn at
	// this start); the newest log the directory has had (LastLog); and,
	// after a clean stop, the newest log and its size then (ClosedLog,
	// ClosedSize; 0 while the service runs).
	DirID       uint64
	DataMissing bool
	LastLog     uint64
	ClosedLog   uint64
	ClosedSize  int64
	// Mark is what ReadStartMark found.
	Mark StartMark

	// Apply applies the payload of a record as Open replays it; an error
	// says that the payload is not a record, which Open takes for damage.
	// Revision returns the revision of the state so far: the snapshot's,
	// then the records' as Apply applies them.
	Apply    func(payload []byte) error
	Revision func() uint64

	// BeforeRepair is called before a repair changes any file: a repair
	// may take the state back (the store renews its epoch). Newest is
	// called when log seq becomes the one appended to, before it is
	// opened, at Open and at each Cut; Closed when Close has closed log
	// seq, size bytes long. The store records them in DATA.
	BeforeRepair func() error
	Newest       func(seq uint64) error
	Closed       func(seq uint64, size int64) error

	// OpenFile opens a log for appending, and OpenMark MARK for writing;
	// tests replace them to simulate failing disks.
	OpenFile func(path string) (File, error)
	OpenMark func(path string) (MarkFile, error)
}

func (opts Options) withDefaults() Options {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.OpenFile == nil {
		opts.OpenFile = openAppend
	}
	if opts.OpenMark == nil {
		opts.OpenMark = OpenMarkFile
	}
	return opts
}

// Log is the open log of a data directory: the newest log, appended to,
// and MARK.
type Log struct {
	dir    string
	opts   Options
	logger *slog.Logger

	// The goroutine that saves owns these.
	f    File
	seq  uint64 // N of the log being appended to
	size int64

	marker *marker
	// synced is what SetSynced sets for Mark; never nil once Open has
	// returned.
	synced atomic.Pointer[Mark]

	// The log's figures, for Stats.
	bytes         atomic.Int64
	fsyncs        atomic.Uint64
	fsyncDuration *metrics.Histogram
}

// Stats returns the log's figures among the data directory's: those of
// the log being appended to, its fsyncs and MARK's writes. Any goroutine
// may call it.
func (l *Log) Stats() store.DiskStats {
	return store.DiskStats{
		LogBytes:       l.bytes.Load(),
		Fsyncs:         l.fsyncs.Load(),
		FsyncDurations: l.fsyncDuration,
		MarkWrites:     l.marker.writes.Load(),
		MarkFailures:   l.marker.failures.Load(),
	}
}

// Open opens the log of the directory dir for appending, after the
// snapshot base (0: none, the logs from the first), whose state the
// store has loaded: it checks the logs from base on against each other
// and against what DATA says, replays them through opts.Apply, and opens
// the newest. The logs must form a chain: log base (log 1 when base is
// 0), base+1, … with no gap, each starting at the revision where the
// state before it ends, and the newest as long as DATA and MARK say it
// was. An incomplete record at the end of the newest is a write a crash
// tore: it is cut away with a warning. Anything else that does not fit is
// refused, naming the file and the way forward; with opts.Repair, what a
// repair can go on without is gone on without, with a warning that says
// what is lost, and what it drops is kept in a repair directory. A new
// directory gets log 1; a newest log of an older format version is
// followed by a new one, of this version. MARK is written anew.
func Open(dir string, base uint64, opts Options) (*Log, error) {
	l := &Log{dir: dir, opts: opts.withDefaults()}
	l.logger = l.opts.Logger
	l.fsyncDuration = metrics.NewHistogram(metrics.DefaultDurationBuckets)
	logs, err := List(dir)
	if err != nil {
		return nil, err
	}
	logs = slices.DeleteFunc(logs, func(n uint64) bool { return n < base })
	if logs, err = l.checkFiles(base, logs); err != nil {
		return nil, err
	}
	if len(logs) == 0 {
		// A new directory.
		if err := Create(dir, 1, 0, l.opts.DirID); err != nil {
			return nil, err
		}
		logs = []uint64{1}
	}
	version, err := l.replayLogs(logs)
	if err != nil {
		return nil, err
	}
	if err := l.openNewest(version); err != nil {
		return nil, err
	}
	if err := l.startMarker(); err != nil {
		l.f.Close()
		return nil, err
	}
	l.bytes.Store(l.size)
	return l, nil
}

// openNewest opens the newest log for appending, after starting a new one
// when the newest is of an older format version, and tells opts.Newest.
func (l *Log) openNewest(version int) error {
	if version != Version {
		// Records of this version go into a log of its own.
		next := l.seq + 1
		if err := Create(l.dir, next, l.opts.Revision(), l.opts.DirID); err != nil {
			return err
		}
		l.logger.Info("started a new log in the current format", "file", Path(l.dir, next), "after_version", version)
		l.seq, l.size = next, HeaderSize
	}
	if err := l.opts.Newest(l.seq); err != nil {
		return err
	}
	var err error
	l.f, err = l.opts.OpenFile(Path(l.dir, l.seq))
	return err
}

// Save appends buf, records as Append lays them out, to the log and
// fsyncs it. It returns nil, nil once they are on disk, in the file a
// start will read them from.
//
// When the write or the fsync fails (a full disk, say), it logs the
// failure, cuts the log back to where it was, so that none of the records
// is replayed later, and returns it as err. broken, when not nil, says
// why the log can no longer be trusted, and nothing more may be saved
// until the process restarts: the fsync failed (after a failed fsync,
// Linux may drop the unwritten pages and clear the error, so a later fsync
// can succeed without the data being on disk), the cut failed, or, with
// err nil, the records were written to a file that is no longer the log
// a start will read: removed, replaced, or written to by something else.
func (l *Log) Save(buf []byte) (err, broken error) {
	_, err = l.f.Write(buf)
	syncFailed := false
	if err == nil {
		start := time.Now()
		err = l.f.Sync()
		l.fsyncs.Add(1)
		l.fsyncDuration.Observe(time.Since(start))
		syncFailed = err != nil
	}
	if err == nil {
		l.size += int64(len(buf))
		l.bytes.Store(l.size)
		return nil, l.checkInPlace()
	}
	l.logger.Error("writing the log failed; the changes are refused", "file", Path(l.dir, l.seq), "err", err)
	cutErr := l.f.Truncate(l.size)
	if cutErr == nil && !syncFailed {
		cutErr = l.f.Sync()
	}
	switch {
	case syncFailed:
		return err, fmt.Errorf("fsync failed: %w", err)
	case cutErr != nil:
		return err, fmt.Errorf("cutting the log back after a failed write failed: %w", cutErr)
	}
	return err, nil
}

// checkInPlace returns an error unless the log being written is the file
// its path names in the directory, as long as the log wrote it: a log
// deleted or replaced under the service takes writes that a start would
// never see.
func (l *Log) checkInPlace() error {
	path := Path(l.dir, l.seq)
	open, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("checking the log %s: %w", path, err)
	}
	named, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("the log %s is gone from the data directory: %w", path, err)
	}
	if !os.SameFile(open, named) {
		return fmt.Errorf("the log %s was replaced by another file", path)
	}
	if open.Size() != l.size {
		return fmt.Errorf("the log %s is %d bytes where the service wrote %d: something else wrote to it or cut it", path, open.Size(), l.size)
	}
	return nil
}

// Size returns the size of the log being appended to.
func (l *Log) Size() int64 { return l.size }

// Cut starts the next log, following the state at startRevision, and
// appends to it from then on: the store cuts the log to write a snapshot
// of that state, which is the state before the new log. The old log stays
// whole, and the mark of the new one supersedes its mark. Cut returns the
// new log's sequence number, or false when none was started, having
// logged why: the old log is still the one appended to.
func (l *Log) Cut(startRevision uint64) (uint64, bool) {
	next := l.seq + 1
	if err := Create(l.dir, next, startRevision, l.opts.DirID); err != nil {
		l.logger.Error("starting a new log for a snapshot failed", "err", err)
		return 0, false
	}
	if err := l.opts.Newest(next); err != nil {
		l.logger.Error("recording the new log in DATA failed", "err", err)
	}
	f, err := l.opts.OpenFile(Path(l.dir, next))
	if err != nil {
		l.logger.Error("opening the new log failed", "err", err)
		return 0, false
	}
	_ = l.f.Close()
	l.f, l.seq, l.size = f, next, HeaderSize
	l.bytes.Store(l.size)
	l.SetSynced(startRevision)
	return next, true
}

// Close closes the log, tells opts.Closed its size when that worked, and
// closes MARK.
func (l *Log) Close() error {
	err := l.f.Close()
	if err == nil {
		err = l.opts.Closed(l.seq, l.size)
	}
	return errors.Join(err, l.marker.close())
}
