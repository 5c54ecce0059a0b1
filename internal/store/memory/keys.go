package memory

import (
	"context"
	"time"

	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/membership"
)

// keyed runs apply, a write or batch of principal keyed by idem and
// committed at now, at most once for principal's key (keys.Table.Do), and
// counts a repeat it answers unless the caller counts it.
func (m *Store) keyed(ctx context.Context, principal string, idem membership.Idempotency, batch bool, now time.Time,
	apply func() ([]membership.Result, membership.Revision, error)) ([]membership.Result, membership.Revision, bool, error) {
	results, rev, replayed, err := m.keys.Do(ctx, principal, idem, batch, now, apply)
	if replayed && !m.replaysCountedByCaller {
		m.keys.NoteReplay()
	}
	return results, rev, replayed, err
}

// keyedWrite runs write as Write or Apply does, once for w's key.
func (m *Store) keyedWrite(ctx context.Context, w membership.Write, now time.Time, st feed.Stamp) (membership.Result, error) {
	results, _, replayed, err := m.keyed(ctx, w.Principal, w.Idem, false, now, func() ([]membership.Result, membership.Revision, error) {
		res, err := m.write(w, st)
		return []membership.Result{res}, res.Revision, err
	})
	if err != nil {
		return membership.Result{}, err
	}
	res := results[0]
	res.Replayed = replayed
	return res, nil
}

// NoteReplay counts a repeat answered with a first reply, for metrics: a
// store that answers one from Replay, or from the result of a write it
// applied from its log, calls it once per repeat it answers.
func (m *Store) NoteReplay() { m.keys.NoteReplay() }

// ApplyLogged is Apply for a store that decides before it logs a keyed
// write whether it repeats one remembered, and logs only those that do
// not (the durable store): w is applied whatever the table says when it
// is, and, applied, its key is remembered as of w's Time. So a replay of
// the log applies every record as it was applied live, whatever the
// bounds of the table were then and are now.
func (m *Store) ApplyLogged(w membership.Write) (membership.Result, error) {
	if w.Idem.Key == "" {
		return m.Apply(w)
	}
	var res membership.Result
	err := m.keys.DoLogged(w.Principal, w.Idem, false, w.Time, func() ([]membership.Result, membership.Revision, error) {
		var err error
		res, err = m.write(w, feed.StampOf(w, false))
		return []membership.Result{res}, res.Revision, err
	})
	return res, err
}

// BatchLogged is ApplyLogged of a batch.
func (m *Store) BatchLogged(b membership.Batch) (membership.BatchResult, error) {
	if b.Idem.Key == "" {
		return m.batch(b)
	}
	var res membership.BatchResult
	err := m.keys.DoLogged(b.Principal, b.Idem, true, b.Time, func() ([]membership.Result, membership.Revision, error) {
		var err error
		res, err = m.batch(b)
		return res.Results, res.Revision, err
	})
	return res, err
}

// ReplayWrite is Replay of a write of principal as its repeat is
// answered: its first Result, Replayed, and true, counted as a replay;
// false when m does not remember principal's key now. The stores that
// keep a log call it, with the clock now, before they log a keyed write.
func (m *Store) ReplayWrite(principal string, idem membership.Idempotency, now time.Time) (membership.Result, bool, error) {
	return m.keys.ReplayWrite(principal, idem, now)
}

// ReplayBatch is ReplayWrite of a batch.
func (m *Store) ReplayBatch(principal string, idem membership.Idempotency, now time.Time) (membership.BatchResult, bool, error) {
	return m.keys.ReplayBatch(principal, idem, now)
}
