package store

import (
	"time"

	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/membership"
)

// Stats are a store's figures, as plain values, for monitoring: WriteMetrics
// names them for /metrics. The counts are kept as the store changes, so
// reading them costs the same at ten members and at ten million, and never
// holds up a change for longer than the feed's lock.
type Stats struct {
	Groups  int64 // groups with at least one member
	Members int64 // memberships: a user in two groups counts twice
	Users   int64 // users in at least one group
	// Revision is the latest revision.
	Revision membership.Revision
	// The changes the feed keeps: how many, their memory and its bound,
	// and how many were dropped to keep within it.
	ChangesKept      int
	ChangesKeptBytes int64
	ChangesKeepBytes int64
	ChangesDropped   uint64
	// Keys are the Idempotency-Keys the store remembers.
	Keys KeyStats
	// Disk holds the figures of a store with a data directory; nil for one
	// in memory.
	Disk *DiskStats
	// Follow holds the figures of a store that follows a shared log (the
	// PostgreSQL store); nil for the others.
	Follow *FollowStats
}

// KeyStats are the figures of the Idempotency-Keys a store remembers: how
// many, their memory and its bound, how many were forgotten (past the
// budget or the retention) and how many repeats were answered with a
// first reply.
type KeyStats struct {
	Held, Bytes, MaxBytes int64
	Dropped, Replays      uint64
}

// FollowStats are the figures of a store that serves from memory what a
// shared log holds.
type FollowStats struct {
	// Lag is, for each change applied, how long after it was written it
	// was applied here (safe to read at any time).
	Lag *metrics.Histogram
}

// DiskStats are the figures of a store's data directory.
type DiskStats struct {
	LogBytes       int64              // the log being written, since the last snapshot
	Fsyncs         uint64             // of the log: one per batch of changes
	FsyncDurations *metrics.Histogram // how long they took (safe to read at any time)
	Snapshots      uint64             // written since the process started
	LastSnapshot   time.Duration      // how long the last took to write; 0 before the first
	CommitTimeouts uint64             // changes the disk did not take within the commit timeout
	// The queue of changes waiting for the disk: its memory, its bound,
	// and how many changes it refused.
	QueueBytes int64
	QueueLimit int64
	QueueFull  uint64
	// MARK (how far the log is known complete): the writes, each one
	// fsync, and those that failed.
	MarkWrites   uint64
	MarkFailures uint64
}

// WriteMetrics writes the figures to /metrics: groups, members, users, the
// latest revision and the changes the feed keeps, how far behind a shared
// log the store runs (PostgreSQL), and, with a data directory, the disk's:
// the log's size, fsyncs and their durations, snapshots and how long the
// last took, commit timeouts.
func (s Stats) WriteMetrics(w *metrics.Writer) {
	w.Gauge("membership_groups", "Groups with at least one member.", float64(s.Groups))
	w.Gauge("membership_members", "Memberships in all groups: a user in two groups counts twice.", float64(s.Members))
	w.Gauge("membership_users", "Users in at least one group.", float64(s.Users))
	w.Gauge("membership_revision", "The latest revision: how many changes have altered the store.", float64(s.Revision))
	w.Gauge("membership_changes_kept", "Changes the change feed keeps (see -changes-keep).", float64(s.ChangesKept))
	w.Gauge("membership_changes_kept_bytes", "Memory the changes the feed keeps take, in bytes (see -changes-keep-bytes).", float64(s.ChangesKeptBytes))
	w.Gauge("membership_idempotency_keys", "Idempotency-Keys remembered, with the reply of their write (see -idempotency-retention).", float64(s.Keys.Held))
	w.Gauge("membership_idempotency_keys_bytes", "Memory the Idempotency-Keys remembered take, in bytes (see -idempotency-bytes).", float64(s.Keys.Bytes))
	w.Counter("membership_idempotency_keys_dropped_total", "Idempotency-Keys forgotten, the oldest first, past -idempotency-bytes or -idempotency-retention.", float64(s.Keys.Dropped))
	w.Counter("membership_idempotency_replays_total", "Writes answered with the reply of an earlier write with the same Idempotency-Key, applying nothing.", float64(s.Keys.Replays))
	if s.Follow != nil {
		w.Family("membership_follow_lag_seconds", "histogram", "For each change of the shared log, the time from its write to its being applied on this instance.")
		s.Follow.Lag.Write(w, "membership_follow_lag_seconds", nil)
	}
	disk := s.Disk
	if disk == nil {
		return
	}
	w.Gauge("membership_log_bytes", "Size of the write-ahead log being written, in bytes; it restarts at each snapshot.", float64(disk.LogBytes))
	w.Counter("membership_fsyncs_total", "fsyncs of the write-ahead log: one per batch of changes (group commit).", float64(disk.Fsyncs))
	w.Counter("membership_mark_writes_total", "Writes of MARK (how far the log is known complete), each one fsync: at most 4 a second, only while the log grows.", float64(disk.MarkWrites))
	w.Counter("membership_mark_write_failures_total", "Writes of MARK that failed; changes are still taken, but a log cut after a crash may go unnoticed back to the last mark written.", float64(disk.MarkFailures))
	w.Family("membership_fsync_duration_seconds", "histogram", "Time fsync of the write-ahead log took.")
	disk.FsyncDurations.Write(w, "membership_fsync_duration_seconds", nil)
	w.Counter("membership_snapshots_total", "Snapshots written since the process started.", float64(disk.Snapshots))
	w.Gauge("membership_last_snapshot_duration_seconds", "Time the last snapshot took to write, in seconds; 0 before the first.", disk.LastSnapshot.Seconds())
	w.Counter("membership_commit_timeouts_total", "Changes answered 503 because the disk did not take them within -commit-timeout (they may have been applied later).",
		float64(disk.CommitTimeouts))
}

// Budgets returns the store's memory budgets: the changes the feed keeps,
// the Idempotency-Keys remembered, and, with a data directory, the queue of changes waiting for the disk.
func (s Stats) Budgets() []metrics.Budget {
	bs := []metrics.Budget{
		{Name: "changes_kept", Used: s.ChangesKeptBytes, Limit: s.ChangesKeepBytes, Refused: s.ChangesDropped},
		{Name: "idempotency_keys", Used: s.Keys.Bytes, Limit: s.Keys.MaxBytes, Refused: s.Keys.Dropped},
	}
	if s.Disk != nil {
		bs = append(bs, metrics.Budget{Name: "commit_queue", Used: s.Disk.QueueBytes, Limit: s.Disk.QueueLimit, Refused: s.Disk.QueueFull})
	}
	return bs
}
