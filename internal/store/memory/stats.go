package memory

import (
	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/internal/store"
)

// Stats returns the store's figures.
func (m *Store) Stats() store.Stats {
	fs := m.feed.stats()
	return store.Stats{
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

// WriteMetrics writes the store's figures to /metrics.
func (m *Store) WriteMetrics(w *metrics.Writer) { m.Stats().WriteMetrics(w) }

// Budgets returns the store's memory budgets: the changes the feed keeps.
func (m *Store) Budgets() []metrics.Budget { return m.Stats().Budgets() }
