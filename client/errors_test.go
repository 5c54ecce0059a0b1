package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/client"
	"example.com/groupmembership/membershiptest"
)

func TestNewRefusesBadBaseURLs(t *testing.T) {
	for _, url := range []string{"", "localhost:8080", "ftp://h/", "http://", "http://h/?q=1", "http://h/#f", "http://u:p@h/", "http://h/%zz", "::"} {
		_, err := client.New(url)
		assert.Error(t, err, "%q", url)
	}
	for _, opt := range []client.Option{client.WithToken(""), client.WithToken("a b"), client.WithHTTPClient(nil),
		client.WithListCacheBytes(-1), client.WithMaxReplyBytes(0)} {
		_, err := client.New("http://h", opt)
		assert.Error(t, err)
	}
	c, err := client.New("http://h:1/prefix/")
	require.NoError(t, err)
	assert.NotNil(t, c)
}

func TestABasePathPrefixesEveryRoute(t *testing.T) {
	srv := membershiptest.NewServer(t)
	target, err := url.Parse(srv.URL)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/membership/", http.StripPrefix("/membership", httputil.NewSingleHostReverseProxy(target)))
	front := httptest.NewServer(mux)
	defer front.Close()
	c, err := client.New(front.URL + "/membership/")
	require.NoError(t, err)
	_, err = c.Add(t.Context(), "a/b", client.Users(1))
	require.NoError(t, err)
	page, err := c.ListPage(t.Context(), "a/b", client.ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, []int64{1}, uidsOf(page.Items))
}

func TestErrorRepliesOfEachStatusClass(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		header map[string]string
		is     func(error) bool
		code   string
	}{
		{"400", 400, `{"error":{"code":"invalid_users","message":"users element 3: uid 0 is not valid"}}`, nil, client.IsInvalid, client.CodeInvalidUsers},
		{"401", 401, `{"error":{"code":"unauthorized","message":"no"}}`, nil, client.IsUnauthorized, client.CodeUnauthorized},
		{"403", 403, `{"error":{"code":"forbidden","message":"principal \"a\" lacks write on group \"g\""}}`, nil, client.IsForbidden, client.CodeForbidden},
		{"404", 404, `{"error":{"code":"not_found","message":"no route"}}`, nil, client.IsNotFound, client.CodeNotFound},
		{"405", 405, `{"error":{"code":"method_not_allowed","message":"no"}}`, nil, func(err error) bool { return client.StatusCode(err) == 405 }, client.CodeMethodNotAllowed},
		{"409", 409, `{"error":{"code":"idempotency_key_in_flight","message":"wait"}}`, nil, client.IsInFlight, client.CodeIdempotencyKeyInFlight},
		{"410", 410, `{"error":{"code":"changes_gone","message":"gone","oldest_revision":7}}`, nil, client.NeedsResync, client.CodeChangesGone},
		{"412", 412, `{"error":{"code":"precondition_failed","message":"no"}}`, map[string]string{"ETag": `"e-5"`}, client.IsPreconditionFailed, client.CodePreconditionFailed},
		{"413", 413, `{"error":{"code":"too_many_users","message":"no"}}`, nil, client.IsTooLarge, client.CodeTooManyUsers},
		{"415", 415, `{"error":{"code":"unsupported_media_type","message":"no"}}`, nil, func(err error) bool { return client.StatusCode(err) == 415 }, client.CodeUnsupportedMediaType},
		{"422", 422, `{"error":{"code":"idempotency_key_reused","message":"no"}}`, nil, client.IsKeyReused, client.CodeIdempotencyKeyReused},
		{"500", 500, `{"error":{"code":"internal","message":"oops"}}`, nil, func(err error) bool { return client.StatusCode(err) == 500 }, client.CodeInternal},
		{"503 without Retry-After", 503, `{"error":{"code":"unavailable","message":"busy"}}`, nil, client.IsUnavailable, client.CodeUnavailable},
		{"302", 302, `{"error":{"code":"x","message":"moved"}}`, nil, func(err error) bool { return client.StatusCode(err) == 302 }, "x"},
		{"502 from a proxy", 502, `<html>Bad Gateway</html>`, nil, func(err error) bool { return client.StatusCode(err) == 502 }, ""},
		{"an error without a code", 400, `{"error":{"message":"no code"}}`, nil, client.IsInvalid, ""},
		{"an empty body", 500, ``, nil, func(err error) bool { return client.StatusCode(err) == 500 }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				writeJSON(w, tt.status, tt.body)
			})
			ft := newFakeTime()
			c := newClient(t, f.URL, ft)
			_, err := c.Add(t.Context(), "g", client.Users(1))
			var e *client.Error
			require.ErrorAs(t, err, &e)
			assert.True(t, tt.is(err), "got %v", err)
			assert.Equal(t, tt.status, e.StatusCode)
			assert.Equal(t, tt.code, e.Code)
			assert.Equal(t, "POST", e.Method)
			assert.Equal(t, "/group-user/g", e.Path)
			assert.Contains(t, err.Error(), "POST /group-user/g")
			assert.NotEmpty(t, e.Message)
			if tt.code == client.CodeIdempotencyKeyInFlight {
				assert.Len(t, f.Requests(), client.DefaultMaxAttempts, "retried: the first attempt may still be running")
				return
			}
			assert.Len(t, f.Requests(), 1, "not retried")
			assert.Empty(t, ft.Sleeps())
		})
	}
}

func TestErrorFields(t *testing.T) {
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch r.URL.Path {
		case "/changes":
			writeJSON(w, 410, `{"error":{"code":"changes_gone","message":"gone","oldest_revision":7}}`)
		case "/group-user/g":
			w.Header().Set("ETag", `"e-5"`)
			writeJSON(w, 412, `{"error":{"code":"precondition_failed","message":"changes element 12 (group \"g\"): no"}}`)
		default:
			w.Header().Set("Retry-After", "3")
			writeJSON(w, 503, `{"error":{"code":"unavailable","message":"busy"}}`)
		}
	})
	c := newClient(t, f.URL, newFakeTime(), client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
	_, err := c.Changes(t.Context(), client.ChangesOptions{After: 3})
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, client.Revision(7), e.OldestRevision)
	assert.Equal(t, -1, e.Index)

	_, err = c.Replace(t.Context(), "g", nil, client.IfMatch(`"e-4"`))
	require.ErrorAs(t, err, &e)
	assert.Equal(t, `"e-5"`, e.ETag)
	assert.Equal(t, 12, e.Index)
	assert.Equal(t, "changes", e.Element)

	_, err = c.Check(t.Context(), nil)
	require.ErrorAs(t, err, &e)
	assert.Equal(t, 3*time.Second, e.RetryAfter)
	assert.Equal(t, "POST", e.Method)
	assert.Equal(t, "/check", e.Path)
}

func TestMalformedSuccessReplies(t *testing.T) {
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeJSON(w, 200, `{"not":"a list"`)
	})
	c := newClient(t, f.URL, newFakeTime())
	_, err := c.ListPage(t.Context(), "g", client.ListOptions{})
	assert.ErrorContains(t, err, "not what the route answers")
	_, err = c.Add(t.Context(), "g", client.Users(1))
	assert.ErrorContains(t, err, "not what the route answers")
	_, err = c.Changes(t.Context(), client.ChangesOptions{})
	assert.ErrorContains(t, err, "not what the route answers")
	assert.Nil(t, func() *client.Error { var e *client.Error; errors.As(err, &e); return e }(), "not an error reply")
}

func TestRepliesOverTheClientsBound(t *testing.T) {
	srv := membershiptest.NewServer(t, membershiptest.WithClientOptions(client.WithMaxReplyBytes(64)))
	_, err := srv.Client.Add(t.Context(), "g", client.Users(1, 2, 3, 4, 5, 6, 7, 8, 9, 10))
	require.NoError(t, err)
	_, err = srv.Client.ListPage(t.Context(), "g", client.ListOptions{})
	assert.ErrorIs(t, err, client.ErrReplyTooLarge)
}

func TestTransportErrorsStayWrapped(t *testing.T) {
	srv := membershiptest.NewServer(t)
	ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	_, err := srv.Client.Add(ctx, "g", client.Users(1))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = srv.Client.ListPage(ctx, "g", client.ListOptions{})
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	cancelled, cancel2 := context.WithCancel(t.Context())
	cancel2()
	_, err = srv.Client.Check(cancelled, []client.Check{{Group: "g", UID: 1}})
	assert.ErrorIs(t, err, context.Canceled)
}

// A TTL out of the service's bounds is the service's 400, naming the
// element, as any other bad element is.
func TestATTLOutOfBoundsIsTheServices400(t *testing.T) {
	srv := membershiptest.NewServer(t)
	for _, ttl := range []time.Duration{-time.Second, 0, 500 * time.Microsecond} {
		_, err := srv.Client.Add(t.Context(), "g", []client.User{client.NewUser(1), client.NewUser(2).WithExpiry(client.ExpiresAfter(ttl))})
		var e *client.Error
		require.ErrorAs(t, err, &e, "ttl %s", ttl)
		assert.Equal(t, client.CodeInvalidUsers, e.Code, "ttl %s", ttl)
		assert.Equal(t, 1, e.Index, "ttl %s", ttl)
	}
}

// A call that names the group "" sends nothing: no route takes it.
func TestAnEmptyGroupIsRefusedBeforeSending(t *testing.T) {
	f := newFakeService(t, func(w http.ResponseWriter, r *http.Request, n int) { writeJSON(w, 200, `1`) })
	c := newClient(t, f.URL, newFakeTime())
	ctx := t.Context()
	_, err := c.Add(ctx, "", client.Users(1))
	assert.ErrorIs(t, err, client.ErrEmptyGroup)
	_, err = c.Replace(ctx, "", client.Users(1))
	assert.ErrorIs(t, err, client.ErrEmptyGroup)
	_, err = c.Remove(ctx, "", []int64{1})
	assert.ErrorIs(t, err, client.ErrEmptyGroup)
	_, err = c.DeleteGroup(ctx, "")
	assert.ErrorIs(t, err, client.ErrEmptyGroup)
	_, err = c.ListPage(ctx, "", client.ListOptions{})
	assert.ErrorIs(t, err, client.ErrEmptyGroup)
	_, _, err = c.Member(ctx, "", 1)
	assert.ErrorIs(t, err, client.ErrEmptyGroup)
	for _, err := range c.Members(ctx, "", client.ListOptions{}) {
		assert.ErrorIs(t, err, client.ErrEmptyGroup)
	}
	assert.Empty(t, f.Requests())
}
