package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
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

// testStart is when the tests started: every change they make is newer.
var testStart = time.Now()

// changeTime is a change's "time" in the feed's JSON: RFC 3339 in UTC with
// three digits of milliseconds.
var changeTime = regexp.MustCompile(`,"time":"([^"]*)"`)

// untimed checks every change time in the feed's body: of the form the
// feed sends, from the tests' start to now. It returns the body without
// them, to compare with the changes written out.
func untimed(t *testing.T, body string) string {
	t.Helper()
	now := time.Now()
	for _, m := range changeTime.FindAllStringSubmatch(body, -1) {
		at, err := time.Parse(time.RFC3339, m[1])
		if assert.NoError(t, err) {
			assert.Equal(t, at.UTC().Format("2006-01-02T15:04:05.000Z"), m[1], "RFC 3339 in UTC, to the millisecond")
			assert.False(t, at.Before(testStart.Truncate(time.Millisecond)) || at.After(now), "time %s is within the tests' run", m[1])
		}
	}
	return changeTime.ReplaceAllString(body, "")
}

// doWith sends one request to h with the given headers.
func doWith(h http.Handler, method, path string, header map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestWritesCarryXRevision(t *testing.T) {
	h, _ := newTestHandler(t)
	steps := []struct {
		method, body string
		wantCount    string
		wantRevision string
	}{
		{"POST", "users=[1,2]", "2", "1"},
		{"POST", "users=[2]", "0", "1"}, // changes nothing: the group's revision, no new one
		{"POST", `users=[[2,"Bo"]]`, "0", "2"},
		{"DELETE", "users=[9]", "0", "2"},
		{"DELETE", "users=[1]", "1", "3"},
		{"POST", "users=[3]", "1", "4"},
	}
	for _, st := range steps {
		w := do(h, st.method, "/group-user/g", st.body, formType)
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		assert.Equal(t, st.wantCount, w.Body.String(), "%s %s", st.method, st.body)
		assert.Equal(t, st.wantRevision, w.Header().Get("X-Revision"), "%s %s", st.method, st.body)
	}
	w := do(h, "POST", "/group-user/g", "users=[0]", formType)
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Empty(t, w.Header().Get("X-Revision"), "a refused request has no revision")
}

func TestListETagAndIfNoneMatch(t *testing.T) {
	h := httpapi.NewHandler(membership.NewService(memory.NewWith(memory.Options{Epoch: 0x1f}), membership.ServiceOptions{MaxUsers: testMaxUsers}), httpapi.Options{ListCacheBytes: 1 << 20})
	require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", "users=[1,2,3]", formType).Code)
	require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/other", "users=[1]", formType).Code)

	tests := []struct {
		name        string
		method      string
		path        string
		ifNoneMatch string
		wantStatus  int
	}{
		{"no condition", "GET", "/group-user/g", "", 200},
		{"its ETag", "GET", "/group-user/g", `"000000000000001f-1"`, 304},
		{"its ETag, weak", "GET", "/group-user/g", `W/"000000000000001f-1"`, 304},
		{"its ETag in a list", "GET", "/group-user/g", `"000000000000001f-7", "000000000000001f-1"`, 304},
		{"any", "GET", "/group-user/g", `*`, 304},
		{"another ETag", "GET", "/group-user/g", `"000000000000001f-2"`, 200},
		{"unquoted", "GET", "/group-user/g", `000000000000001f-1`, 200},
		{"its revision in another epoch", "GET", "/group-user/g", `"0000000000000020-1"`, 200},
		{"its revision alone", "GET", "/group-user/g", `"1"`, 200},
		{"a page, its ETag", "GET", "/group-user/g?limit=1", `"000000000000001f-1"`, 304},
		{"a page, another ETag", "GET", "/group-user/g?limit=1&after=1", `"000000000000001f-5"`, 200},
		{"HEAD, its ETag", "HEAD", "/group-user/g", `"000000000000001f-1"`, 304},
		{"the other group", "GET", "/group-user/other", `"000000000000001f-2"`, 304},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := map[string]string{}
			if tt.ifNoneMatch != "" {
				header["If-None-Match"] = tt.ifNoneMatch
			}
			w := doWith(h, tt.method, tt.path, header)
			require.Equal(t, tt.wantStatus, w.Code, w.Body.String())
			want := `"000000000000001f-1"`
			if strings.Contains(tt.path, "other") {
				want = `"000000000000001f-2"`
			}
			assert.Equal(t, want, w.Header().Get("ETag"))
			assert.Equal(t, "no-cache", w.Header().Get("Cache-Control"), "a shared cache revalidates with the ETag")
			if tt.wantStatus == http.StatusNotModified {
				assert.Empty(t, w.Body.String())
			}
		})
	}

	// The same ETag twice, from the cache and not: then a change moves it.
	first := do(h, "GET", "/group-user/g", "", "")
	second := do(h, "GET", "/group-user/g", "", "")
	assert.Equal(t, first.Header().Get("ETag"), second.Header().Get("ETag"))
	require.Equal(t, http.StatusOK, do(h, "DELETE", "/group-user/g", "users=[2]", formType).Code)
	w := doWith(h, "GET", "/group-user/g", map[string]string{"If-None-Match": `"000000000000001f-1"`})
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, `"000000000000001f-3"`, w.Header().Get("ETag"))
	assert.JSONEq(t, `[{"uid":1,"nickname":""},{"uid":3,"nickname":""}]`, w.Body.String())
	// A nickname change moves it too, even in a group the user is not in:
	// the store counts it as a change of every group.
	require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/other", `users=[[1,"Al"]]`, formType).Code)
	w = doWith(h, "GET", "/group-user/g", map[string]string{"If-None-Match": `"000000000000001f-3"`})
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, `"000000000000001f-4"`, w.Header().Get("ETag"))
	assert.JSONEq(t, `[{"uid":1,"nickname":"Al"},{"uid":3,"nickname":""}]`, w.Body.String())
}

func TestChangesFeed(t *testing.T) {
	svc := membership.NewService(memory.NewWith(memory.Options{ChangesKeep: 3}), membership.ServiceOptions{MaxUsers: testMaxUsers})
	h := httpapi.NewHandler(svc, httpapi.Options{})
	for _, body := range []string{`users=[2,[1,"Al"]]`, "users=[3]", "users=[1]", "users=[4]"} {
		require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", body, formType).Code)
	}
	require.Equal(t, http.StatusOK, do(h, "DELETE", "/group-user/g", "users=[3,4,9]", formType).Code)
	// Revisions 1 (add 1, 2), 2 (add 3), 3 (add 4), 4 (remove 3, 4); the
	// add of 1 again changed nothing. The feed keeps 2 to 4.

	tests := []struct {
		name         string
		query        string
		wantStatus   int
		wantBody     string // JSON
		wantRevision string
	}{
		{"after the oldest-but-one", "?after=1", 200, `[
			{"rev":2,"op":"add","group":"g","uids":[3]},
			{"rev":3,"op":"add","group":"g","uids":[4]},
			{"rev":4,"op":"remove","group":"g","uids":[3,4]}]`, "4"},
		{"limit", "?after=1&limit=1", 200, `[{"rev":2,"op":"add","group":"g","uids":[3]}]`, "4"},
		{"nothing after the latest", "?after=4", 200, `[]`, "4"},
		{"a wait of 0s does not wait", "?after=4&wait=0s", 200, `[]`, "4"},
		{"no longer kept", "", 410, `{"error":{"code":"changes_gone","message":"the changes after revision 0 are no longer kept; ` +
			`the oldest kept is 2: list the groups again, then follow the feed from the latest revision","oldest_revision":2}}`, "4"},
		{"beyond the latest", "?after=5", 410, `{"error":{"code":"changes_gone","message":"revision 5 is beyond the latest, 4: ` +
			`it comes from another history of the store (was an in-memory service restarted?); list the groups again","oldest_revision":2}}`, "4"},
		{"after not a number", "?after=x", 400, "", ""},
		{"after negative", "?after=-1", 400, "", ""},
		{"after twice", "?after=1&after=2", 400, "", ""},
		{"limit 0", "?after=1&limit=0", 400, "", ""},
		{"limit too large", "?after=1&limit=10001", 400, "", ""},
		{"wait not a duration", "?after=1&wait=30", 400, "", ""},
		{"wait too long", "?after=1&wait=61s", 400, "", ""},
		{"wait negative", "?after=1&wait=-1s", 400, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := do(h, "GET", "/changes"+tt.query, "", "")
			require.Equal(t, tt.wantStatus, w.Code, w.Body.String())
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
			if tt.wantBody != "" {
				assert.JSONEq(t, tt.wantBody, untimed(t, w.Body.String()))
			}
			if tt.wantStatus == http.StatusBadRequest {
				assert.Contains(t, w.Body.String(), `"code":"invalid_query"`)
			}
			assert.Equal(t, tt.wantRevision, w.Header().Get("X-Revision"))
			if tt.wantRevision != "" {
				assert.Equal(t, fmt.Sprintf("%016x", svc.Epoch()), w.Header().Get("X-Epoch"), "a follower tells histories apart by it")
			}
		})
	}

	// Nicknames appear with the add that changed them.
	h, _ = newTestHandler(t)
	require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", `users=[2,[1,"Al"]]`, formType).Code)
	require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/h", `users=[[1,"Bo\n"]]`, formType).Code)
	require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", `users=[[1,"Bo\n"]]`, formType).Code) // changes nothing
	w := do(h, "GET", "/changes", "", "")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, `[{"rev":1,"op":"add","group":"g","uids":[1,2],"nicknames":[{"uid":1,"nickname":"Al"}]},`+
		`{"rev":2,"op":"add","group":"h","uids":[1],"nicknames":[{"uid":1,"nickname":"Bo\n"}]}]`, untimed(t, w.Body.String()))
	var decoded []map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &decoded), "the feed is JSON")
}

// serve runs h on a test server until the test ends.
func serve(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

// getBody is get for goroutines other than the test's: it returns its
// error rather than failing the test from there.
func getBody(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func errText(err error) string {
	if err != nil {
		return " error: " + err.Error()
	}
	return ""
}

// waitInFlight waits until srv answers n requests besides the scrape that
// asks: a long-poll has reached its handler, and waits there.
func waitInFlight(t *testing.T, srv *httptest.Server, n int) {
	t.Helper()
	want := fmt.Sprintf("\nmembership_http_requests_in_flight %d\n", n+1)
	require.Eventually(t, func() bool {
		body, err := getBody(srv.URL + "/metrics")
		return err == nil && strings.Contains(body, want)
	}, 10*time.Second, time.Millisecond, "no request in flight")
}

func TestChangesLongPoll(t *testing.T) {
	stopping := make(chan struct{})
	svc := membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: testMaxUsers})
	srv := serve(t, httpapi.NewHandler(svc, httpapi.Options{Stopping: stopping, Logger: slog.New(slog.DiscardHandler)}))

	t.Run("woken by a write", func(t *testing.T) {
		type reply struct {
			body string
			took time.Duration
		}
		got := make(chan reply, 1)
		start := time.Now()
		go func() {
			body, err := getBody(srv.URL + "/changes?after=0&wait=30s")
			got <- reply{body + errText(err), time.Since(start)}
		}()
		waitInFlight(t, srv, 1)
		select {
		case r := <-got:
			t.Fatalf("the long-poll answered before any change: %s", r.body)
		default:
		}
		_, err := svc.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 7}}})
		require.NoError(t, err)
		r := <-got
		assert.Equal(t, `[{"rev":1,"op":"add","group":"g","uids":[7]}]`, untimed(t, r.body))
		assert.Less(t, r.took, 20*time.Second, "it answered at the write, not at the end of the wait")
	})

	t.Run("an existing change answers at once", func(t *testing.T) {
		_, body := get(t, srv.URL+"/changes?after=0&wait=30s")
		assert.Equal(t, `[{"rev":1,"op":"add","group":"g","uids":[7]}]`, untimed(t, body))
	})

	t.Run("the wait ends empty", func(t *testing.T) {
		resp, body := get(t, srv.URL+"/changes?after=1&wait=50ms")
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, `[]`, body)
		assert.Equal(t, "1", resp.Header.Get("X-Revision"))
	})

	t.Run("a shutdown ends the wait", func(t *testing.T) {
		got := make(chan string, 1)
		go func() {
			body, err := getBody(srv.URL + "/changes?after=1&wait=60s")
			got <- body + errText(err)
		}()
		waitInFlight(t, srv, 1)
		close(stopping)
		select {
		case body := <-got:
			assert.Equal(t, `[]`, body)
		case <-time.After(20 * time.Second):
			t.Fatal("the long-poll outlived the shutdown")
		}
	})
}

// TestChangesFeedWithConcurrentWriters follows the feed over HTTP with
// long-polls while writers POST and DELETE: every acknowledged change comes
// once, in revision order, under the revision its X-Revision gave.
func TestChangesFeedWithConcurrentWriters(t *testing.T) {
	svc := membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: testMaxUsers})
	h := httpapi.NewHandler(svc, httpapi.Options{})
	srv := serve(t, h)

	const writers, perWriter = 4, 100
	acked := make(chan string, writers*perWriter)
	done := make(chan struct{})
	for w := range writers {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range perWriter {
				method := "POST"
				if i%3 == 2 {
					method = "DELETE"
				}
				body := "users=[" + strconv.Itoa(w*1000+i%7+1) + "]"
				rec := do(h, method, "/group-user/g"+strconv.Itoa(i%3), body, formType)
				if !assert.Equal(t, http.StatusOK, rec.Code) {
					return
				}
				if rec.Body.String() != "0" {
					acked <- rec.Header().Get("X-Revision")
				}
			}
		}()
	}

	type change struct {
		Rev int `json:"rev"`
	}
	var seen []change
	var writersDone atomic.Bool
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		after := 0
		for {
			// Read before the poll: an empty poll that began after the
			// writers were done means there is nothing left.
			finished := writersDone.Load()
			body, err := getBody(srv.URL + "/changes?limit=5&wait=300ms&after=" + strconv.Itoa(after))
			if !assert.NoError(t, err) {
				return
			}
			var page []change
			if !assert.NoError(t, json.Unmarshal([]byte(body), &page)) {
				return
			}
			if len(page) == 0 {
				if finished {
					return
				}
				continue
			}
			seen = append(seen, page...)
			after = page[len(page)-1].Rev
		}
	}()
	for range writers {
		<-done
	}
	writersDone.Store(true)
	close(acked)
	<-followed

	want := map[int]bool{}
	for rev := range acked {
		n, err := strconv.Atoi(rev)
		require.NoError(t, err)
		assert.False(t, want[n], "revision %d acknowledged twice", n)
		want[n] = true
	}
	require.Len(t, seen, len(want), "every change once")
	for i, c := range seen {
		assert.Equal(t, i+1, c.Rev, "in revision order, no gaps")
		assert.True(t, want[c.Rev], "revision %d was acknowledged", c.Rev)
	}
}

// TestChangesLongPollsPastMaxWaitersAnswerAtOnce parks -max-waiters polls,
// then asks one more: it is answered at once, with Retry-After, and counted.
func TestChangesLongPollsPastMaxWaitersAnswerAtOnce(t *testing.T) {
	svc := membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: testMaxUsers})
	srv := serve(t, httpapi.NewHandler(svc, httpapi.Options{MaxWaiters: 2, Logger: slog.New(slog.DiscardHandler)}))
	got := make(chan string, 2)
	for range 2 {
		go func() {
			body, err := getBody(srv.URL + "/changes?after=0&wait=60s")
			got <- body + errText(err)
		}()
	}
	waitInFlight(t, srv, 2)
	_, metrics := get(t, srv.URL+"/metrics")
	assert.Contains(t, metrics, "\nmembership_changes_waiters 2\n")
	assert.Contains(t, metrics, "\nmembership_changes_waiters_limit 2\n")

	resp, body := get(t, srv.URL+"/changes?after=0&wait=60s")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, `[]`, body)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	_, metrics = get(t, srv.URL+"/metrics")
	assert.Contains(t, metrics, "\nmembership_changes_waiters_refused_total 1\n")

	_, err := svc.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 7}}})
	require.NoError(t, err)
	for range 2 {
		assert.Equal(t, `[{"rev":1,"op":"add","group":"g","uids":[7]}]`, untimed(t, <-got), "the parked polls are answered at the change")
	}
	_, metrics = get(t, srv.URL+"/metrics")
	assert.Contains(t, metrics, "\nmembership_changes_waiters 0\n", "their places are given back")
	resp, _ = get(t, srv.URL+"/changes?after=1&wait=1ms")
	assert.Empty(t, resp.Header.Get("Retry-After"), "a poll within the limit waits")
}

// Every change of the feed carries its time and, when its request named
// one, its actor: the uid of the body, or of the query of the DELETEs that
// take no body.
func TestChangesCarryTheirActorAndTime(t *testing.T) {
	h, _ := newTestHandler(t)
	steps := []struct {
		method, path, body, contentType string
		wantActor                       int64 // 0: none
	}{
		{"POST", "/group-user/g", "users=[1,2,3]&uid=5", formType, 5},
		{"POST", "/group-user/h", "users=[1]", formType, 0},
		{"PUT", "/group-user/g", `{"users":[1,2,4],"uid":"6"}`, "application/json", 6},
		{"DELETE", "/group-user/g", `{"users":[4],"uid":9223372036854775807}`, "application/json", 9223372036854775807},
		{"DELETE", "/user-group/2?uid=8", "", "", 8},
		{"DELETE", "/groups/g?uid=7", "", "", 7},
		{"DELETE", "/groups/h", "", "", 0},
	}
	for i, s := range steps {
		w := do(h, s.method, s.path, s.body, s.contentType)
		require.Equal(t, http.StatusOK, w.Code, "step %d: %s", i, w.Body.String())
	}
	w := do(h, "GET", "/changes", "", "")
	require.Equal(t, http.StatusOK, w.Code)
	body := w.Body.String()
	var changes []struct {
		Rev   int
		Op    string
		Time  string
		Actor *int64
	}
	require.NoError(t, json.Unmarshal([]byte(body), &changes))
	require.Len(t, changes, len(steps))
	untimed(t, body)
	assert.Len(t, changeTime.FindAllString(body, -1), len(steps), "every change has a time")
	for i, s := range steps {
		if s.wantActor == 0 {
			assert.Nil(t, changes[i].Actor, "step %d names no actor, and its change none", i)
		} else if assert.NotNil(t, changes[i].Actor, "step %d", i) {
			assert.Equal(t, s.wantActor, *changes[i].Actor, "step %d", i)
		}
	}
	assert.Regexp(t, `^\[\{"rev":1,"op":"add","time":"[^"]+","actor":5,"group":"g",`, body, "in the order rev, op, time, actor, group")
}

// The DELETEs without a body take the acting uid in the query, and only it.
func TestActorInTheQuery(t *testing.T) {
	for _, tt := range []struct {
		path     string
		wantCode string
	}{
		{"/groups/g?uid=0", "invalid_uid"},
		{"/groups/g?uid=x", "invalid_uid"},
		{"/groups/g?uid=1&uid=2", "invalid_query"},
		{"/groups/g?uid=1&users=[1]", "invalid_query"},
		{"/user-group/1?uid=-1", "invalid_uid"},
		{"/user-group/1?limit=1", "invalid_query"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			h, _ := newTestHandler(t)
			require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", "users=[1]", formType).Code)
			w := do(h, "DELETE", tt.path, "", "")
			assert.Equal(t, http.StatusBadRequest, w.Code)
			assert.Contains(t, w.Body.String(), `"code":"`+tt.wantCode+`"`)
			assert.Equal(t, 1, len(changeTime.FindAllString(do(h, "GET", "/changes", "", "").Body.String(), -1)), "nothing changed")
		})
	}
}
