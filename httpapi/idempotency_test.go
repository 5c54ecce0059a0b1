package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/internal/metrics/metricstest"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
)

// keyed is one request to the API, with the Idempotency-Key header lines
// keys (none: no header) and other headers.
type keyed struct {
	method, path, body string
	keys               []string
	header             map[string]string
}

// send sends req to h. A body that starts with { is JSON, any other a form.
func (req keyed) send(h http.Handler) *httptest.ResponseRecorder {
	r := httptest.NewRequest(req.method, req.path, strings.NewReader(req.body))
	switch {
	case strings.HasPrefix(req.body, "{"):
		r.Header.Set("Content-Type", jsonType)
	case req.body != "":
		r.Header.Set("Content-Type", formType)
	}
	for _, k := range req.keys {
		r.Header.Add("Idempotency-Key", k)
	}
	for k, v := range req.header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// withKey returns req with the one Idempotency-Key key.
func (req keyed) withKey(key string) keyed {
	req.keys = []string{key}
	return req
}

// list returns the body of GET path.
func list(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	w := do(h, "GET", path, "", "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	return w.Body.String()
}

// replyHeaders returns the headers of w that the write set: all but the
// request's own id and the replay's mark.
func replyHeaders(w *httptest.ResponseRecorder) http.Header {
	h := w.Header().Clone()
	h.Del("X-Request-Id")
	h.Del("Idempotent-Replayed")
	return h
}

// A repeat of a keyed write gets the first reply, status, body, X-Revision
// and every other header the write set, with Idempotent-Replayed: true,
// and applies nothing: another client's change made in between stays.
func TestIdempotencyKeyReplaysEveryWrite(t *testing.T) {
	tests := []struct {
		name  string
		setup []keyed // sent first, without a key
		first keyed   // sent with the key, then again
		// between is another client's change, after the first: applying
		// the first again would undo it.
		between keyed
		// ifMatch sends the group g's ETag of before first as its If-Match.
		ifMatch  bool
		wantBody string
		listPath string
		wantList string
	}{
		{
			name:     "POST /group-user adds",
			first:    keyed{method: "POST", path: "/group-user/g", body: `users=[1,[2,"Bo"]]&uid=42`},
			between:  keyed{method: "DELETE", path: "/group-user/g", body: `users=[1]`},
			wantBody: `2`,
			listPath: "/group-user/g", wantList: `[{"uid":2,"nickname":"Bo"}]`,
		},
		{
			name:     "POST /group-user with a JSON body",
			first:    keyed{method: "POST", path: "/group-user/g", body: `{"users":[1,2],"uid":42}`},
			between:  keyed{method: "DELETE", path: "/group-user/g", body: `users=[2]`},
			wantBody: `2`,
			listPath: "/group-user/g", wantList: `[{"uid":1,"nickname":""}]`,
		},
		{
			name:     "PUT /group-user replaces",
			setup:    []keyed{{method: "POST", path: "/group-user/g", body: `users=[1,2]`}},
			first:    keyed{method: "PUT", path: "/group-user/g", body: `users=[3]`},
			between:  keyed{method: "POST", path: "/group-user/g", body: `users=[4]`},
			wantBody: `{"added":1,"removed":2}`,
			listPath: "/group-user/g", wantList: `[{"uid":3,"nickname":""},{"uid":4,"nickname":""}]`,
		},
		{
			name:     "PUT /group-user with If-Match: the replay checks no condition",
			setup:    []keyed{{method: "POST", path: "/group-user/g", body: `users=[1]`}},
			first:    keyed{method: "PUT", path: "/group-user/g", body: `users=[3]`},
			ifMatch:  true,
			between:  keyed{method: "POST", path: "/group-user/g", body: `users=[4]`},
			wantBody: `{"added":1,"removed":1}`,
			listPath: "/group-user/g", wantList: `[{"uid":3,"nickname":""},{"uid":4,"nickname":""}]`,
		},
		{
			name:     "DELETE /group-user removes",
			setup:    []keyed{{method: "POST", path: "/group-user/g", body: `users=[1,2]`}},
			first:    keyed{method: "DELETE", path: "/group-user/g", body: `users=[1]`},
			between:  keyed{method: "POST", path: "/group-user/g", body: `users=[1]`},
			wantBody: `1`,
			listPath: "/group-user/g", wantList: `[{"uid":1,"nickname":""},{"uid":2,"nickname":""}]`,
		},
		{
			name:     "DELETE /groups empties the group",
			setup:    []keyed{{method: "POST", path: "/group-user/g", body: `users=[1,2]`}},
			first:    keyed{method: "DELETE", path: "/groups/g?uid=42"},
			between:  keyed{method: "POST", path: "/group-user/g", body: `users=[5]`},
			wantBody: `2`,
			listPath: "/group-user/g", wantList: `[{"uid":5,"nickname":""}]`,
		},
		{
			name: "DELETE /user-group removes the user everywhere",
			setup: []keyed{
				{method: "POST", path: "/group-user/g", body: `users=[1]`},
				{method: "POST", path: "/group-user/h", body: `users=[1]`},
			},
			first:    keyed{method: "DELETE", path: "/user-group/1?uid=42"},
			between:  keyed{method: "POST", path: "/group-user/g", body: `users=[1]`},
			wantBody: `2`,
			listPath: "/user-group/1", wantList: `["g"]`,
		},
		{
			name:  "POST /batch",
			setup: []keyed{{method: "POST", path: "/group-user/g", body: `users=[1]`}},
			first: keyed{method: "POST", path: "/batch",
				body: `{"changes":[{"op":"remove","group":"g","users":[1]},{"op":"add","group":"h","users":[1]}],"uid":42}`},
			between:  keyed{method: "DELETE", path: "/group-user/h", body: `users=[1]`},
			wantBody: `{"results":[{"removed":1},{"added":1}]}`,
			listPath: "/user-group/1", wantList: `[]`,
		},
		{
			name:     "a write that changes nothing",
			setup:    []keyed{{method: "POST", path: "/group-user/g", body: `users=[1]`}},
			first:    keyed{method: "POST", path: "/group-user/g", body: `users=[1]`},
			between:  keyed{method: "DELETE", path: "/group-user/g", body: `users=[1]`},
			wantBody: `0`,
			listPath: "/group-user/g", wantList: `[]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newTestHandler(t)
			for _, req := range tt.setup {
				require.Equal(t, http.StatusOK, req.send(h).Code)
			}
			first := tt.first.withKey("retry-1")
			if tt.ifMatch {
				w := do(h, "GET", "/group-user/g", "", "")
				first.header = map[string]string{"If-Match": w.Header().Get("ETag")}
			}
			w1 := first.send(h)
			require.Equal(t, http.StatusOK, w1.Code, w1.Body.String())
			assert.Equal(t, tt.wantBody, w1.Body.String())
			assert.Empty(t, w1.Header().Values("Idempotent-Replayed"), "the first reply is no replay")
			require.NotEmpty(t, w1.Header().Get("X-Revision"))

			require.Equal(t, http.StatusOK, tt.between.send(h).Code)
			latest := latestRevision(t, h)

			for i := range 2 {
				w2 := first.send(h)
				assert.Equal(t, w1.Code, w2.Code, "retry %d", i)
				assert.Equal(t, w1.Body.String(), w2.Body.String(), "retry %d", i)
				assert.Equal(t, w1.Header().Get("X-Revision"), w2.Header().Get("X-Revision"), "retry %d", i)
				assert.Equal(t, []string{"true"}, w2.Header().Values("Idempotent-Replayed"), "retry %d", i)
				assert.Equal(t, replyHeaders(w1), replyHeaders(w2), "retry %d: the headers of the first reply", i)
			}
			assert.Equal(t, latest, latestRevision(t, h), "the retries applied nothing")
			assert.JSONEq(t, tt.wantList, list(t, h, tt.listPath), "the change made in between stays")
		})
	}
}

// A request is the same when it asks for the same change, whatever its
// bytes: another form of the same users is a replay; another route,
// group, user, nickname, condition or acting uid is 422, and changes
// nothing.
func TestIdempotencyKeyWithAnotherRequestIs422(t *testing.T) {
	h, _ := newTestHandler(t)
	require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/other", "users=[7]", formType).Code)
	first := keyed{method: "POST", path: "/group-user/g", body: `users=[1,[2,"Bo"]]`, keys: []string{"k"}}
	w1 := first.send(h)
	require.Equal(t, http.StatusOK, w1.Code, w1.Body.String())
	require.Equal(t, `2`, w1.Body.String())
	latest := latestRevision(t, h)
	wantList := list(t, h, "/group-user/g")

	for _, same := range []keyed{
		{method: "POST", path: "/group-user/g", body: `users=["1",[2,"Bo"]]`},
		{method: "POST", path: "/group-user/g", body: `users=[[1],{"uid":2,"nickname":"Bo"}]`},
		{method: "POST", path: "/group-user/g", body: `users=%5B1%2C%5B2%2C%22Bo%22%5D%5D`},
		{method: "POST", path: "/group-user/g", body: `{"users":[1,[2,"Bo"]]}`},
		{method: "POST", path: "/group-user/%67", body: `users=[1,[2,"Bo"]]`},
	} {
		w := same.withKey("k").send(h)
		assert.Equal(t, http.StatusOK, w.Code, "%+v: %s", same, w.Body.String())
		assert.Equal(t, `2`, w.Body.String(), "%+v", same)
		assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"), "%+v: the same request", same)
		assert.Equal(t, w1.Header().Get("X-Revision"), w.Header().Get("X-Revision"), "%+v", same)
	}

	for _, other := range []keyed{
		{method: "POST", path: "/group-user/g", body: `users=[1]`},
		{method: "POST", path: "/group-user/g", body: `users=[1,2]`},
		{method: "POST", path: "/group-user/g", body: `users=[1,[2,"Bob"]]`},
		{method: "POST", path: "/group-user/g", body: `users=[1,[2,""]]`},
		{method: "POST", path: "/group-user/g", body: `users=[1,[2,"Bo"],3]`},
		{method: "POST", path: "/group-user/g", body: `users=[[2,"Bo"],1]`},
		{method: "POST", path: "/group-user/g", body: `users=[1,1,[2,"Bo"]]`},
		{method: "POST", path: "/group-user/g", body: `users=[1,[2,"Bo"]]&uid=42`},
		{method: "POST", path: "/group-user/g", body: `users=[1,[2,"Bo"]]`, header: map[string]string{"If-None-Match": "*"}},
		{method: "POST", path: "/group-user/g", body: `users=[1,[2,"Bo"]]`, header: map[string]string{"If-Match": "*"}},
		{method: "POST", path: "/group-user/h", body: `users=[1,[2,"Bo"]]`},
		{method: "PUT", path: "/group-user/g", body: `users=[1,[2,"Bo"]]`},
		{method: "DELETE", path: "/group-user/g", body: `users=[1,2]`},
		{method: "DELETE", path: "/groups/g"},
		{method: "DELETE", path: "/user-group/1"},
		{method: "POST", path: "/batch", body: `{"changes":[{"op":"add","group":"g","users":[1,[2,"Bo"]]}]}`},
	} {
		w := other.withKey("k").send(h)
		assert.Equal(t, http.StatusUnprocessableEntity, w.Code, "%+v: %s", other, w.Body.String())
		assert.Contains(t, w.Body.String(), `"code":"idempotency_key_reused"`, "%+v", other)
		assert.Empty(t, w.Header().Values("Idempotent-Replayed"), "%+v", other)
		assert.Empty(t, w.Header().Values("X-Revision"), "%+v", other)
	}
	assert.Equal(t, latest, latestRevision(t, h), "nothing was applied")
	assert.Equal(t, wantList, list(t, h, "/group-user/g"))
	assert.JSONEq(t, `[{"uid":7,"nickname":""}]`, list(t, h, "/group-user/other"))

	// A batch's key is refused to a write, and a write's to a batch.
	batch := keyed{method: "POST", path: "/batch", body: `{"changes":[{"op":"delete_group","group":"other"}]}`, keys: []string{"b"}}
	require.Equal(t, http.StatusOK, batch.send(h).Code)
	w := keyed{method: "DELETE", path: "/groups/other", keys: []string{"b"}}.send(h)
	assert.Equal(t, http.StatusUnprocessableEntity, w.Code, w.Body.String())
	w = batch.send(h)
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, "no-store", w.Header().Get("Cache-Control"), "the batch's own headers")
}

// A write refused (a condition that does not hold, a bad request) applied
// nothing and leaves its key free: the same key later is a new attempt.
func TestIdempotencyKeyOfARefusedWriteStaysFree(t *testing.T) {
	h, _ := newTestHandler(t)
	require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", "users=[1]", formType).Code)

	create := keyed{method: "PUT", path: "/group-user/g", body: `users=[2]`, keys: []string{"create"}, header: map[string]string{"If-None-Match": "*"}}
	w := create.send(h)
	require.Equal(t, http.StatusPreconditionFailed, w.Code, w.Body.String())
	assert.Empty(t, w.Header().Values("Idempotent-Replayed"))
	require.Equal(t, http.StatusOK, do(h, "DELETE", "/groups/g", "", "").Code)
	w = create.send(h)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, `{"added":1,"removed":0}`, w.Body.String())
	assert.Empty(t, w.Header().Values("Idempotent-Replayed"), "applied: the 412 left the key free")

	// An If-Match of another epoch never holds: 412 without the store.
	never := keyed{method: "POST", path: "/group-user/g", body: `users=[3]`, keys: []string{"never"}, header: map[string]string{"If-Match": `"0000000000000000-1"`}}
	require.Equal(t, http.StatusPreconditionFailed, never.send(h).Code)
	w = keyed{method: "POST", path: "/group-user/g", body: `users=[3]`, keys: []string{"never"}}.send(h)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, `1`, w.Body.String())
	assert.Empty(t, w.Header().Values("Idempotent-Replayed"))

	bad := keyed{method: "POST", path: "/group-user/g", body: `users=[x]`, keys: []string{"bad"}}
	require.Equal(t, http.StatusBadRequest, bad.send(h).Code)
	bad.body = `users=[4]`
	w = bad.send(h)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Empty(t, w.Header().Values("Idempotent-Replayed"))
}

// writes are a valid request of every write route, over the state
// writesState leaves.
var writes = []keyed{
	{method: "POST", path: "/group-user/g", body: `users=[3]`},
	{method: "PUT", path: "/group-user/g", body: `users=[3]`},
	{method: "DELETE", path: "/group-user/g", body: `users=[1]`},
	{method: "DELETE", path: "/groups/g"},
	{method: "DELETE", path: "/user-group/1"},
	{method: "POST", path: "/batch", body: `{"changes":[{"op":"add","group":"h","users":[3]}]}`},
}

var writesState = []keyed{{method: "POST", path: "/group-user/g", body: `users=[1,2]`}}

// A key that is not 1 to 255 printable ASCII characters, or two header
// lines of it, is 400 invalid_idempotency_key, on every write, and
// changes nothing.
func TestBadIdempotencyKeysAre400(t *testing.T) {
	bad := map[string][]string{
		"empty":                   {""},
		"256 bytes":               {strings.Repeat("k", 256)},
		"a control byte":          {"a\x01b"},
		"a tab":                   {"a\tb"},
		"DEL":                     {"a\x7f"},
		"a non-ASCII character":   {"café"},
		"a byte past ASCII":       {"a\x80"},
		"a newline":               {"a\nb"},
		"two header lines":        {"a", "b"},
		"the same key twice":      {"a", "a"},
		"an empty line and a key": {"", "a"},
	}
	for _, write := range writes {
		for name, keys := range bad {
			t.Run(write.method+" "+write.path+": "+name, func(t *testing.T) {
				h, _ := newTestHandler(t)
				for _, req := range writesState {
					require.Equal(t, http.StatusOK, req.send(h).Code)
				}
				latest := latestRevision(t, h)
				req := write
				req.keys = keys
				w := req.send(h)
				assert.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
				assert.Contains(t, w.Body.String(), `"code":"invalid_idempotency_key"`)
				assert.Equal(t, latest, latestRevision(t, h), "nothing applied")
				assert.JSONEq(t, `[{"uid":1,"nickname":""},{"uid":2,"nickname":""}]`, list(t, h, "/group-user/g"))
			})
		}
	}
}

// Every printable ASCII character is taken, up to 255 of them; commas
// and spaces are part of the key, which is one header line.
func TestGoodIdempotencyKeys(t *testing.T) {
	var all strings.Builder
	for c := byte(' '); c <= '~'; c++ {
		all.WriteByte(c)
	}
	for _, key := range []string{"k", strings.Repeat("k", 255), all.String(), "a, b", "a b"} {
		h, _ := newTestHandler(t)
		req := keyed{method: "POST", path: "/group-user/g", body: `users=[1]`, keys: []string{key}}
		w := req.send(h)
		require.Equal(t, http.StatusOK, w.Code, "%q: %s", key, w.Body.String())
		assert.Empty(t, w.Header().Values("Idempotent-Replayed"))
		w = req.send(h)
		require.Equal(t, http.StatusOK, w.Code, "%q: %s", key, w.Body.String())
		assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"), "%q", key)
		assert.Equal(t, `1`, w.Body.String(), "%q", key)
	}
	// Another key is another request.
	h, _ := newTestHandler(t)
	require.Equal(t, `1`, keyed{method: "POST", path: "/group-user/g", body: `users=[1]`, keys: []string{"a"}}.send(h).Body.String())
	w := keyed{method: "POST", path: "/group-user/g", body: `users=[1]`, keys: []string{"A"}}.send(h)
	assert.Equal(t, `0`, w.Body.String(), "keys are compared byte for byte")
	assert.Empty(t, w.Header().Values("Idempotent-Replayed"))
}

// Reads take no Idempotency-Key: any value, or two, is ignored.
func TestReadsIgnoreTheIdempotencyKey(t *testing.T) {
	h, _ := newTestHandler(t)
	require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", "users=[1]", formType).Code)
	for _, keys := range [][]string{{""}, {"a\x01"}, {"a", "b"}} {
		for _, read := range []keyed{
			{method: "GET", path: "/group-user/g"},
			{method: "HEAD", path: "/group-user/g"},
			{method: "GET", path: "/group-user/g/1"},
			{method: "GET", path: "/groups"},
			{method: "GET", path: "/user-group/1"},
			{method: "GET", path: "/changes"},
			{method: "POST", path: "/check", body: `{"checks":[{"group":"g","uid":1}]}`},
		} {
			read.keys = keys
			w := read.send(h)
			assert.Equal(t, http.StatusOK, w.Code, "%s %s %q: %s", read.method, read.path, keys, w.Body.String())
			assert.Empty(t, w.Header().Values("Idempotent-Replayed"))
		}
	}
}

// Requests with one key sent at once are applied once: one reply is the
// first, the others its replays.
func TestConcurrentRequestsWithOneKeyApplyOnce(t *testing.T) {
	for _, req := range []keyed{
		{method: "POST", path: "/group-user/g", body: `users=[1,2]`},
		{method: "POST", path: "/batch", body: `{"changes":[{"op":"add","group":"g","users":[1,2]},{"op":"remove","group":"h","users":[1]}]}`},
	} {
		t.Run(req.path, func(t *testing.T) {
			h, _ := newTestHandler(t)
			const n = 16
			replies := make([]*httptest.ResponseRecorder, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					replies[i] = req.withKey("together").send(h)
				}()
			}
			close(start)
			wg.Wait()
			firsts := 0
			for _, w := range replies {
				require.Equal(t, http.StatusOK, w.Code, w.Body.String())
				assert.Equal(t, replies[0].Body.String(), w.Body.String())
				assert.Equal(t, "1", w.Header().Get("X-Revision"))
				if w.Header().Get("Idempotent-Replayed") == "" {
					firsts++
				}
			}
			assert.Equal(t, 1, firsts, "one request applied, the others replayed it")
			assert.Equal(t, "1", latestRevision(t, h), "one change")
		})
	}
}

// inFlightStore answers every keyed write as one whose key is still being
// applied by another request.
type inFlightStore struct{ *memory.Store }

func (s inFlightStore) Write(ctx context.Context, w membership.Write) (membership.Result, error) {
	if w.Idem.Key != "" {
		return membership.Result{}, membership.IdempotencyKeyInFlight()
	}
	return s.Store.Write(ctx, w)
}

func (s inFlightStore) Batch(ctx context.Context, b membership.Batch) (membership.BatchResult, error) {
	if b.Idem.Key != "" {
		return membership.BatchResult{}, membership.IdempotencyKeyInFlight()
	}
	return s.Store.Batch(ctx, b)
}

func TestIdempotencyKeyInFlightIs409(t *testing.T) {
	h := httpapi.NewHandler(membership.NewService(inFlightStore{memory.New()}, membership.ServiceOptions{MaxUsers: testMaxUsers}), httpapi.Options{})
	for _, req := range writes {
		w := req.withKey("busy").send(h)
		assert.Equal(t, http.StatusConflict, w.Code, "%s %s: %s", req.method, req.path, w.Body.String())
		assert.Contains(t, w.Body.String(), `"code":"idempotency_key_in_flight"`)
	}
}

// The handler hands the key to the store, which sees it on every write
// route, and nothing of it on reads.
func TestEveryWriteRouteHandsItsKeyToTheStore(t *testing.T) {
	st := &keyRecorder{Store: memory.New()}
	h := httpapi.NewHandler(membership.NewService(st, membership.ServiceOptions{MaxUsers: testMaxUsers}), httpapi.Options{})
	for _, req := range writesState {
		require.Equal(t, http.StatusOK, req.send(h).Code)
	}
	for i, req := range writes {
		key := "key-" + req.method + req.path
		w := req.withKey(key).send(h)
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		st.mu.Lock()
		assert.Equal(t, key, st.keys[len(st.keys)-1], "write %d", i)
		st.mu.Unlock()
	}
}

type keyRecorder struct {
	*memory.Store
	mu   sync.Mutex
	keys []string
}

func (s *keyRecorder) Write(ctx context.Context, w membership.Write) (membership.Result, error) {
	s.mu.Lock()
	s.keys = append(s.keys, w.Idem.Key)
	s.mu.Unlock()
	return s.Store.Write(ctx, w)
}

func (s *keyRecorder) Batch(ctx context.Context, b membership.Batch) (membership.BatchResult, error) {
	s.mu.Lock()
	s.keys = append(s.keys, b.Idem.Key)
	s.mu.Unlock()
	return s.Store.Batch(ctx, b)
}

// /metrics shows the keys remembered, their memory and its budget, those
// dropped, and the replays.
func TestMetricsShowTheIdempotencyKeys(t *testing.T) {
	st := memory.NewWith(memory.Options{ChangesKeep: membership.DefaultChangesKeep, IdempotencyBytes: 1})
	h := httpapi.NewLoadingHandler(httpapi.Options{})
	h.Load(membership.NewService(st, membership.ServiceOptions{MaxUsers: testMaxUsers}), httpapi.StoreExtras{Metrics: st.WriteMetrics, Budgets: st.Budgets})

	a := keyed{method: "POST", path: "/group-user/g", body: `users=[1]`, keys: []string{"a"}}
	require.Equal(t, `1`, a.send(h).Body.String())
	w := a.send(h)
	require.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	metrics := func() map[string]*metricstest.Family {
		w := do(h, "GET", "/metrics", "", "")
		require.Equal(t, http.StatusOK, w.Code)
		families, err := metricstest.Parse(w.Body.String())
		require.NoError(t, err, w.Body.String())
		return families
	}
	value := func(families map[string]*metricstest.Family, name string, labels map[string]string) float64 {
		t.Helper()
		f := families[name]
		require.NotNil(t, f, name)
		v, ok := sample(f, name, labels)
		require.True(t, ok, "%s %v", name, labels)
		return v
	}
	families := metrics()
	assert.Equal(t, 1.0, value(families, "membership_idempotency_keys", nil))
	assert.Positive(t, value(families, "membership_idempotency_keys_bytes", nil))
	assert.Equal(t, 0.0, value(families, "membership_idempotency_keys_dropped_total", nil))
	assert.Equal(t, 1.0, value(families, "membership_idempotency_replays_total", nil))
	budget := map[string]string{"budget": "idempotency_keys"}
	assert.Equal(t, value(families, "membership_idempotency_keys_bytes", nil), value(families, "membership_memory_bytes", budget))
	assert.Equal(t, 1.0, value(families, "membership_memory_limit_bytes", budget))

	// Past the budget the oldest key goes (the newest is kept whatever
	// its size): a repeat of it is a new write.
	b := keyed{method: "POST", path: "/group-user/g", body: `users=[2]`, keys: []string{"b"}}
	require.Equal(t, `1`, b.send(h).Body.String())
	families = metrics()
	assert.Equal(t, 1.0, value(families, "membership_idempotency_keys", nil))
	assert.Equal(t, 1.0, value(families, "membership_idempotency_keys_dropped_total", nil))
	assert.Equal(t, 1.0, value(families, "membership_memory_refused_total", budget))
	require.Equal(t, http.StatusOK, do(h, "DELETE", "/group-user/g", "users=[1]", formType).Code)
	w = a.send(h)
	assert.Equal(t, `1`, w.Body.String(), "applied again: its key was forgotten")
	assert.Empty(t, w.Header().Values("Idempotent-Replayed"))
}

// A keyed conditional write is the same request before and after the
// store's epoch changes (a restore): a retry that names the ETag it read
// before gets the first reply, though that tag is of no state of this
// store now; the same key with another request is 422 all the same.
func TestARetryAfterTheEpochChangedIsAReplay(t *testing.T) {
	before := memory.NewWith(memory.Options{Epoch: 1})
	h := httpapi.NewHandler(membership.NewService(before, membership.ServiceOptions{}), httpapi.Options{})
	require.Equal(t, http.StatusOK, keyed{method: "POST", path: "/group-user/g", body: "users=[1]"}.send(h).Code)
	etag := do(h, "GET", "/group-user/g", "", "").Header().Get("ETag")
	put := keyed{method: "PUT", path: "/group-user/g", body: "users=[2]", header: map[string]string{"If-Match": etag}}.withKey("k")
	first := put.send(h)
	require.Equal(t, http.StatusOK, first.Code, first.Body.String())

	restored := memory.NewWith(memory.Options{Epoch: 2})
	st, load := before.Export(), restored.Loader()
	for _, g := range st.Groups {
		require.NoError(t, load.Group(g))
	}
	load.Finish(st)
	h = httpapi.NewHandler(membership.NewService(restored, membership.ServiceOptions{}), httpapi.Options{})
	again := put.send(h)
	require.Equal(t, http.StatusOK, again.Code, again.Body.String())
	assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, first.Body.String(), again.Body.String())
	assert.Equal(t, first.Header().Get("X-Revision"), again.Header().Get("X-Revision"))

	other := keyed{method: "PUT", path: "/group-user/g", body: "users=[3]", header: map[string]string{"If-Match": etag}}.withKey("k").send(h)
	assert.Equal(t, http.StatusUnprocessableEntity, other.Code, other.Body.String())
	fresh := keyed{method: "PUT", path: "/group-user/g", body: "users=[3]", header: map[string]string{"If-Match": etag}}.withKey("fresh").send(h)
	assert.Equal(t, http.StatusPreconditionFailed, fresh.Code, "a tag of another epoch never holds: %s", fresh.Body.String())
	batch := keyed{method: "POST", path: "/batch", body: `{"changes":[{"op":"delete_group","group":"g","if_match":` + strconv.Quote(etag) + `}]}`}.withKey("b").send(h)
	assert.Equal(t, http.StatusPreconditionFailed, batch.Code, batch.Body.String())
	assert.Equal(t, `[{"uid":2,"nickname":""}]`, list(t, h, "/group-user/g"))
}

// POST /batch takes its conditions in its changes: If-Match and
// If-None-Match headers are refused, not ignored.
func TestABatchRefusesConditionHeaders(t *testing.T) {
	h := httpapi.NewHandler(membership.NewService(memory.New(), membership.ServiceOptions{}), httpapi.Options{})
	for _, header := range []map[string]string{{"If-Match": `"x-1"`}, {"If-None-Match": "*"}, {"If-Match": `"unterminated`}} {
		w := keyed{method: "POST", path: "/batch", body: `{"changes":[{"op":"add","group":"g","users":[1]}]}`, header: header}.send(h)
		assert.Equal(t, http.StatusBadRequest, w.Code, "%v: %s", header, w.Body.String())
		assert.Contains(t, w.Body.String(), `"invalid_header"`)
	}
	assert.Equal(t, `[]`, list(t, h, "/group-user/g"))
}
