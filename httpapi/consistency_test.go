package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
)

// getAt sends a GET of path with X-Min-Revision values.
func getAt(h http.Handler, path string, minRevision ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", path, nil)
	for _, v := range minRevision {
		r.Header.Add("X-Min-Revision", v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestMinRevision(t *testing.T) {
	newHandler := func(wait time.Duration) http.Handler {
		svc := membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: testMaxUsers})
		return httpapi.NewHandler(svc, httpapi.Options{ListCacheBytes: 1 << 20, MinRevisionWait: wait})
	}
	h := newHandler(time.Hour) // a wait that ends only with what it waits for
	require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", "users=[1,2]", formType).Code)

	t.Run("a revision reached is served at once", func(t *testing.T) {
		for _, path := range []string{"/group-user/g", "/group-user/g/1", "/user-group/1"} {
			for _, v := range []string{"1"} {
				w := getAt(h, path, v)
				assert.Equal(t, http.StatusOK, w.Code, "%s %s: %s", path, v, w.Body)
			}
		}
	})

	t.Run("bad tokens are refused, and nothing is read", func(t *testing.T) {
		for _, vs := range [][]string{{"0"}, {"-1"}, {"+1"}, {"01"}, {" 1"}, {"x"}, {""}, {"1.5"}, {"9223372036854775808"}, {"1", "1"}} {
			w := getAt(h, "/group-user/g", vs...)
			assert.Equal(t, http.StatusBadRequest, w.Code, "%q", vs)
			var body struct{ Error struct{ Code string } }
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
			assert.Equal(t, "invalid_header", body.Error.Code, "%q", vs)
			assert.Empty(t, w.Header().Get("ETag"), "%q", vs)
		}
	})

	t.Run("a read of a revision to come waits for it, waking once per change, whatever the feed keeps", func(t *testing.T) {
		for _, keep := range []int{0, 1, membership.DefaultChangesKeep} {
			st := &waitCounter{Store: memory.NewWith(memory.Options{ChangesKeep: keep}), waiting: make(chan struct{}, 100)}
			h := httpapi.NewHandler(membership.NewService(st, membership.ServiceOptions{MaxUsers: testMaxUsers}), httpapi.Options{ListCacheBytes: 1 << 20, MinRevisionWait: time.Hour})
			require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", "users=[1]", formType).Code)
			got := make(chan *httptest.ResponseRecorder, 1)
			go func() { got <- getAt(h, "/group-user/g", "4") }()
			<-st.waiting // the read waits on the feed: it did not read before the writes
			for _, uid := range []string{"2", "3", "4"} {
				require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", "users=["+uid+"]", formType).Code)
			}
			w := <-got
			require.Equal(t, http.StatusOK, w.Code, "keep %d: %s", keep, w.Body)
			assert.JSONEq(t, `[{"uid":1,"nickname":""},{"uid":2,"nickname":""},{"uid":3,"nickname":""},{"uid":4,"nickname":""}]`, w.Body.String())
			assert.True(t, strings.HasSuffix(w.Header().Get("ETag"), `-4"`), w.Header().Get("ETag"))
			assert.LessOrEqual(t, st.calls.Load(), int64(5), "keep %d: the wait wakes once per change at most, and once past the latest", keep)
		}
	})

	t.Run("a revision that does not come is 503 once the wait is over", func(t *testing.T) {
		h := newHandler(time.Millisecond)
		require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", "users=[1]", formType).Code)
		for _, path := range []string{"/group-user/g", "/group-user/g/1", "/user-group/1"} {
			w := getAt(h, path, "5")
			assert.Equal(t, http.StatusServiceUnavailable, w.Code, path)
			assert.Contains(t, w.Body.String(), `"code":"unavailable"`, path)
			assert.Contains(t, w.Body.String(), "the latest here is 1", path)
			assert.Equal(t, "1", w.Header().Get("Retry-After"), path)
		}
	})
}

// waitCounter is a memory.Store that counts the waits on its feed, and says on
// waiting when one starts.
type waitCounter struct {
	*memory.Store
	waiting chan struct{}
	calls   atomic.Int64
}

func (w *waitCounter) Changes(ctx context.Context, opts membership.ChangeOptions) ([]membership.Change, membership.Revision, error) {
	if opts.Wait {
		w.calls.Add(1)
		select {
		case w.waiting <- struct{}{}:
		default:
		}
	}
	return w.Store.Changes(ctx, opts)
}
