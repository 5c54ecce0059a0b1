package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"time"
)

// Position is a point of the feed: a revision, in the history the epoch
// names.
type Position struct {
	Revision Revision
	Epoch    string
}

// Latest returns the store's latest revision and its epoch: where a
// follower that lists the groups now starts to follow (step 1 of the
// reference's "To keep a cache in sync").
func (c *Client) Latest(ctx context.Context) (Position, error) {
	page, err := c.Changes(ctx, ChangesOptions{Limit: 1})
	if e := asError(err); e != nil && e.Code == CodeChangesGone {
		// A feed that dropped its first change says 410: its headers are
		// all this needs.
		return Position{Revision: revisionOf(e.Header), Epoch: e.Header.Get("X-Epoch")}, nil
	}
	if err != nil {
		return Position{}, err
	}
	return Position{Revision: page.Latest, Epoch: page.Epoch}, nil
}

// FollowOption configures Follow.
type FollowOption func(*followOptions)

type followOptions struct {
	epoch string
	wait  time.Duration
	limit int
}

// FromEpoch says which epoch the revision Follow starts after belongs to
// (Position.Epoch, a /changes reply's X-Epoch). Without it, Follow takes
// the epoch of its first reply, and cannot tell a change of epoch that
// came before it.
func FromEpoch(epoch string) FollowOption {
	return func(o *followOptions) { o.epoch = epoch }
}

// DefaultFollowWait is how long each long poll of Follow waits.
const DefaultFollowWait = 30 * time.Second

// MinFollowWait is the shortest wait of Follow's long polls: FollowWait
// below it is raised to it.
const MinFollowWait = time.Second

// FollowWait sets how long each long poll of Follow waits for a change,
// up to 60 s: DefaultFollowWait by default.
func FollowWait(d time.Duration) FollowOption {
	return func(o *followOptions) { o.wait = d }
}

// FollowLimit sets the most changes of each reply, 1 to 10000: the
// service's default (1000) by default.
func FollowLimit(n int) FollowOption {
	return func(o *followOptions) { o.limit = n }
}

// Follow iterates over the changes after the revision after, oldest
// first, each once, for ever: it long-polls GET /changes (FollowWait),
// and goes on from the last change it yielded.
//
// A transient failure (a connection error, a 5xx, a 429) is not yielded:
// Follow waits, with the client's backoff (RetryPolicy's BaseDelay and
// MaxDelay, but no bound on the attempts), and asks again from the same
// revision. Every other failure is yielded as the last pair, and ends the
// iteration, for the caller to handle:
//
//   - a 410 changes_gone (IsChangesGone): the feed no longer holds the
//     changes after the revision asked for: the follower fell behind the
//     feed's retention, or the service restarted without its data;
//   - an *EpochChangedError (errors.Is(err, ErrEpochChanged)): the
//     store's epoch is not the one followed until now (FromEpoch, or that
//     of the first reply): the service restarted without its data,
//     crashed, or was repaired or restored, and its revisions count in
//     another history;
//   - any other error reply (401, a 400 for a bad option).
//
// On the first two (NeedsResync), changes may have been lost: Follow never
// skips them silently. Drop what was built from the feed, take a new
// Position (Latest), list again, and follow from there.
//
// When ctx ends, Follow yields its error (errors.Is(err,
// context.Canceled), say) and ends. Breaking out of the loop ends it too.
func (c *Client) Follow(ctx context.Context, after Revision, opts ...FollowOption) iter.Seq2[Change, error] {
	o := followOptions{wait: DefaultFollowWait}
	for _, opt := range opts {
		opt(&o)
	}
	// A poll that waits for nothing would poll as fast as replies come.
	o.wait = max(o.wait, MinFollowWait)
	return func(yield func(Change, error) bool) {
		f := follower{c: c, after: after, epoch: o.epoch}
		for {
			polled := c.retry.now()
			page, err := c.changes(ctx, ChangesOptions{After: f.after, Limit: o.limit, Wait: o.wait}, 1)
			if err != nil {
				if err = f.failed(ctx, err); err != nil {
					yield(Change{}, err)
					return
				}
				continue
			}
			f.failures = 0
			if err := f.checkEpoch(page.Epoch); err != nil {
				yield(Change{}, err)
				return
			}
			for _, ch := range page.Changes {
				if ch.Revision <= f.after {
					// The service's feed only goes forward: a reply that
					// does not is another's (a proxy's), and following it
					// would repeat changes.
					yield(Change{}, fmt.Errorf("membership: following the changes after %d: a reply gave revision %d, not after it", f.after, ch.Revision))
					return
				}
				if !yield(ch, nil) {
					return
				}
				f.after = ch.Revision
			}
			// The service answers an empty page after the wait, or with
			// Retry-After; one that answers much sooner is not to be polled
			// as fast as it answers: at most once a MinFollowWait.
			wait := page.RetryAfter
			if elapsed := c.retry.now().Sub(polled); wait <= 0 && elapsed < o.wait/2 {
				wait = MinFollowWait - elapsed
			}
			if len(page.Changes) == 0 && wait > 0 {
				if err := c.retry.sleep(ctx, min(wait, max(c.retry.MaxDelay, MinFollowWait))); err != nil {
					yield(Change{}, f.ended(ctx, nil))
					return
				}
			}
		}
	}
}

// follower is the state of one Follow.
type follower struct {
	c        *Client
	after    Revision
	epoch    string
	failures int
}

// checkEpoch notes the epoch of the first reply, and returns an
// *EpochChangedError for a reply of another.
func (f *follower) checkEpoch(epoch string) error {
	switch {
	case epoch == "":
		return nil
	case f.epoch == "":
		f.epoch = epoch
		return nil
	case epoch != f.epoch:
		return &EpochChangedError{Was: f.epoch, Now: epoch, After: f.after}
	}
	return nil
}

// failed handles the error of a poll: it returns the error to yield, or
// nil after waiting to poll again.
func (f *follower) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return f.ended(ctx, err)
	}
	var retryAfter time.Duration
	if e := asError(err); e != nil {
		if epochErr := f.checkEpoch(e.Header.Get("X-Epoch")); epochErr != nil {
			return fmt.Errorf("%w (the reply: %w)", epochErr, err)
		}
		if !transientStatus(e.StatusCode) {
			return err
		}
		retryAfter = e.RetryAfter
	} else if !connectionError(err) {
		return err
	}
	f.failures++
	p := f.c.retry
	if serr := p.sleep(ctx, p.backoff(f.failures, retryAfter)); serr != nil {
		return f.ended(ctx, err)
	}
	return nil
}

// ended returns the error to yield once ctx ended: ctx's error, with the
// failure that was being handled, if any.
func (f *follower) ended(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, ctx.Err()) {
		return fmt.Errorf("membership: following the changes after %d: %w", f.after, ctx.Err())
	}
	return fmt.Errorf("membership: following the changes after %d: %w (after: %v)", f.after, ctx.Err(), err)
}

// transientStatus reports whether a reply of status may be followed by a
// good one, the request unchanged.
func transientStatus(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests
}
