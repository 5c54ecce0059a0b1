package memory

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/membership"
)

// keyInFlightWait is the longest a repeat waits for the request with its
// Idempotency-Key to finish before it is answered
// CodeIdempotencyKeyInFlight. A write in memory takes far less; the stores
// that keep a log never wait here (their repeats queue behind the first).
const keyInFlightWait = 5 * time.Second

// keyOverhead is what a remembered key costs beside its bytes and its
// results: the entry, its place in the map and in the queue (measured:
// 252 bytes in all for a key of 36 bytes with one result, counted 260).
const keyOverhead = 192

// resultBytes is what one remembered Result costs.
const resultBytes = 32

// keys is the table of the Idempotency-Keys a Store remembers, with what
// their writes returned (see membership.Idempotency): at most retention
// after their commit, at most maxBytes of them (the newest kept even when
// it alone is over), the oldest dropped first. Its mu is taken alone, or
// after every other lock of the store (a backup holds the shards), and no
// lock is taken while it is held.
//
// The table's decisions depend only on the keyed writes and their commit
// times, applied in order, and on maxBytes and retention: a store that
// replays a log with the same settings decides every repeat as it did
// live.
type keys struct {
	mu        sync.Mutex
	byKey     map[string]*keyEntry
	queue     []*keyEntry // remembered, oldest first; from head on
	head      int
	bytes     int64
	maxBytes  int64
	retention time.Duration

	dropped atomic.Uint64 // forgotten for the budget or the retention
	replays atomic.Uint64
	held    atomic.Int64 // remembered now
	heldB   atomic.Int64 // their bytes
}

// keyEntry is one key: in flight (done open) or remembered.
type keyEntry struct {
	snap.Key
	done       chan struct{} // closed once decided
	remembered bool
	forgotten  bool // dropped from byKey, still in queue until it reaches head
	cost       int64
}

func newKeys(maxBytes int64, retention time.Duration) keys {
	if maxBytes <= 0 {
		maxBytes = membership.DefaultIdempotencyBytes
	}
	if retention <= 0 {
		retention = membership.DefaultIdempotencyRetention
	}
	return keys{byKey: map[string]*keyEntry{}, maxBytes: maxBytes, retention: retention}
}

// lookup returns the entry of idem's key as of now, nil when there is none
// (or it is past its retention), or CodeIdempotencyKeyReused when the key
// is remembered with another fingerprint or for the other kind of request.
// The caller holds mu.
func (k *keys) lookup(idem membership.Idempotency, batch bool, now time.Time) (*keyEntry, error) {
	if e := k.byKey[idem.Key]; e != nil && k.expired(e, now) {
		k.forget(e)
	}
	return k.peek(idem, batch, now)
}

// peek is lookup reading only: a key past its retention is as none, but
// stays in the table until a write decided as of its own time forgets it.
// The caller holds mu.
func (k *keys) peek(idem membership.Idempotency, batch bool, now time.Time) (*keyEntry, error) {
	e := k.byKey[idem.Key]
	if e == nil || k.expired(e, now) {
		return nil, nil
	}
	if e.remembered && (e.Fingerprint != idem.Fingerprint || e.Batch != batch) {
		return nil, membership.IdempotencyKeyReused()
	}
	return e, nil
}

// expired reports whether e is remembered and past its retention as of
// now.
func (k *keys) expired(e *keyEntry, now time.Time) bool {
	return e.remembered && now.Sub(e.Time) > k.retention
}

// forget drops e from the table. The caller holds mu.
func (k *keys) forget(e *keyEntry) {
	delete(k.byKey, e.Key.Key)
	e.forgotten = true
	k.bytes -= e.cost
	k.dropped.Add(1)
	k.held.Add(-1)
	k.heldB.Store(k.bytes)
}

// remember keeps e, decided at e.Time, and drops the oldest keys past the
// budget or the retention. The caller holds mu.
func (k *keys) remember(e *keyEntry) {
	e.remembered = true
	e.cost = keyOverhead + int64(len(e.Key.Key)) + resultBytes*int64(len(e.Results))
	k.byKey[e.Key.Key] = e
	k.queue = append(k.queue, e)
	k.bytes += e.cost
	k.held.Add(1)
	for k.head < len(k.queue)-1 {
		old := k.queue[k.head]
		if !old.forgotten && k.bytes <= k.maxBytes && e.Time.Sub(old.Time) <= k.retention {
			break
		}
		if !old.forgotten {
			k.forget(old)
		}
		k.queue[k.head] = nil
		k.head++
	}
	if k.head > len(k.queue)/2 && k.head > 64 { // reclaim the queue's front
		k.queue = append(k.queue[:0], k.queue[k.head:]...)
		k.head = 0
	}
	k.heldB.Store(k.bytes)
}

// keyed runs apply, a write or batch keyed by idem and committed at now, at
// most once for its key: a repeat of a remembered one gets its results
// (replayed), one whose key is in flight waits for it (at most
// keyInFlightWait, or until ctx is done), and one whose apply succeeds
// (changes or not) is remembered. An apply that fails leaves the key free.
func (m *Store) keyed(ctx context.Context, idem membership.Idempotency, batch bool, now time.Time,
	apply func() ([]membership.Result, membership.Revision, error)) (results []membership.Result, rev membership.Revision, replayed bool, err error) {
	var deadline <-chan time.Time
	k := &m.keys
	for {
		k.mu.Lock()
		e, err := k.lookup(idem, batch, now)
		switch {
		case err != nil:
			k.mu.Unlock()
			return nil, 0, false, err
		case e == nil:
			e = &keyEntry{Key: snap.Key{Key: idem.Key, Fingerprint: idem.Fingerprint, Batch: batch}, done: make(chan struct{})}
			k.byKey[idem.Key] = e
			k.mu.Unlock()
			m.keyedMu.RLock() // a backup copies no change without its key
			defer m.keyedMu.RUnlock()
			results, rev, err := apply()
			k.mu.Lock()
			if err != nil {
				delete(k.byKey, idem.Key)
			} else {
				e.Time, e.Results, e.Revision = now, results, rev
				k.remember(e)
			}
			close(e.done)
			e.done = closedChan // a remembered key holds no channel of its own
			k.mu.Unlock()
			return results, rev, false, err
		case e.remembered:
			k.mu.Unlock()
			if !m.replaysCountedByCaller {
				k.replays.Add(1)
			}
			return e.Results, e.Revision, true, nil
		}
		done := e.done
		k.mu.Unlock()
		if deadline == nil {
			t := time.NewTimer(keyInFlightWait)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-done: // decided: look again
		case <-deadline:
			return nil, 0, false, membership.IdempotencyKeyInFlight()
		case <-ctx.Done():
			return nil, 0, false, membership.IdempotencyKeyInFlight()
		}
	}
}

// keyedWrite runs write as Write or Apply does, once for w's key.
func (m *Store) keyedWrite(ctx context.Context, w membership.Write, now time.Time, st feed.Stamp) (membership.Result, error) {
	w.Idem.Fingerprint = fingerprintOf(w.Idem, func() membership.Fingerprint { return membership.FingerprintWrite(w) })
	results, _, replayed, err := m.keyed(ctx, w.Idem, false, now, func() ([]membership.Result, membership.Revision, error) {
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

// fingerprintOf returns idem's fingerprint, or, when the caller gave none
// (a test, a store calling another), the request's own.
func fingerprintOf(idem membership.Idempotency, own func() membership.Fingerprint) membership.Fingerprint {
	if idem.Fingerprint != (membership.Fingerprint{}) {
		return idem.Fingerprint
	}
	return own()
}

// NoteReplay counts a repeat answered with a first reply, for metrics: a
// store that answers one from Replay, or from the result of a write it
// applied from its log, calls it once per repeat it answers.
func (m *Store) NoteReplay() { m.keys.replays.Add(1) }

// Replay returns, reading only, what the write or batch keyed by idem
// returned when it was applied, if m remembers its key as of now: the
// results (a write's one Result, or a batch's), the revision, and true.
// It returns false when m does not remember the key (or it is in flight),
// and CodeIdempotencyKeyReused when m remembers it for another request.
// The stores that keep a log call it before logging a keyed write: a
// repeat is answered without a record. It forgets nothing, not even a key
// past its retention as of now: now is the caller's clock, and only the
// writes applied, as of their commit times, change the table, so that a
// replay of the log decides as the store did live.
func (m *Store) Replay(idem membership.Idempotency, batch bool, now time.Time) ([]membership.Result, membership.Revision, bool, error) {
	k := &m.keys
	k.mu.Lock()
	defer k.mu.Unlock()
	e, err := k.peek(idem, batch, now)
	if err != nil || e == nil || !e.remembered {
		return nil, 0, false, err
	}
	return e.Results, e.Revision, true, nil
}

// exportKeys copies the keys m remembers, oldest first.
func (m *Store) exportKeys() []snap.Key {
	k := &m.keys
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]snap.Key, 0, len(k.byKey))
	for _, e := range k.queue[k.head:] {
		if !e.forgotten {
			out = append(out, e.Key)
		}
	}
	return out
}

// importKeys remembers keys, oldest first, as remember would have: those
// past the budget or the retention, as of the newest, are dropped.
func (m *Store) importKeys(keys []snap.Key) {
	k := &m.keys
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, key := range keys {
		if old := k.byKey[key.Key]; old != nil {
			k.forget(old)
		}
		k.remember(&keyEntry{Key: key, done: closedChan})
	}
	k.dropped.Store(0)
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// keyStats is what the key table holds, for metrics.
type keyStats struct {
	Held, Bytes, MaxBytes int64
	Dropped, Replays      uint64
}

func (k *keys) stats() keyStats {
	return keyStats{Held: k.held.Load(), Bytes: k.heldB.Load(), MaxBytes: k.maxBytes, Dropped: k.dropped.Load(), Replays: k.replays.Load()}
}

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
	m.keyedMu.RLock() // a backup copies no change without its key
	defer m.keyedMu.RUnlock()
	res, err := m.write(w, feed.Stamp{Actor: w.Actor, At: w.Time})
	if err == nil {
		m.rememberLogged(w.Idem, false, w.Time, []membership.Result{res}, res.Revision)
	}
	return res, err
}

// BatchLogged is ApplyLogged of a batch.
func (m *Store) BatchLogged(b membership.Batch) (membership.BatchResult, error) {
	if b.Idem.Key == "" {
		return m.batch(b)
	}
	m.keyedMu.RLock()
	defer m.keyedMu.RUnlock()
	res, err := m.batch(b)
	if err == nil {
		m.rememberLogged(b.Idem, true, b.Time, res.Results, res.Revision)
	}
	return res, err
}

// rememberLogged remembers idem's key for a logged write applied at t,
// in place of any entry of the key.
func (m *Store) rememberLogged(idem membership.Idempotency, batch bool, t time.Time, results []membership.Result, rev membership.Revision) {
	k := &m.keys
	k.mu.Lock()
	defer k.mu.Unlock()
	if old := k.byKey[idem.Key]; old != nil && old.remembered {
		k.forget(old)
	}
	e := &keyEntry{Key: snap.Key{Key: idem.Key, Fingerprint: idem.Fingerprint, Batch: batch, Time: t, Results: results, Revision: rev}, done: closedChan}
	k.remember(e)
}

// ReplayWrite is Replay of a write as its repeat is answered: its first
// Result, Replayed, and true, counted as a replay; false when m does not
// remember its key now. The stores that keep a log call it, with the
// clock now, before they log a keyed write.
func (m *Store) ReplayWrite(idem membership.Idempotency, now time.Time) (membership.Result, bool, error) {
	results, _, ok, err := m.Replay(idem, false, now)
	if !ok || err != nil {
		return membership.Result{}, false, err
	}
	m.NoteReplay()
	res := results[0]
	res.Replayed = true
	return res, true, nil
}

// ReplayBatch is ReplayWrite of a batch.
func (m *Store) ReplayBatch(idem membership.Idempotency, now time.Time) (membership.BatchResult, bool, error) {
	results, rev, ok, err := m.Replay(idem, true, now)
	if !ok || err != nil {
		return membership.BatchResult{}, false, err
	}
	m.NoteReplay()
	return membership.BatchResult{Results: slices.Clone(results), Revision: rev, Replayed: true}, true, nil
}
