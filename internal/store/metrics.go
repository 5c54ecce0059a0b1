package store

import (
	"time"

	"example.com/groupmembership/internal/metrics"
)

// Metrics writes the store's figures for /metrics: groups, members, users,
// the latest revision and the changes the feed keeps. The counts are kept as
// the store changes, so a scrape costs the same at ten members and at ten
// million, and never holds up a change for longer than the feed's lock.
func (m *Memory) Metrics(w *metrics.Writer) {
	fs := m.feed.stats()
	w.Gauge("membership_groups", "Groups with at least one member.", float64(m.counts.groups.Load()))
	w.Gauge("membership_members", "Memberships in all groups: a user in two groups counts twice.", float64(m.counts.members.Load()))
	w.Gauge("membership_users", "Users in at least one group.", float64(m.counts.users.Load()))
	w.Gauge("membership_revision", "The latest revision: how many changes have altered the store.", float64(fs.last))
	w.Gauge("membership_changes_kept", "Changes the change feed keeps (see -changes-keep).", float64(fs.kept))
	w.Gauge("membership_changes_kept_bytes", "Memory the changes the feed keeps take, in bytes (see -changes-keep-bytes).", float64(fs.bytes))
}

// Budgets reports the memory of the changes the feed keeps.
func (m *Memory) Budgets() []metrics.Budget {
	fs := m.feed.stats()
	return []metrics.Budget{{Name: "changes_kept", Used: fs.bytes, Limit: fs.maxBytes, Refused: fs.dropped}}
}

// Budgets reports the budgets of Memory.Budgets, and the queue of changes
// waiting for the disk.
func (d *Durable) Budgets() []metrics.Budget {
	return append(d.mem.Budgets(), metrics.Budget{
		Name: "commit_queue", Used: d.queue.Used(), Limit: d.queue.Limit(), Refused: d.stats.queueFull.Load(),
	})
}

// Metrics writes the figures of Memory.Metrics, and the disk's: the log's
// size, fsyncs and their durations, snapshots and how long the last took.
func (d *Durable) Metrics(w *metrics.Writer) {
	d.mem.Metrics(w)
	w.Gauge("membership_log_bytes", "Size of the write-ahead log being written, in bytes; it restarts at each snapshot.", float64(d.stats.logBytes.Load()))
	w.Counter("membership_fsyncs_total", "fsyncs of the write-ahead log: one per batch of changes (group commit).", float64(d.stats.fsyncs.Load()))
	w.Family("membership_fsync_duration_seconds", "histogram", "Time fsync of the write-ahead log took.")
	d.stats.fsyncDuration.Write(w, "membership_fsync_duration_seconds", nil)
	w.Counter("membership_snapshots_total", "Snapshots written since the process started.", float64(d.stats.snapshots.Load()))
	w.Gauge("membership_last_snapshot_duration_seconds", "Time the last snapshot took to write, in seconds; 0 before the first.",
		time.Duration(d.stats.lastSnapshot.Load()).Seconds())
	w.Counter("membership_commit_timeouts_total", "Changes answered 503 because the disk did not take them within -commit-timeout (they may have been applied later).",
		float64(d.stats.commitTimeouts.Load()))
}
