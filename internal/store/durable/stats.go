package durable

import (
	"slices"
	"time"

	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/wal/record"
	"example.com/groupmembership/membership"
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

// DueExpiries implements store.Expiring: memory's, whose writes Write
// logs as any other. An expire_groups of more subgroups than a record
// takes (record.MaxExpireGroups) is split into writes that each fit, with
// the earliest end of the whole.
func (d *Store) DueExpiries(now time.Time, max int) []store.Due {
	return splitExpireGroups(d.mem.DueExpiries(now, max), record.MaxExpireGroups)
}

// splitExpireGroups returns due with every expire_groups of more than most
// subgroups split into writes of at most most, in order.
func splitExpireGroups(due []store.Due, most int) []store.Due {
	if !slices.ContainsFunc(due, func(d store.Due) bool {
		return d.Write.Op == membership.OpExpireGroups && len(d.Write.Subgroups) > most
	}) {
		return due
	}
	var out []store.Due
	for _, d := range due {
		if d.Write.Op != membership.OpExpireGroups || len(d.Write.Subgroups) <= most {
			out = append(out, d)
			continue
		}
		for part := range slices.Chunk(d.Write.Subgroups, most) {
			p := d
			p.Write.Subgroups = part
			out = append(out, p)
		}
	}
	return out
}
