package memory

import (
	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/internal/store"
)

// Stats returns the store's figures.
func (m *Store) Stats() store.Stats {
	fs := m.feed.Stats()
	ks := m.keys.Stats()
	return store.Stats{
		Keys:             store.KeyStats{Held: ks.Held, Bytes: ks.Bytes, MaxBytes: ks.MaxBytes, Dropped: ks.Dropped, Replays: ks.Replays},
		Groups:           m.counts.groups.Load(),
		Members:          m.counts.members.Load(),
		Users:            m.reverse.Users(),
		Revision:         fs.Last,
		ChangesKept:      fs.Kept,
		ChangesKeptBytes: fs.Bytes,
		ChangesKeepBytes: fs.MaxBytes,
		ChangesDropped:   fs.Dropped,
	}
}

// WriteMetrics writes the store's figures to /metrics.
func (m *Store) WriteMetrics(w *metrics.Writer) { m.Stats().WriteMetrics(w) }

// Budgets returns the store's memory budgets: the changes the feed keeps,
// and the Idempotency-Keys remembered.
func (m *Store) Budgets() []metrics.Budget { return m.Stats().Budgets() }
