package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/client"
	"example.com/groupmembership/membershiptest"
)

// follow iterates over c.Follow until it has n changes, or an error, and
// returns them; each calls after(i) once the change i (from 0) was read.
func follow(ctx context.Context, c *client.Client, from client.Revision, n int, each func(i int), opts ...client.FollowOption) ([]client.Change, error) {
	var got []client.Change
	for ch, err := range c.Follow(ctx, from, opts...) {
		if err != nil {
			return got, err
		}
		got = append(got, ch)
		if each != nil {
			each(len(got) - 1)
		}
		if len(got) == n {
			return got, nil
		}
	}
	return got, nil
}

func revisions(changes []client.Change) []client.Revision {
	revs := make([]client.Revision, len(changes))
	for i, ch := range changes {
		revs[i] = ch.Revision
	}
	return revs
}

func TestFollowReadsEveryChangeOnce(t *testing.T) {
	srv := membershiptest.NewServer(t)
	c, ctx := srv.Client, t.Context()
	for uid := range int64(5) {
		_, err := c.Add(ctx, "g", client.Users(uid+1))
		require.NoError(t, err)
	}
	// Pages of 2: 1-2, 3-4, 5, then the long poll that the write in the
	// loop ends.
	got, err := follow(ctx, c, 0, 6, func(i int) {
		if i == 4 {
			_, err := c.Add(ctx, "g", client.Users(6))
			assert.NoError(t, err)
		}
	}, client.FollowLimit(2))
	require.NoError(t, err)
	assert.Equal(t, []client.Revision{1, 2, 3, 4, 5, 6}, revisions(got))

	got, err = follow(ctx, c, 4, 2, nil)
	require.NoError(t, err)
	assert.Equal(t, []client.Revision{5, 6}, revisions(got))
}

func TestFollowResumesAfterTransientErrors(t *testing.T) {
	var polls atomic.Int32
	faults := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/changes" {
				next.ServeHTTP(w, r)
				return
			}
			switch polls.Add(1) {
			case 1:
				busy(w, "1")
			case 2:
				hangUp(w)
			case 3:
				writeJSON(w, 502, `<html>bad gateway</html>`)
			case 4: // a poll refused its wait: [] at once, with Retry-After
				w.Header().Set("Retry-After", "1")
				writeJSON(w, 200, `[]`)
			default:
				next.ServeHTTP(w, r)
			}
		})
	}
	srv := membershiptest.NewServer(t, membershiptest.WithMiddleware(faults))
	ft := newFakeTime()
	c := newClient(t, srv.URL, ft)
	for uid := range int64(3) {
		_, err := c.Add(t.Context(), "g", client.Users(uid+1))
		require.NoError(t, err)
	}
	got, err := follow(t.Context(), c, 0, 3, nil)
	require.NoError(t, err)
	assert.Equal(t, []client.Revision{1, 2, 3}, revisions(got))
	assert.Equal(t, int32(5), polls.Load())
	// Retry-After; the backoff after the 502 (net/http itself sends a GET
	// again at once when a reused connection is closed, and it may be
	// ours to retry too); the Retry-After of the refused wait.
	sleeps := ft.Sleeps()
	require.GreaterOrEqual(t, len(sleeps), 3)
	assert.Equal(t, time.Second, sleeps[0])
	for _, d := range sleeps[1 : len(sleeps)-1] {
		assert.LessOrEqual(t, d, 400*time.Millisecond)
	}
	assert.Equal(t, time.Second, sleeps[len(sleeps)-1])
}

func TestFollowReportsChangesGone(t *testing.T) {
	srv := membershiptest.NewServer(t, membershiptest.WithLimits(membershiptest.Limits{ChangesKeep: 2}))
	c, ctx := srv.Client, t.Context()
	for uid := range int64(5) {
		_, err := c.Add(ctx, "g", client.Users(uid+1))
		require.NoError(t, err)
	}
	got, err := follow(ctx, c, 1, 10, nil)
	assert.Empty(t, got, "no change is skipped silently")
	assert.True(t, client.IsChangesGone(err), "got %v", err)
	assert.True(t, client.NeedsResync(err))
	assert.NotErrorIs(t, err, client.ErrEpochChanged)
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, client.Revision(4), e.OldestRevision)

	got, err = follow(ctx, c, 3, 2, nil)
	require.NoError(t, err, "from a revision the feed keeps")
	assert.Equal(t, []client.Revision{4, 5}, revisions(got))
}

// TestFollowReportsAnEpochChange follows a service that is stopped and
// started again without its data: the new one counts revisions in
// another history.
func TestFollowReportsAnEpochChange(t *testing.T) {
	for _, tt := range []struct {
		name string
		// writes on the new service before the follower asks it
		writes int
	}{
		{"behind the latest (410 of another epoch)", 0},
		{"within the latest (200 of another epoch)", 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			first := membershiptest.NewServer(t)
			addr := first.Addr()
			ft := newFakeTime()
			c := newClient(t, first.URL, ft)
			ctx := t.Context()
			for uid := range int64(2) {
				_, err := c.Add(ctx, "g", client.Users(uid+1))
				require.NoError(t, err)
			}
			pos, err := c.Latest(ctx)
			require.NoError(t, err)
			ft.onSleep = func(ctx context.Context, n int) {
				if n != 1 {
					return
				}
				ln, err := net.Listen("tcp", addr)
				if err != nil {
					return
				}
				second := membershiptest.NewServer(t, membershiptest.WithListener(ln))
				for uid := range int64(tt.writes) {
					_, err := second.Client.Add(ctx, "h", client.Users(uid+1))
					assert.NoError(t, err)
				}
			}
			// Reads the two changes, then the service goes away.
			got, err := follow(ctx, c, 0, 10, func(i int) {
				if i == 1 {
					first.Close()
				}
			}, client.FromEpoch(pos.Epoch))
			assert.Equal(t, []client.Revision{1, 2}, revisions(got), "nothing of the new history")
			var epochErr *client.EpochChangedError
			require.ErrorAs(t, err, &epochErr)
			assert.ErrorIs(t, err, client.ErrEpochChanged)
			assert.True(t, client.NeedsResync(err))
			assert.Equal(t, pos.Epoch, epochErr.Was)
			assert.NotEqual(t, pos.Epoch, epochErr.Now)
			assert.Equal(t, client.Revision(2), epochErr.After)
			assert.Len(t, ft.Sleeps(), 1, "the connection refused was waited out once")
		})
	}
}

func TestFollowTakesTheEpochItWasGiven(t *testing.T) {
	srv := membershiptest.NewServer(t)
	_, err := srv.Client.Add(t.Context(), "g", client.Users(1))
	require.NoError(t, err)
	got, err := follow(t.Context(), srv.Client, 0, 1, nil, client.FromEpoch("0123456789abcdef"))
	assert.Empty(t, got)
	assert.ErrorIs(t, err, client.ErrEpochChanged)
}

func TestFollowEndsWithItsContext(t *testing.T) {
	srv := membershiptest.NewServer(t)
	_, err := srv.Client.Add(t.Context(), "g", client.Users(1))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	got, err := follow(ctx, srv.Client, 0, 10, func(int) { cancel() })
	assert.Len(t, got, 1)
	assert.ErrorIs(t, err, context.Canceled)

	// And while it waits out a failure.
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) { busy(w, "1") })
	ft := newFakeTime()
	ctx, cancel = context.WithCancel(t.Context())
	ft.onSleep = func(context.Context, int) { cancel() }
	c := newClient(t, f.URL, ft)
	_, err = follow(ctx, c, 0, 10, nil)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Len(t, f.Requests(), 1)
}

func TestFollowStopsOnAPermanentError(t *testing.T) {
	srv := membershiptest.NewServer(t, membershiptest.WithToken("s3cret"), membershiptest.WithFlags("-auth-reads"))
	anonymous, err := client.New(srv.URL)
	require.NoError(t, err)
	_, err = follow(t.Context(), anonymous, 0, 1, nil)
	assert.True(t, client.IsUnauthorized(err), "got %v", err)
	_, err = follow(t.Context(), srv.Client, 0, 1, nil, client.FollowWait(2*time.Minute))
	assert.Equal(t, client.CodeInvalidQuery, client.ErrorCode(err))
	assert.False(t, errors.Is(err, client.ErrEpochChanged))
}
