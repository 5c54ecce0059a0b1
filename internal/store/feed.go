package store

import (
	"context"
	"slices"
	"sync"

	"example.com/groupmembership/membership"
)

// feed gives out revisions and keeps the latest changes for the change feed.
// A change takes its revision and joins the feed in one critical section, so
// the feed is always in revision order with no gaps: a reader that has seen
// revision r has seen every change up to r.
type feed struct {
	// mu guards the fields below. It is taken while a group's shard lock is
	// held, and nicknamesMu if it is, never the other way round.
	mu   sync.Mutex
	keep int // how many changes to keep; 0 keeps none
	// ring holds the kept changes, oldest at ring[start] once it is full;
	// it grows up to keep.
	ring  []membership.Change
	start int
	last  membership.Revision // the latest revision given out
	// wake, when not nil, is closed at the next change: Changes waits on it.
	wake chan struct{}
}

// record gives c the next revision and keeps it, and returns the revision.
func (f *feed) record(c membership.Change) membership.Revision {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last++
	c.Revision = f.last
	f.push(c)
	if f.wake != nil {
		close(f.wake)
		f.wake = nil
	}
	return c.Revision
}

// push keeps c, dropping the oldest change when the ring is full. The caller
// holds mu.
func (f *feed) push(c membership.Change) {
	switch {
	case f.keep == 0:
	case len(f.ring) < f.keep:
		f.ring = append(f.ring, c)
	default:
		f.ring[f.start] = c
		f.start = (f.start + 1) % len(f.ring)
	}
}

// at returns the i-th oldest kept change. The caller holds mu.
func (f *feed) at(i int) membership.Change {
	return f.ring[(f.start+i)%len(f.ring)]
}

// oldest returns the revision of the oldest kept change, last+1 when none is
// kept. The caller holds mu.
func (f *feed) oldest() membership.Revision {
	return f.last - membership.Revision(len(f.ring)) + 1
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
			n := len(f.ring) - first
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
	kept = make([]membership.Change, len(f.ring))
	for i := range kept {
		kept[i] = f.at(i)
	}
	return f.last, kept
}

// load sets the feed's state from a snapshot: the latest revision and the
// changes kept, which end at last and are in order. Only the newest keep of
// them are kept. The feed takes kept over.
func (f *feed) load(last membership.Revision, kept []membership.Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(kept) > f.keep {
		kept = slices.Clone(kept[len(kept)-f.keep:])
	}
	f.last, f.ring, f.start = last, kept, 0
}
