package store

import (
	"time"

	"example.com/groupmembership/internal/metrics"
)

// Metrics writes the store's figures for /metrics: groups, members, users,
// the latest revision and the changes the feed keeps. It reads each shard
// under its read lock in turn, so it costs O(groups + memberships) per
// scrape and nothing per request; the figures are each shard's at the moment
// it was read.
func (m *Memory) Metrics(w *metrics.Writer) {
	groups, members := 0, 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.RLock()
		groups += len(s.groups)
		for _, g := range s.groups {
			members += g.members.size
		}
		s.mu.RUnlock()
	}
	users := 0
	for i := range m.reverse {
		r := &m.reverse[i]
		r.mu.RLock()
		users += r.pairs.countUIDs()
		r.mu.RUnlock()
	}
	m.feed.mu.Lock()
	latest, kept := m.feed.last, len(m.feed.ring)
	m.feed.mu.Unlock()
	w.Gauge("membership_groups", "Groups with at least one member.", float64(groups))
	w.Gauge("membership_members", "Memberships in all groups: a user in two groups counts twice.", float64(members))
	w.Gauge("membership_users", "Users in at least one group.", float64(users))
	w.Gauge("membership_revision", "The latest revision: how many changes have altered the store.", float64(latest))
	w.Gauge("membership_changes_kept", "Changes the change feed keeps (see -changes-keep).", float64(kept))
}

// countUIDs returns how many distinct uids the set holds.
func (s *pairSet) countUIDs() int {
	n, first := 0, true
	var last pair
	for _, c := range s.chunks {
		for _, p := range c {
			if first || p.uid != last.uid {
				n++
				first = false
			}
			last = p
		}
	}
	return n
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
}
