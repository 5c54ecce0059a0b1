package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"example.com/groupmembership/httpapi/decode"
	"example.com/groupmembership/httpapi/encode"
	"example.com/groupmembership/httpapi/lists"
	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/membership"
)

// Limits of /changes.
const (
	defaultChangesLimit = 1000
	// MaxChangesWait is the longest a /changes long-poll may wait.
	MaxChangesWait = 60 * time.Second
)

// handleChanges serves GET and HEAD of /changes: the changes after
// ?after=REV (0 when absent) in revision order, at most ?limit=N
// (defaultChangesLimit when absent), as a JSON array of
// {"rev":…,"op":…,"group":…,"uids":[…]} objects, with "nicknames" when an add
// or a replace changed some (encode.AppendChange: delete_group has no "uids",
// remove_user no "group"). X-Revision carries the latest revision, and X-Epoch the
// store's epoch: a follower that sees another epoch than it noted lists
// again, as on 410 (the revisions count in another history). With ?wait=DURATION,
// when no change follows REV the reply waits for one, for at most that long
// (and no longer than until the server begins to shut down), then is [].
//
// A reply holds at most maxReplyBytes of changes (but always at least one):
// past it, it ends early, and the client goes on with after. Its memory is
// taken from replies. A poll that would wait while waiters are at their
// limit is answered at once: when it has nothing to say, with
// Retry-After: 1.
func handleChanges(svc *membership.Service, stopping <-chan struct{}, maxReplyBytes int, replies *budget.Bytes, waiters *waiters) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		opts, wait, err := changesQuery(r)
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		waitRefused := false
		if wait > 0 {
			if lease, ok := waiters.take(); ok {
				defer lease.release()
			} else {
				wait, opts.Wait, waitRefused = 0, false, true
			}
		}
		ctx := r.Context()
		if wait > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, wait)
			defer cancel()
			go func() {
				select {
				case <-stopping:
					cancel()
				case <-ctx.Done():
				}
			}()
			// The server's write timeout counts from the request's start:
			// give the wait room, and the reply time to go out after it.
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + 10*time.Second))
		}
		changes, latest, err := svc.Changes(ctx, opts)
		w.Header()["X-Revision"] = []string{strconv.FormatUint(uint64(latest), 10)}
		w.Header()["X-Epoch"] = []string{encode.EpochHex(svc.Epoch())}
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		if waitRefused && len(changes) == 0 {
			waiters.refused.Add(1)
			w.Header()["Retry-After"] = middleware.RetryAfter
		}
		n, size := encode.ChangesJSONLen(changes, maxReplyBytes)
		body, lease, err := lists.EncodeBounded(replies, size, func(b []byte) []byte { return encode.AppendChanges(b, changes[:n]) })
		defer lease.Release()
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		middleware.WriteJSON(w, http.StatusOK, body)
	})
}

// changesQuery reads after, limit and wait, each at most once.
//
// Errors: CodeInvalidQuery.
func changesQuery(r *http.Request) (membership.ChangeOptions, time.Duration, error) {
	opts := membership.ChangeOptions{Limit: defaultChangesLimit}
	var wait time.Duration
	q, err := decode.ParseQuery(r, "after", "limit", "wait")
	if err != nil {
		return opts, 0, err
	}
	if v, ok := q["after"]; ok {
		n, ok := decode.CanonicalUint(v)
		if !ok {
			return opts, 0, membership.Errorf(membership.CodeInvalidQuery, "after %.40q is not a revision (an integer from 0)", v)
		}
		opts.After = membership.Revision(n)
	}
	limit, err := q.Limit()
	if err != nil {
		return opts, 0, err
	}
	if limit > 0 {
		opts.Limit = limit
	}
	if v, ok := q["wait"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > MaxChangesWait {
			return opts, 0, membership.Errorf(membership.CodeInvalidQuery, "wait %.40q is not a duration from 0s to %s (30s, say)", v, MaxChangesWait)
		}
		wait = d
		opts.Wait = d > 0
	}
	return opts, wait, nil
}

// waiters bounds the long polls of /changes waiting at once: each holds a
// connection, a goroutine and a timer for up to MaxChangesWait.
type waiters struct {
	limit   int64
	n       atomic.Int64
	refused atomic.Uint64
}

// waiterLease is one waiting poll's place, given back by release.
type waiterLease struct{ w *waiters }

func (l waiterLease) release() { l.w.n.Add(-1) }

// take takes a place and reports true, or reports false when every place
// is taken.
func (w *waiters) take() (waiterLease, bool) {
	if w.n.Add(1) > w.limit {
		w.n.Add(-1)
		return waiterLease{}, false
	}
	return waiterLease{w}, true
}
