// Package keys is the table of the Idempotency-Keys an in-memory store
// remembers, with what their writes returned (see membership.Idempotency):
// each its principal's, at most a retention after their commit, at most a
// budget of bytes of them (the newest kept even when it alone is over),
// the oldest dropped first.
//
// The table's decisions depend only on the keyed writes and their commit
// times, applied in order, and on its bounds: a store that replays a log
// with the same settings decides every repeat as it did live.
//
// Its locks take their places in the order of package memory's doc: a
// table's mu is taken alone, or after every other lock of the store, and
// no lock is taken while it is held; its applying lock comes before every
// other.
package keys

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/membership"
)

// inFlightWait is the longest a repeat waits for the request with its
// Idempotency-Key to finish before it is answered
// CodeIdempotencyKeyInFlight. A write in memory takes far less; the stores
// that keep a log never wait here (their repeats queue behind the first).
const inFlightWait = 5 * time.Second

// EntryOverhead is what a remembered key costs beside its bytes, its
// principal's name and its results: the entry, its place in the map and
// in the queue (a key of 36 bytes with one result holds 268 bytes in all,
// and is counted 276; a principal's name is shared with its requests, but
// counted in each of its keys).
const EntryOverhead = 208

// ResultBytes is what one remembered Result costs.
const ResultBytes = 32

// Table is the Idempotency-Keys remembered.
type Table struct {
	// applying is held for reading by a keyed write from before its change
	// until its key is remembered, and for writing by Block, so that a
	// backup never holds a change without its key.
	applying sync.RWMutex

	// mu guards the fields below but the atomics.
	mu        sync.Mutex
	byKey     map[scope]*entry
	queue     []*entry // remembered, oldest first; from head on
	head      int
	bytes     int64
	maxBytes  int64
	retention time.Duration

	dropped atomic.Uint64 // forgotten for the budget or the retention
	replays atomic.Uint64
	held    atomic.Int64 // remembered now
	heldB   atomic.Int64 // their bytes
}

// scope names a key in the table: a principal's key. Another principal's
// same key is another entry.
type scope struct{ principal, key string }

// scope returns e's place in the table.
func (e *entry) scope() scope { return scope{e.Principal, e.Key.Key} }

// entry is one key: in flight (done open) or remembered.
type entry struct {
	snap.Key
	done       chan struct{} // closed once decided
	remembered bool
	forgotten  bool // dropped from byKey, still in queue until it reaches head
	cost       int64
}

// New returns an empty table that remembers at most maxBytes of keys, each
// for retention after its commit: membership.DefaultIdempotencyBytes and
// DefaultIdempotencyRetention when <= 0.
func New(maxBytes int64, retention time.Duration) Table {
	if maxBytes <= 0 {
		maxBytes = membership.DefaultIdempotencyBytes
	}
	if retention <= 0 {
		retention = membership.DefaultIdempotencyRetention
	}
	return Table{byKey: map[scope]*entry{}, maxBytes: maxBytes, retention: retention}
}

// lookup returns the entry of principal's key idem as of now, nil when
// there is none (or it is past its retention), or
// CodeIdempotencyKeyReused when the key is remembered with another
// fingerprint or for the other kind of request. The caller holds mu.
func (t *Table) lookup(principal string, idem membership.Idempotency, batch bool, now time.Time) (*entry, error) {
	if e := t.byKey[scope{principal, idem.Key}]; e != nil && t.expired(e, now) {
		t.forget(e)
	}
	return t.peek(principal, idem, batch, now)
}

// peek is lookup reading only: a key past its retention is as none, but
// stays in the table until a write decided as of its own time forgets it.
// The caller holds mu.
func (t *Table) peek(principal string, idem membership.Idempotency, batch bool, now time.Time) (*entry, error) {
	e := t.byKey[scope{principal, idem.Key}]
	if e == nil || t.expired(e, now) {
		return nil, nil
	}
	if e.remembered && (e.Fingerprint != idem.Fingerprint || e.Batch != batch) {
		return nil, membership.IdempotencyKeyReused()
	}
	return e, nil
}

// expired reports whether e is remembered and past its retention as of
// now.
func (t *Table) expired(e *entry, now time.Time) bool {
	return e.remembered && now.Sub(e.Time) > t.retention
}

// forget drops e from the table. The caller holds mu.
func (t *Table) forget(e *entry) {
	delete(t.byKey, e.scope())
	e.forgotten = true
	t.bytes -= e.cost
	t.dropped.Add(1)
	t.held.Add(-1)
	t.heldB.Store(t.bytes)
}

// remember keeps e, decided at e.Time, and drops the oldest keys past the
// budget or the retention. The caller holds mu.
func (t *Table) remember(e *entry) {
	e.remembered = true
	e.cost = EntryOverhead + int64(len(e.Key.Key)+len(e.Principal)) + ResultBytes*int64(len(e.Results))
	t.byKey[e.scope()] = e
	t.queue = append(t.queue, e)
	t.bytes += e.cost
	t.held.Add(1)
	for t.head < len(t.queue)-1 {
		old := t.queue[t.head]
		if !old.forgotten && t.bytes <= t.maxBytes && e.Time.Sub(old.Time) <= t.retention {
			break
		}
		if !old.forgotten {
			t.forget(old)
		}
		t.queue[t.head] = nil
		t.head++
	}
	if t.head > len(t.queue)/2 && t.head > 64 { // reclaim the queue's front
		t.queue = append(t.queue[:0], t.queue[t.head:]...)
		t.head = 0
	}
	t.heldB.Store(t.bytes)
}

// Do runs apply, a write or batch of principal keyed by idem and committed
// at now, at most once for principal's key: a repeat of a remembered one gets its results
// (replayed), one whose key is in flight waits for it (at most
// inFlightWait, or until ctx is done), and one whose apply succeeds
// (changes or not) is remembered. An apply that fails leaves the key free.
// Do counts no replay: the caller does (NoteReplay), or its caller.
func (t *Table) Do(ctx context.Context, principal string, idem membership.Idempotency, batch bool, now time.Time,
	apply func() ([]membership.Result, membership.Revision, error)) (results []membership.Result, rev membership.Revision, replayed bool, err error) {
	var deadline <-chan time.Time
	for {
		t.mu.Lock()
		e, err := t.lookup(principal, idem, batch, now)
		switch {
		case err != nil:
			t.mu.Unlock()
			return nil, 0, false, err
		case e == nil:
			e = &entry{Key: snap.Key{Key: idem.Key, Principal: principal, Fingerprint: idem.Fingerprint, Batch: batch}, done: make(chan struct{})}
			t.byKey[e.scope()] = e
			t.mu.Unlock()
			t.applying.RLock() // a backup copies no change without its key
			defer t.applying.RUnlock()
			results, rev, err := apply()
			t.mu.Lock()
			if err != nil {
				delete(t.byKey, e.scope())
			} else {
				e.Time, e.Results, e.Revision = now, results, rev
				t.remember(e)
			}
			close(e.done)
			e.done = closedChan // a remembered key holds no channel of its own
			t.mu.Unlock()
			return results, rev, false, err
		case e.remembered:
			t.mu.Unlock()
			return e.Results, e.Revision, true, nil
		}
		done := e.done
		t.mu.Unlock()
		if deadline == nil {
			timer := time.NewTimer(inFlightWait)
			defer timer.Stop()
			deadline = timer.C
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

// DoLogged runs apply, a write or batch of principal keyed by idem that a
// store logged after it decided it repeats no remembered one (the durable
// store), and remembers principal's key as of at, in place of any entry
// of the key, when it succeeds: apply runs whatever the table says, so that a replay of the log
// applies every record as it was applied live, whatever the bounds of the
// table were then and are now.
func (t *Table) DoLogged(principal string, idem membership.Idempotency, batch bool, at time.Time,
	apply func() ([]membership.Result, membership.Revision, error)) error {
	t.applying.RLock() // a backup copies no change without its key
	defer t.applying.RUnlock()
	results, rev, err := apply()
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old := t.byKey[scope{principal, idem.Key}]; old != nil && old.remembered {
		t.forget(old)
	}
	t.remember(&entry{Key: snap.Key{Key: idem.Key, Principal: principal, Fingerprint: idem.Fingerprint, Batch: batch, Time: at,
		Results: results, Revision: rev}, done: closedChan})
	return nil
}

// Block waits until no keyed write is between its change and the
// remembering of its key, and keeps every keyed write from its change
// until Unblock: a backup taken meanwhile holds every keyed change with
// its key.
func (t *Table) Block() { t.applying.Lock() }

// Unblock lets keyed writes go on after Block.
func (t *Table) Unblock() { t.applying.Unlock() }

// NoteReplay counts a repeat answered with a first reply, for metrics.
func (t *Table) NoteReplay() { t.replays.Add(1) }

// Replay returns, reading only, what the write or batch of principal keyed
// by idem returned when it was applied, if the table remembers principal's
// key as of now:
// the results, the revision, and true. It returns false when the table
// does not remember the key (or it is in flight), and
// CodeIdempotencyKeyReused when it remembers it for another request. It
// forgets nothing, not even a key past its retention as of now.
func (t *Table) Replay(principal string, idem membership.Idempotency, batch bool, now time.Time) ([]membership.Result, membership.Revision, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, err := t.peek(principal, idem, batch, now)
	if err != nil || e == nil || !e.remembered {
		return nil, 0, false, err
	}
	return e.Results, e.Revision, true, nil
}

// ReplayWrite is Replay of a write as its repeat is answered: its first
// Result, Replayed, and true, counted as a replay; false when the table
// does not remember its key now.
func (t *Table) ReplayWrite(principal string, idem membership.Idempotency, now time.Time) (membership.Result, bool, error) {
	results, _, ok, err := t.Replay(principal, idem, false, now)
	if !ok || err != nil {
		return membership.Result{}, false, err
	}
	t.NoteReplay()
	res := results[0]
	res.Replayed = true
	return res, true, nil
}

// ReplayBatch is ReplayWrite of a batch.
func (t *Table) ReplayBatch(principal string, idem membership.Idempotency, now time.Time) (membership.BatchResult, bool, error) {
	results, rev, ok, err := t.Replay(principal, idem, true, now)
	if !ok || err != nil {
		return membership.BatchResult{}, false, err
	}
	t.NoteReplay()
	return membership.BatchResult{Results: slices.Clone(results), Revision: rev, Replayed: true}, true, nil
}

// Export copies the keys remembered, oldest first.
func (t *Table) Export() []snap.Key {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]snap.Key, 0, len(t.byKey))
	for _, e := range t.queue[t.head:] {
		if !e.forgotten {
			out = append(out, e.Key)
		}
	}
	return out
}

// Import remembers keys, oldest first, as remembering them one after
// another would: those past the budget or the retention, as of the newest,
// are dropped.
func (t *Table) Import(keys []snap.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, key := range keys {
		if old := t.byKey[scope{key.Principal, key.Key}]; old != nil {
			t.forget(old)
		}
		t.remember(&entry{Key: key, done: closedChan})
	}
	t.dropped.Store(0)
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Stats is what the table holds, for metrics.
type Stats struct {
	Held, Bytes, MaxBytes int64
	Dropped, Replays      uint64
}

// Stats returns what the table holds.
func (t *Table) Stats() Stats {
	return Stats{Held: t.held.Load(), Bytes: t.heldB.Load(), MaxBytes: t.maxBytes, Dropped: t.dropped.Load(), Replays: t.replays.Load()}
}
