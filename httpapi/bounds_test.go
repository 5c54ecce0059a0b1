package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/internal/metrics/metricstest"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
)

// One /changes reply is bounded in bytes: it holds fewer changes, at least
// one, and the client goes on with after.
func TestChangesReplyIsBoundedInBytes(t *testing.T) {
	svc := membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: 100})
	h := httpapi.NewHandler(svc, httpapi.Options{ChangesReplyBytes: 200})
	for i := range 10 {
		users := fmt.Sprintf("users=[%d,%d,%d]", 1000*i+1, 1000*i+2, 1000*i+3)
		require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", users, formType).Code)
	}
	// Each change is {"rev":N,"op":"add","group":"g","uids":[…,…,…]}: about
	// 60 bytes, so three fit in 200.
	var seen []int
	after := 0
	for range 20 {
		w := do(h, "GET", fmt.Sprintf("/changes?after=%d", after), "", "")
		require.Equal(t, http.StatusOK, w.Code)
		assert.LessOrEqual(t, w.Body.Len(), 200)
		var changes []struct{ Rev int }
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &changes))
		if len(changes) == 0 {
			break
		}
		assert.LessOrEqual(t, len(changes), 3)
		for _, c := range changes {
			seen = append(seen, c.Rev)
		}
		after = changes[len(changes)-1].Rev
	}
	assert.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, seen, "every change, in order, across replies")

	// A change larger than the bound comes alone.
	h = httpapi.NewHandler(svc, httpapi.Options{ChangesReplyBytes: 10})
	w := do(h, "GET", "/changes?after=0", "", "")
	require.Equal(t, http.StatusOK, w.Code)
	assert.JSONEq(t, `[{"rev":1,"op":"add","group":"g","uids":[1,2,3]}]`, untimed(t, w.Body.String()))
}

// While other bodies hold all the memory for bodies, a new write is refused
// at once with 503 and Retry-After, changing nothing.
func TestWritesPastTheBodyBudgetAreRefused(t *testing.T) {
	st := memory.New()
	// The memory for bodies is one first buffer: a body of 511 bytes takes it
	// all.
	h := httpapi.NewHandler(membership.NewService(st, membership.ServiceOptions{MaxUsers: 1000}), httpapi.Options{BodyMemoryBytes: 512, MaxBodyBytes: 511})
	slowUsers := "users=[1" + strings.Repeat(",2", 250) + "]"
	require.Len(t, slowUsers, 509)

	// A slow client: its body has begun and holds the buffer.
	slowBody, slowWriter := io.Pipe()
	slow := httptest.NewRequest("POST", "/group-user/slow", slowBody)
	slow.Header.Set("Content-Type", formType)
	slow.ContentLength = int64(len(slowUsers))
	slowDone := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, slow)
		slowDone <- w
	}()
	_, err := slowWriter.Write([]byte(slowUsers[:8]))
	require.NoError(t, err) // returns once the handler has read it: it holds its buffer

	w := do(h, "POST", "/group-user/g", "users=[7]", formType)
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
	assert.Contains(t, w.Body.String(), `"code":"unavailable"`)
	assert.Contains(t, w.Body.String(), "request bodies")
	assert.Equal(t, `[]`, do(h, "GET", "/group-user/g", "", "").Body.String(), "nothing was changed")

	assert.Equal(t, http.StatusOK, do(h, "GET", "/readyz", "", "").Code,
		"clients that spend the budget do not take the instance out of its load balancer")
	assert.Equal(t, http.StatusOK, do(h, "GET", "/group-user/slow", "", "").Code, "reads go on")

	go func() {
		_, _ = slowWriter.Write([]byte(slowUsers[8:]))
		slowWriter.Close()
	}()
	assert.Equal(t, http.StatusOK, (<-slowDone).Code)
	assert.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", "users=[7]", formType).Code)
}

// The users or groups a change decodes count against the memory for
// bodies while it is applied: a body that fits, with elements that do not,
// is refused while another body holds its part; the same change alone is
// served.
func TestDecodedElementsCountAgainstTheBodyBudget(t *testing.T) {
	tests := []struct {
		name, route, slowStart, many, wantCount string
	}{
		// 811 bytes, 401 users of 32 bytes decoded
		{"users", "/group-user/", "users=[1", "users=[1" + strings.Repeat(",2", 400) + "]", "2"},
		// 1205 bytes, 300 groups decoded
		{"groups", "/group-group/", `groups=["b"`, `groups=["a"` + strings.Repeat(`,"a"`, 299) + `]`, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := httpapi.NewHandler(membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: 1000}),
				httpapi.Options{Logger: slog.New(slog.DiscardHandler), BodyMemoryBytes: 4096, MaxBodyBytes: 2048})
			require.Less(t, len(tt.many), 4096-512)

			slowBody, slowWriter := io.Pipe()
			slow := httptest.NewRequest("POST", tt.route+"slow", slowBody)
			slow.Header.Set("Content-Type", formType)
			slowDone := make(chan *httptest.ResponseRecorder, 1)
			go func() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, slow)
				slowDone <- w
			}()
			_, err := slowWriter.Write([]byte(tt.slowStart))
			require.NoError(t, err) // returns once the handler has read it: it holds its first buffer

			w := do(h, "POST", tt.route+"g", tt.many, formType)
			assert.Equal(t, http.StatusServiceUnavailable, w.Code, w.Body.String())
			assert.Contains(t, w.Body.String(), "request bodies")
			assert.Equal(t, `[]`, do(h, "GET", tt.route+"g", "", "").Body.String(), "nothing was changed")

			go func() {
				_, _ = slowWriter.Write([]byte("]"))
				slowWriter.Close()
			}()
			assert.Equal(t, http.StatusOK, (<-slowDone).Code)
			w = do(h, "POST", tt.route+"g", tt.many, formType)
			assert.Equal(t, http.StatusOK, w.Code, "alone, it is served: %s", w.Body.String())
			assert.Equal(t, tt.wantCount, w.Body.String())
		})
	}
}

// A JSON body, decoded into a copy, as large as the whole budget, is
// served when it is alone.
func TestACopiedBodyAloneIsServedWhateverItsSize(t *testing.T) {
	h := httpapi.NewHandler(membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: 10000}), httpapi.Options{BodyMemoryBytes: 20000, MaxBodyBytes: 20000})
	body := `{"users":[1` + strings.Repeat(",2", 9000) + `]}` // 18,014 bytes, and its copy
	w := do(h, "POST", "/group-user/g", body, "application/json")
	assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
}

// /readyz is 503, with the store's reason, whenever the store cannot take
// writes, and the membership_store_writable gauge says 0.
func TestReadyzSaysWhenTheStoreCannotTakeWrites(t *testing.T) {
	var why error
	st := memory.New()
	h := httpapi.NewLoadingHandler(httpapi.Options{})
	h.Load(membership.NewService(st, membership.ServiceOptions{MaxUsers: 100}), httpapi.StoreExtras{
		Writable: func() error { return why },
		Metrics:  st.WriteMetrics,
		Budgets:  st.Budgets,
	})
	writable := func() float64 {
		w := do(h, "GET", "/metrics", "", "")
		require.Equal(t, http.StatusOK, w.Code)
		families, err := metricstest.Parse(w.Body.String())
		require.NoError(t, err, w.Body.String())
		f := families["membership_store_writable"]
		require.NotNil(t, f)
		for _, name := range []string{"membership_memory_bytes", "membership_memory_limit_bytes", "membership_memory_refused_total"} {
			for _, budget := range []string{"request_bodies", "replies", "list_cache", "changes_kept"} {
				_, ok := sample(families[name], name, map[string]string{"budget": budget})
				assert.True(t, ok, "%s{budget=%q}", name, budget)
			}
		}
		require.NotNil(t, families["go_goroutines"])
		return f.Samples[0].Value
	}

	assert.Equal(t, http.StatusOK, do(h, "GET", "/readyz", "", "").Code)
	assert.Equal(t, 1.0, writable())

	why = membership.Errorf(membership.CodeUnavailable, "the store takes no changes until restarted: fsync failed: input/output error")
	w := do(h, "GET", "/readyz", "", "")
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.JSONEq(t, `{"error":{"code":"unavailable","message":"the store takes no changes until restarted: fsync failed: input/output error"}}`, w.Body.String())
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
	assert.Equal(t, 0.0, writable())
	assert.Equal(t, http.StatusOK, do(h, "GET", "/healthz", "", "").Code, "liveness is not readiness")

	why = errors.New("an error nobody classified")
	assert.Equal(t, http.StatusInternalServerError, do(h, "GET", "/readyz", "", "").Code, "as any internal error")
}

// contextStore is a store that honours its context, as a database would: a
// change whose client went away fails with the context's error.
type contextStore struct{ *memory.Store }

func (s contextStore) Write(ctx context.Context, w membership.Write) (membership.Result, error) {
	if err := ctx.Err(); err != nil {
		return membership.Result{}, err
	}
	return s.Store.Write(ctx, w)
}

// failingWriter is a ResponseWriter whose client is gone: every write fails.
type failingWriter struct{ header http.Header }

func (w *failingWriter) Header() http.Header { return w.header }
func (w *failingWriter) WriteHeader(int)     {}
func (w *failingWriter) Write([]byte) (int, error) {
	return 0, errors.New("write: broken pipe")
}

// A client that goes away is not a server error: no 500, no ERROR line; it
// counts as 499 in the access log and the metrics.
func TestAClientThatGoesAwayIsNotAServerError(t *testing.T) {
	logs := &syncBuffer{}
	st := contextStore{memory.New()}
	h := httpapi.NewHandler(membership.NewService(st, membership.ServiceOptions{MaxUsers: 100}), httpapi.Options{
		Logger:    slog.New(slog.NewJSONHandler(logs, nil)),
		AccessLog: true,
	})

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client hung up
	r := httptest.NewRequest("POST", "/group-user/g", strings.NewReader("users=[1]")).WithContext(ctx)
	r.Header.Set("Content-Type", formType)
	h.ServeHTTP(httptest.NewRecorder(), r)

	// A GET whose reply cannot be written: the client went away meanwhile.
	h.ServeHTTP(&failingWriter{header: http.Header{}}, httptest.NewRequest("GET", "/group-user/g", nil))

	lines := logs.Lines()
	require.Len(t, lines, 2)
	for _, line := range lines {
		var entry map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &entry))
		assert.Equal(t, float64(499), entry["status"], line)
		assert.Equal(t, "INFO", entry["level"], line)
		assert.NotContains(t, entry, "err", line)
	}
	w := do(h, "GET", "/metrics", "", "")
	assert.Contains(t, w.Body.String(), `membership_http_requests_total{route="/group-user/{groupID}",method="POST",status="499"} 1`)
	assert.Contains(t, w.Body.String(), `membership_http_requests_total{route="/group-user/{groupID}",method="GET",status="499"} 1`)
	assert.NotContains(t, w.Body.String(), `status="500"`)
}

// A request with both Content-Length and a chunked body is read as chunked
// (net/http's choice, RFC 9112's rule), and its connection is closed after
// the reply, so that a request smuggled behind it is never read.
func TestAChunkedBodyClosesItsConnection(t *testing.T) {
	st := memory.New()
	srv := serve(t, httpapi.NewHandler(membership.NewService(st, membership.ServiceOptions{MaxUsers: 100}), httpapi.Options{}))
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	body := "users=[1]"
	smuggled := "DELETE /group-user/g HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 9\r\n\r\nusers=[1]"
	_, err = io.WriteString(conn, "POST /group-user/g HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"+
		"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"+fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)+smuggled)
	require.NoError(t, err)
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "1", string(got), "the chunked body was read")
	assert.True(t, resp.Close, "Connection: close")
	rest, err := io.ReadAll(r)
	require.NoError(t, err, "the service closed the connection")
	assert.Empty(t, string(rest), "the request behind it is never read")
	_, ok, err := st.Member(context.Background(), "g", 1)
	require.NoError(t, err)
	assert.True(t, ok, "and the smuggled DELETE never ran")
}

// A path that is not in canonical form is a JSON 404, never a redirect, and
// changes nothing; ids such as . and .. are reached escaped, and the Link
// header escapes them so that it names the same group.
func TestPathsAreCanonicalOrRefused(t *testing.T) {
	st := memory.New()
	h := httpapi.NewHandler(membership.NewService(st, membership.ServiceOptions{MaxUsers: 100}), httpapi.Options{})
	for _, tt := range []struct{ method, path string }{
		{"POST", "/group-user//x"},
		{"POST", "/group-user/a/../x"},
		{"POST", "/group-user/./x"},
		{"GET", "/group-user//x"},
		{"GET", "/group-user/x/"},
		{"GET", "/user-group/1/"},
		{"GET", "//healthz"},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			w := do(h, tt.method, tt.path, "users=[77]", formType)
			assert.Equal(t, http.StatusNotFound, w.Code)
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
			assert.Empty(t, w.Header().Get("Location"))
			assert.Contains(t, w.Body.String(), `"code":"not_found"`)
		})
	}
	w := do(h, "GET", "/group-user/x", "", "")
	assert.Equal(t, `[]`, w.Body.String(), "the redirect's target was never written to")

	for _, id := range []string{"%2E", "%2E%2E"} {
		require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/"+id, "users=[1,2]", formType).Code)
		w := do(h, "GET", "/group-user/"+id+"?limit=1", "", "")
		require.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, `</group-user/`+id+`?limit=1&after=1>; rel="next"`, w.Header().Get("Link"))
	}
	_, ok, err := st.Member(context.Background(), "..", 1)
	require.NoError(t, err)
	assert.True(t, ok, "%2E%2E names the group ..")
}

// Queries are parsed strictly, in one place for every route: a malformed
// pair, an unknown parameter, a repeat, or a number not written canonically
// is 400 invalid_query, never silently dropped; the documented bounds are
// accepted.
func TestQueriesAreStrict(t *testing.T) {
	st := memory.New()
	h := httpapi.NewHandler(membership.NewService(st, membership.ServiceOptions{MaxUsers: 100}), httpapi.Options{})
	require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", "users=[1,2,3]", formType).Code)
	for _, path := range []string{
		"/group-user/g?limit=%zz",
		"/group-user/g?limit=5;",
		"/group-user/g?limit=02",
		"/group-user/g?limit=+2",
		"/group-user/g?limit=0",
		"/group-user/g?limit=10001",
		"/group-user/g?after=07",
		"/group-user/g?foo=1",
		"/group-user/g?limit=1&limit=1",
		"/user-group/1?limit=02",
		"/user-group/1?after=g&after=h",
		"/user-group/1?after=",
		"/group-user/g?limit=",
		"/changes?wait=",
		"/changes?after=1;limit=1",
		"/changes?after=01",
		"/changes?after=+1",
		"/changes?limit=1&x=",
		"/group-user/g/1?x=1",
		"/healthz?verbose",
		"/openapi.json?v=2",
	} {
		t.Run(path, func(t *testing.T) {
			w := do(h, "GET", path, "", "")
			assert.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
			assert.Contains(t, w.Body.String(), `"code":"invalid_query"`)
		})
	}
	for _, path := range []string{
		"/group-user/g?limit=1", "/group-user/g?limit=10000", "/group-user/g?after=1",
		"/user-group/1?limit=10000&after=a", "/changes?after=0&limit=10000", "/changes?after=1&wait=0s",
	} {
		t.Run(path, func(t *testing.T) {
			assert.Equal(t, http.StatusOK, do(h, "GET", path, "", "").Code)
		})
	}
	w := do(h, "POST", "/group-user/g?dry=1", "users=[9]", formType)
	assert.Equal(t, http.StatusBadRequest, w.Code, "writes too")
	_, ok, err := st.Member(context.Background(), "g", 9)
	require.NoError(t, err)
	assert.False(t, ok, "and nothing was changed")
}
