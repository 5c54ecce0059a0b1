package memory

import (
	"context"
	"slices"
	"sync"
	"time"
	"unsafe"

	"example.com/groupmembership/membership"
)

// DefaultChangesKeepBytes is the default bound, in bytes, of the changes the
// feed keeps.
const DefaultChangesKeepBytes = 64 << 20

// feed gives out revisions and keeps the latest changes for the change feed.
// A change takes its revision and joins the feed in one critical section, so
// the feed is always in revision order with no gaps: a reader that has seen
// revision r has seen every change up to r.
//
// It keeps at most keep changes and, but for the newest, at most maxBytes of
// them (see changeCost), dropping the oldest first: a change of 10,000 uids
// costs 80 KB, so a count alone bounds nothing.
type feed struct {
	// mu guards the fields below. It is taken while a group's shard lock is
	// held, and nicknamesMu if it is, never the other way round.
	mu       sync.Mutex
	keep     int   // how many changes to keep; 0 keeps none
	maxBytes int64 // how many bytes of changes to keep
	// ring holds the kept changes, n of them from ring[start] on, wrapping
	// around; it grows up to keep.
	ring    []membership.Change
	start   int
	n       int
	bytes   int64               // the cost of the kept changes
	dropped uint64              // changes dropped to keep within the bounds
	last    membership.Revision // the latest revision given out
	// wake, when not nil, is closed at the next change: Changes waits on it.
	wake chan struct{}
}

func newFeed(keep int, maxBytes int64) feed {
	return feed{keep: keep, maxBytes: maxBytes}
}

// changeOverhead is what a kept change costs besides the memory its fields
// point to: its slot in the ring.
const changeOverhead = int64(unsafe.Sizeof(membership.Change{}))

// changeCost returns the bytes c holds: its slot (which holds its time and
// actor too), its group id, its uids and nicknames, counted by capacity,
// and a batch's changes, each as a change.
func changeCost(c membership.Change) int64 {
	n := changeOverhead + int64(len(c.GroupID)) +
		int64(cap(c.UIDs))*int64(unsafe.Sizeof(membership.UID(0))) +
		int64(cap(c.Nicknames))*int64(unsafe.Sizeof(membership.Member{}))
	for _, m := range c.Nicknames {
		n += int64(len(m.Nickname))
	}
	for _, sub := range c.Changes {
		n += changeCost(sub)
	}
	return n + int64(cap(c.Changes)-len(c.Changes))*changeOverhead
}

// stamp is who made a change and when, as its change carries them.
type stamp struct {
	actor membership.UID
	// at is the change's time; when it is zero and now is set, the change
	// takes the time it is recorded, so that times follow revisions on one
	// clock.
	at  time.Time
	now bool
}

// withTimeFor returns st with the time now, as changes carry it, when it
// has none and users give a TTL: the TTL then counts from the very time
// the change carries, not from a second reading of the clock.
func (st stamp) withTimeFor(users []membership.User) stamp {
	if st.at.IsZero() && st.now && slices.ContainsFunc(users, func(u membership.User) bool { return u.Expiry.TTL != 0 }) {
		st.at = timeOf(time.Now())
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

// record gives c the next revision, and st's actor and time, and keeps it,
// and returns the revision. published, when not nil, runs with the
// revision before any reader of the feed can see it: what must be true of
// the store once a reader has seen a revision is made true there.
func (f *feed) record(c membership.Change, st stamp, published func(membership.Revision)) membership.Revision {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last++
	c.Revision = f.last
	c.Actor, c.Time = st.actor, timeOf(st.at)
	if c.Time.IsZero() && st.now {
		c.Time = timeOf(time.Now())
	}
	if published != nil {
		published(c.Revision)
	}
	f.push(c)
	if f.wake != nil {
		close(f.wake)
		f.wake = nil
	}
	return c.Revision
}

// push keeps c, dropping the oldest changes until it fits. The newest change
// is kept even when it alone is over maxBytes: it is bounded by the largest
// request. The caller holds mu.
func (f *feed) push(c membership.Change) {
	if f.keep == 0 {
		return
	}
	cost := changeCost(c)
	for f.n > 0 && (f.n == f.keep || f.bytes+cost > f.maxBytes) {
		f.dropOldest()
	}
	if f.n == len(f.ring) {
		f.grow()
	}
	f.ring[(f.start+f.n)%len(f.ring)] = c
	f.n++
	f.bytes += cost
}

// dropOldest forgets the oldest kept change. The caller holds mu.
func (f *feed) dropOldest() {
	f.bytes -= changeCost(f.ring[f.start])
	f.ring[f.start] = membership.Change{} // let its uids go
	f.start = (f.start + 1) % len(f.ring)
	f.n--
	f.dropped++
}

// grow doubles the ring, up to keep slots. The caller holds mu.
func (f *feed) grow() {
	ring := make([]membership.Change, min(max(2*len(f.ring), 64), f.keep))
	for i := range f.n {
		ring[i] = f.at(i)
	}
	f.ring, f.start = ring, 0
}

// at returns the i-th oldest kept change. The caller holds mu.
func (f *feed) at(i int) membership.Change {
	return f.ring[(f.start+i)%len(f.ring)]
}

// oldest returns the revision of the oldest kept change, last+1 when none is
// kept. The caller holds mu.
func (f *feed) oldest() membership.Revision {
	return f.last - membership.Revision(f.n) + 1
}

// feedStats are the feed's figures for metrics.
type feedStats struct {
	last     membership.Revision
	kept     int
	bytes    int64
	maxBytes int64
	dropped  uint64
}

func (f *feed) stats() feedStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return feedStats{last: f.last, kept: f.n, bytes: f.bytes, maxBytes: f.maxBytes, dropped: f.dropped}
}

// changes implements membership.Store.Changes.
func (f *feed) changes(ctx context.Context, opts membership.ChangeOptions) ([]membership.Change, membership.Revision, error) {
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
			out := make([]membership.Change, n)
			for i := range out {
				out[i] = f.at(first + i)
			}
			f.mu.Unlock()
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

// export copies the feed's state for a snapshot. The caller keeps changes out
// while it runs.
func (f *feed) export() (last membership.Revision, kept []membership.Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	kept = make([]membership.Change, f.n)
	for i := range kept {
		kept[i] = f.at(i)
	}
	return f.last, kept
}

// load sets the feed's state from a snapshot: the latest revision and the
// changes kept, which end at last and are in order. Of them, it keeps the
// newest that fit its bounds. The feed takes kept over.
func (f *feed) load(last membership.Revision, kept []membership.Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last, f.ring, f.start, f.n, f.bytes = last, nil, 0, 0, 0
	first := len(kept)
	var bytes int64
	for first > 0 && len(kept)-first < f.keep {
		cost := changeCost(kept[first-1])
		if first < len(kept) && bytes+cost > f.maxBytes {
			break
		}
		bytes += cost
		first--
	}
	if first == len(kept) {
		return
	}
	clear(kept[:first]) // let the dropped changes' uids go
	f.ring, f.n, f.bytes = kept[first:], len(kept)-first, bytes
}
