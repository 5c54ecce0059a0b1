// Package feed gives every change of a store its revision and keeps the
// latest changes for followers of the change feed (membership.Store's
// Changes). A change takes its revision and joins the feed in one critical
// section, so the feed is always in revision order with no gaps: a reader
// that has seen revision r has seen every change up to r.
//
// Its lock is the last of the in-memory store's (see package memory for
// their order): no other lock is taken while it is held.
package feed

import (
	"context"
	"slices"
	"sync"
	"time"
	"unsafe"

	"example.com/groupmembership/membership"
)

// DefaultKeepBytes is the default bound, in bytes, of the changes a Feed
// keeps.
const DefaultKeepBytes = 64 << 20

// Feed gives out revisions and keeps the latest changes.
//
// It keeps at most keep changes and, but for the newest, at most maxBytes of
// them (see ChangeCost), dropping the oldest first: a change of 10,000 uids
// costs 80 KB, so a count alone bounds nothing.
//
// Every change of the store takes mu, so what it does under mu is kept to a
// few dense words: a change is built and its cost counted before, the
// clock read before, and the ring holds pointers to changes and their
// costs, so that keeping one, and dropping the oldest, writes no cold
// cache line of a change's own.
type Feed struct {
	// mu guards the fields below. No other lock is taken while it is held.
	mu       sync.Mutex
	keep     int   // how many changes to keep; 0 keeps none
	maxBytes int64 // how many bytes of changes to keep
	// ring holds the kept changes, n of them from ring[start] on, wrapping
	// around, and costs the cost of each; both grow up to keep. A change
	// in the ring is never written again, so a reader may read it after
	// letting go of mu.
	ring     []*membership.Change
	costs    []int64
	start    int
	n        int
	bytes    int64               // the cost of the kept changes
	dropped  uint64              // changes dropped to keep within the bounds
	last     membership.Revision // the latest revision given out
	lastTime time.Time           // the latest time a change took from the clock
	// wake, when not nil, is closed at the next change: Changes waits on it.
	wake chan struct{}
}

// New returns a Feed that keeps at most keep changes (0 keeps none;
// revisions still count) and, but for the newest, at most maxBytes of them.
func New(keep int, maxBytes int64) Feed {
	return Feed{keep: keep, maxBytes: maxBytes}
}

// ChangeOverhead is what a kept change costs besides the memory its fields
// point to: the change itself, its pointer and its cost in the ring.
const ChangeOverhead = int64(unsafe.Sizeof(membership.Change{})) + 16

// ChangeCost returns the bytes c holds: its slot (which holds its time and
// actor too), its principal and group id, its uids and nicknames, counted
// by capacity, its account or group attributes, and a batch's changes,
// each as a change. A principal's name is counted in each change, though
// changes may share its bytes.
func ChangeCost(c membership.Change) int64 {
	n := ChangeOverhead + int64(len(c.Principal)+len(c.GroupID)) +
		int64(cap(c.UIDs))*int64(unsafe.Sizeof(membership.UID(0))) +
		int64(cap(c.Nicknames))*int64(unsafe.Sizeof(membership.Member{}))
	for _, m := range c.Nicknames {
		n += int64(len(m.Nickname))
	}
	if a := c.Account; a != nil {
		n += int64(unsafe.Sizeof(*a)) + int64(len(a.UserName)+len(a.ExternalID)+len(a.DisplayName)+len(a.GivenName)+len(a.FamilyName)+len(a.Email))
	}
	if g := c.GroupAttributes; g != nil {
		n += int64(unsafe.Sizeof(*g)) + int64(len(g.DisplayName)+len(g.ExternalID))
	}
	for _, sub := range c.Changes {
		n += ChangeCost(sub)
	}
	return n + int64(cap(c.Changes)-len(c.Changes))*ChangeOverhead
}

// Stamp is who made a change and when, as its change carries them.
type Stamp struct {
	Actor     membership.UID
	Principal string
	// At is the change's time; when it is zero and Now is set, the change
	// takes the time it is recorded, so that times follow revisions on one
	// clock.
	At  time.Time
	Now bool
}

// StampOf returns the stamp of w's change: its actor, principal and time,
// and, with now, the time the change is recorded when w has none.
func StampOf(w membership.Write, now bool) Stamp {
	return Stamp{Actor: w.Actor, Principal: w.Principal, At: w.Time, Now: now}
}

// WithTimeFor returns st with the time now, as changes carry it, when it
// has none and users give a TTL: the TTL then counts from the very time
// the change carries, not from a second reading of the clock.
func (st Stamp) WithTimeFor(users []membership.User) Stamp {
	if st.At.IsZero() && st.Now && slices.ContainsFunc(users, func(u membership.User) bool { return u.Expiry.TTL != 0 }) {
		st.At = timeOf(time.Now())
	}
	return st
}

// WithTimeForSubgroups is WithTimeFor for the subgroups of a nesting
// write.
func (st Stamp) WithTimeForSubgroups(groups []membership.Subgroup) Stamp {
	if st.At.IsZero() && st.Now && slices.ContainsFunc(groups, func(g membership.Subgroup) bool { return g.Expiry.TTL != 0 }) {
		st.At = timeOf(time.Now())
	}
	return st
}

// timeOf returns t as changes carry it: in UTC, to the millisecond, as
// the logs keep it, so that a change applied from a log has the time it
// had when it was first applied.
func timeOf(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Millisecond)
}

// Record gives c the next revision, and st's actor, principal and time, and keeps it,
// and returns the revision. published, when not nil, runs with the
// revision and the change's time (zero for none) before any reader of the
// feed can see it: what must be true of the store once a reader has seen
// a revision is made true there.
func (f *Feed) Record(c membership.Change, st Stamp, published func(membership.Revision, time.Time)) membership.Revision {
	c.Actor, c.Principal, c.Time = st.Actor, st.Principal, timeOf(st.At)
	fromClock := c.Time.IsZero() && st.Now
	if fromClock {
		c.Time = timeOf(time.Now())
	}
	// The change the ring keeps, if it keeps any, is built here: under mu
	// only its revision (and time) are set.
	var kept *membership.Change
	var cost int64
	if f.keep > 0 {
		kept, cost = new(membership.Change), ChangeCost(c)
		*kept = c
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fromClock {
		// The clock was read before mu: a change that read it later may
		// have taken mu first. Times follow revisions all the same.
		if c.Time.Before(f.lastTime) {
			c.Time = f.lastTime
		}
		f.lastTime = c.Time
	}
	f.last++
	c.Revision = f.last
	if published != nil {
		published(c.Revision, c.Time)
	}
	if kept != nil {
		kept.Revision, kept.Time = c.Revision, c.Time
		f.push(kept, cost)
	}
	if f.wake != nil {
		close(f.wake)
		f.wake = nil
	}
	return c.Revision
}

// push keeps c, which costs cost, dropping the oldest changes until it
// fits. The newest change is kept even when it alone is over maxBytes: it
// is bounded by the largest request. The caller holds mu.
func (f *Feed) push(c *membership.Change, cost int64) {
	for f.n > 0 && (f.n == f.keep || f.bytes+cost > f.maxBytes) {
		f.dropOldest()
	}
	if f.n == len(f.ring) {
		f.grow()
	}
	i := (f.start + f.n) % len(f.ring)
	f.ring[i], f.costs[i] = c, cost
	f.n++
	f.bytes += cost
}

// dropOldest forgets the oldest kept change. The caller holds mu.
func (f *Feed) dropOldest() {
	f.bytes -= f.costs[f.start]
	f.ring[f.start] = nil // let it go
	f.start = (f.start + 1) % len(f.ring)
	f.n--
	f.dropped++
}

// grow doubles the ring, up to keep slots. The caller holds mu.
func (f *Feed) grow() {
	size := min(max(2*len(f.ring), 64), f.keep)
	ring, costs := make([]*membership.Change, size), make([]int64, size)
	for i := range f.n {
		j := (f.start + i) % len(f.ring)
		ring[i], costs[i] = f.ring[j], f.costs[j]
	}
	f.ring, f.costs, f.start = ring, costs, 0
}

// at returns the i-th oldest kept change. The caller holds mu; the change
// may be read after it lets go.
func (f *Feed) at(i int) *membership.Change {
	return f.ring[(f.start+i)%len(f.ring)]
}

// oldest returns the revision of the oldest kept change, last+1 when none is
// kept. The caller holds mu.
func (f *Feed) oldest() membership.Revision {
	return f.last - membership.Revision(f.n) + 1
}

// Stats are a Feed's figures, for metrics.
type Stats struct {
	Last     membership.Revision // the latest revision given out
	Kept     int                 // the changes kept
	Bytes    int64               // their cost
	MaxBytes int64               // the bound of their cost
	Dropped  uint64              // the changes dropped to keep within the bounds
}

// Stats returns f's figures.
func (f *Feed) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Stats{Last: f.last, Kept: f.n, Bytes: f.bytes, MaxBytes: f.maxBytes, Dropped: f.dropped}
}

// Changes implements membership.Store.Changes.
func (f *Feed) Changes(ctx context.Context, opts membership.ChangeOptions) ([]membership.Change, membership.Revision, error) {
	for {
		f.mu.Lock()
		last, oldest := f.last, f.oldest()
		switch {
		case opts.After > last:
			f.mu.Unlock()
			err := membership.Errorf(membership.CodeChangesGone, "revision %d is beyond the latest, %d: it comes from "+
				"another history of the store (was an in-memory service restarted?); list the groups again", opts.After, last)
			err.OldestRevision = oldest
			return nil, last, err
		case opts.After+1 < oldest && f.n == 0:
			// Nothing kept: a store loaded from a backup or a snapshot at
			// last, or one that keeps no changes. oldest is last+1, the
			// first change the feed will keep: not one to name as kept.
			f.mu.Unlock()
			err := membership.Errorf(membership.CodeChangesGone, "the changes after revision %d are not kept: "+
				"the feed starts after revision %d, the latest: list the groups again, then follow the feed from revision %d", opts.After, last, last)
			err.OldestRevision = oldest
			return nil, last, err
		case opts.After+1 < oldest:
			f.mu.Unlock()
			err := membership.Errorf(membership.CodeChangesGone, "the changes after revision %d are no longer kept; "+
				"the oldest kept is %d: list the groups again, then follow the feed from the latest revision", opts.After, oldest)
			err.OldestRevision = oldest
			return nil, last, err
		case opts.After < last:
			first := int(opts.After + 1 - oldest)
			n := f.n - first
			if opts.Limit > 0 {
				n = min(n, opts.Limit)
			}
			kept := make([]*membership.Change, n)
			for i := range kept {
				kept[i] = f.at(first + i)
			}
			f.mu.Unlock()
			out := make([]membership.Change, n)
			for i, c := range kept {
				out[i] = *c
			}
			return out, last, nil
		case !opts.Wait:
			f.mu.Unlock()
			return nil, last, nil
		}
		if f.wake == nil {
			f.wake = make(chan struct{})
		}
		wake := f.wake
		f.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, last, nil
		}
	}
}

// Export copies the feed's state for a snapshot: the latest revision and
// the changes kept. The caller keeps changes out while it runs.
func (f *Feed) Export() (last membership.Revision, kept []membership.Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	kept = make([]membership.Change, f.n)
	for i := range kept {
		kept[i] = *f.at(i)
	}
	return f.last, kept
}

// Load sets the feed's state from a snapshot: the latest revision and the
// changes kept, which end at last and are in order. Of them, it keeps the
// newest that fit its bounds. The feed takes kept over.
func (f *Feed) Load(last membership.Revision, kept []membership.Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last, f.ring, f.costs, f.start, f.n, f.bytes = last, nil, nil, 0, 0, 0
	first := len(kept)
	var bytes int64
	for first > 0 && len(kept)-first < f.keep {
		cost := ChangeCost(kept[first-1])
		if first < len(kept) && bytes+cost > f.maxBytes {
			break
		}
		bytes += cost
		first--
	}
	if first == len(kept) {
		return
	}
	f.ring, f.costs = make([]*membership.Change, len(kept)-first), make([]int64, len(kept)-first)
	for i := range f.ring {
		c := kept[first+i]
		f.ring[i], f.costs[i] = &c, ChangeCost(c)
	}
	f.n, f.bytes = len(f.ring), bytes
}
