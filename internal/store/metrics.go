package store

import (
	"time"

	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/membership"
)

// Stats are a store's figures, as plain values, for monitoring (httpapi
// names them for /metrics). The counts are kept as the store changes, so
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
	// Disk holds the figures of a store with a data directory; nil for one
	// in memory.
	Disk *DiskStats
	// Follow holds the figures of a store that follows a shared log (the
	// PostgreSQL store); nil for the others.
	Follow *FollowStats
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

// Stats returns the store's figures.
func (m *Memory) Stats() Stats {
	fs := m.feed.stats()
	return Stats{
		Groups:           m.counts.groups.Load(),
		Members:          m.counts.members.Load(),
		Users:            m.counts.users.Load(),
		Revision:         fs.last,
		ChangesKept:      fs.kept,
		ChangesKeptBytes: fs.bytes,
		ChangesKeepBytes: fs.maxBytes,
		ChangesDropped:   fs.dropped,
	}
}

// Stats returns the figures of Memory.Stats, and the disk's.
func (d *Durable) Stats() Stats {
	s := d.mem.Stats()
	s.Disk = &DiskStats{
		LogBytes:       d.stats.logBytes.Load(),
		Fsyncs:         d.stats.fsyncs.Load(),
		FsyncDurations: d.stats.fsyncDuration,
		Snapshots:      d.stats.snapshots.Load(),
		LastSnapshot:   time.Duration(d.stats.lastSnapshot.Load()),
		CommitTimeouts: d.stats.commitTimeouts.Load(),
		QueueBytes:     d.queue.Used(),
		QueueLimit:     d.queue.Limit(),
		QueueFull:      d.stats.queueFull.Load(),
		MarkWrites:     d.marker.writes.Load(),
		MarkFailures:   d.marker.failures.Load(),
	}
	return s
}
