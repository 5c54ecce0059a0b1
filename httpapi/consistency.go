package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/scope"
)

// minRevisionHeader is the consistency token a read may send back: the
// X-Revision of a write (or of anything read). The read is answered from a
// state at least that new, on whichever instance it reaches.
const minRevisionHeader = "X-Min-Revision"

// DefaultMinRevisionWait is the default Options.MinRevisionWait.
const DefaultMinRevisionWait = 2 * time.Second

// withMinRevision serves h once the store has reached the revision a read
// asks for in X-Min-Revision, waiting up to wait for it; past that, the
// reply is 503 unavailable, and nothing was read. A read without the
// header is served at once.
func withMinRevision(svc *membership.Service, wait time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.Header[minRevisionHeader]
		if len(v) == 0 {
			h.ServeHTTP(w, r)
			return
		}
		if len(v) > 1 {
			middleware.WriteError(w, r, membership.Errorf(middleware.CodeInvalidHeader,
				"the request has %d %s header lines: send one revision, on one line", len(v), minRevisionHeader))
			return
		}
		want, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || want < 1 || v[0][0] < '1' || v[0][0] > '9' { // no sign, no leading zero
			middleware.WriteError(w, r, membership.Errorf(middleware.CodeInvalidHeader,
				"%s %.40q is not one revision, an integer from 1 (send back the X-Revision of a reply)", minRevisionHeader, v[0]))
			return
		}
		if err := awaitRevision(r.Context(), svc, membership.Revision(want), wait); err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// awaitRevision returns once the store's latest revision is want or more,
// or a CodeUnavailable error after wait. It waits on the feed for each
// change after the latest it saw: it wakes once per change, and never
// spins, whatever the feed keeps.
func awaitRevision(ctx context.Context, svc *membership.Service, want membership.Revision, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	// Waiting for a revision reads no change, only the latest revision,
	// which every reply's X-Revision shows: a principal who may not read
	// the feed may wait.
	ctx = scope.With(ctx, nil)
	after := want - 1 // a revision reached returns at once
	for {
		_, latest, err := svc.Changes(ctx, membership.ChangeOptions{After: after, Limit: 1, Wait: true})
		switch {
		case latest >= want:
			return nil
		case ctx.Err() != nil:
			return membership.Errorf(membership.CodeUnavailable,
				"revision %d (%s) is not here yet: the latest here is %d. Try again: an instance behind the others catches up; "+
					"a revision that never comes is from another history (compare the ETag's epoch)", want, minRevisionHeader, latest)
		case err != nil && membership.ErrorCode(err) != membership.CodeChangesGone:
			return err
		}
		// Past the latest, or changes the feed no longer keeps: either
		// way, wait for the next change after the latest.
		after = latest
	}
}
