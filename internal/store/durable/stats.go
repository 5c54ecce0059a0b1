package durable

import (
	"time"

	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/snap"
)

// Stats returns the figures of its memory.Store, and the disk's.
func (d *Store) Stats() store.Stats {
	s := d.mem.Stats()
	disk := d.log.Stats()
	disk.Snapshots = d.stats.snapshots.Load()
	disk.LastSnapshot = time.Duration(d.stats.lastSnapshot.Load())
	disk.CommitTimeouts = d.stats.commitTimeouts.Load()
	disk.QueueBytes, disk.QueueLimit = d.queue.Used(), d.queue.Limit()
	disk.QueueFull = d.stats.queueFull.Load()
	s.Disk = &disk
	return s
}

// WriteMetrics writes the store's figures, the disk's included, to /metrics.
func (d *Store) WriteMetrics(w *metrics.Writer) { d.Stats().WriteMetrics(w) }

// Budgets returns the store's memory budgets: the changes the feed keeps,
// and the queue of changes waiting for the disk.
func (d *Store) Budgets() []metrics.Budget { return d.Stats().Budgets() }

// Backup copies the whole state at one revision; see memory.Store.Backup.
// What memory holds is on disk: a change is applied after it is written.
// It copies between two commits' changes (applyMu), never between a keyed
// write's change and memory remembering its key: a store restored from
// the backup answers a repeat of every keyed write the backup holds, and
// of no other, as a replay.
func (d *Store) Backup() *snap.Backup {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	return d.mem.Backup()
}
