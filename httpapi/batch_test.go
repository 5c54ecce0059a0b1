package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
)

// batchCounter is a memory.Store that counts the batches that reach it.
type batchCounter struct {
	*memory.Store
	calls atomic.Int64
}

func (s *batchCounter) Batch(ctx context.Context, b membership.Batch) (membership.BatchResult, error) {
	s.calls.Add(1)
	return s.Store.Batch(ctx, b)
}

// newBatchHandler returns the API over a fresh store that takes at most 3
// changes a batch, and the store.
func newBatchHandler(t *testing.T) (http.Handler, *batchCounter) {
	t.Helper()
	st := &batchCounter{Store: memory.New()}
	svc := membership.NewService(st, membership.ServiceOptions{MaxUsers: testMaxUsers, MaxBatchWrites: 3})
	return httpapi.NewHandler(svc, httpapi.Options{MaxBodyBytes: testMaxBody}), st
}

// send sends method path with body (JSON when it starts with {) and
// headers, to h.
func sendTo(h http.Handler, method, path, body string, header map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	switch {
	case strings.HasPrefix(body, "{"):
		r.Header.Set("Content-Type", jsonType)
	case body != "":
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestBatchAppliesEveryChangeInOneRevision(t *testing.T) {
	h, _ := newBatchHandler(t)
	require.Equal(t, 200, sendTo(h, "POST", "/group-user/from", `users=[1,2,[3,"Cy"]]`, nil).Code)
	w := sendTo(h, "POST", "/batch", `{"changes":[
		{"op":"remove","group":"from","users":[3]},
		{"op":"add","group":"to","users":[3,"4"]},
		{"op":"replace","group":"from","users":[2,5]}],"uid":42}`, nil)
	require.Equal(t, 200, w.Code, w.Body.String())
	assert.JSONEq(t, `{"results":[{"removed":1},{"added":2},{"added":1,"removed":1}]}`, w.Body.String())
	assert.Equal(t, "2", w.Header().Get("X-Revision"))
	w = sendTo(h, "GET", "/group-user/to", "", nil)
	assert.JSONEq(t, `[{"uid":3,"nickname":"Cy"},{"uid":4,"nickname":""}]`, w.Body.String())
	w = sendTo(h, "GET", "/group-user/from", "", nil)
	assert.JSONEq(t, `[{"uid":2,"nickname":""},{"uid":5,"nickname":""}]`, w.Body.String())
	w = sendTo(h, "GET", "/changes?after=1", "", nil)
	var feed []map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &feed))
	require.Len(t, feed, 1)
	assert.NotEmpty(t, feed[0]["time"])
	delete(feed[0], "time")
	got, _ := json.Marshal(feed[0])
	assert.JSONEq(t, `{"rev":2,"op":"batch","actor":42,"changes":[
		{"op":"remove","group":"from","uids":[3]},
		{"op":"add","group":"to","uids":[3,4],"nicknames":[{"uid":3,"nickname":"Cy"}]},
		{"op":"replace","group":"from","uids":[2,5]}]}`, string(got))
	w = sendTo(h, "POST", "/batch", `{"changes":[{"op":"delete_group","group":"from"}]}`, nil)
	require.Equal(t, 200, w.Code, w.Body.String())
	assert.JSONEq(t, `{"results":[{"removed":2}]}`, w.Body.String())
	w = sendTo(h, "POST", "/batch", `{"changes":[]}`, nil)
	require.Equal(t, 200, w.Code, w.Body.String())
	assert.JSONEq(t, `{"results":[]}`, w.Body.String())
}

func TestBatchPreconditions(t *testing.T) {
	h, st := newBatchHandler(t)
	require.Equal(t, 200, sendTo(h, "POST", "/group-user/a", `users=[1]`, nil).Code)
	stale := sendTo(h, "GET", "/group-user/a", "", nil).Header().Get("ETag")
	require.Equal(t, 200, sendTo(h, "POST", "/group-user/a", `users=[2]`, nil).Code)
	quoted := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	tests := []struct {
		name       string
		ifMatch    func(current string) string
		wantStatus int
		reaches    bool
	}{
		{"current", func(current string) string { return current }, 200, true},
		{"stale", func(string) string { return stale }, 412, true},
		{"star", func(string) string { return "*" }, 200, true},
		{"a tag of another epoch", func(string) string { return `"0000000000000000-1"` }, 412, false},
		{"a weak tag", func(current string) string { return "W/" + current }, 412, false},
		{"malformed", func(string) string { return `"unterminated` }, 400, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			current := sendTo(h, "GET", "/group-user/a", "", nil).Header().Get("ETag")
			before := st.calls.Load()
			body := `{"changes":[{"op":"add","group":"b","users":[9]},{"op":"add","group":"a","users":[3],"if_match":` + quoted(tt.ifMatch(current)) + `}]}`
			w := sendTo(h, "POST", "/batch", body, nil)
			assert.Equal(t, tt.wantStatus, w.Code, w.Body.String())
			switch tt.wantStatus {
			case 412:
				assert.Equal(t, current, w.Header().Get("ETag"), "the group's current ETag")
				assert.Contains(t, w.Body.String(), "changes element 1")
				assert.JSONEq(t, `[]`, sendTo(h, "GET", "/group-user/b", "", nil).Body.String(), "nothing applied")
			case 400:
				assert.Contains(t, w.Body.String(), "changes element 1")
			}
			assert.Equal(t, tt.reaches, st.calls.Load() > before, "whether the batch reached the store")
			// Undo, so that each case starts from the same members.
			sendTo(h, "DELETE", "/group-user/a", `users=[3]`, nil)
			sendTo(h, "DELETE", "/groups/b", "", nil)
		})
	}
}

func TestBatchRefusesBadRequestsBeforeTheStore(t *testing.T) {
	h, st := newBatchHandler(t)
	many := `{"changes":[` + strings.Repeat(`{"op":"delete_group","group":"g"},`, 3) + `{"op":"delete_group","group":"g"}]}`
	tooManyUsers := fmt.Sprintf(`{"changes":[{"op":"add","group":"a","users":[%s]},{"op":"add","group":"b","users":[1]}]}`,
		strings.TrimSuffix(strings.Repeat("1,", testMaxUsers), ","))
	tests := []struct {
		name, body, contentType string
		wantStatus              int
		wantCode, wantMessage   string
	}{
		{"not JSON", `changes=1`, "application/x-www-form-urlencoded", 415, "unsupported_media_type", "POST /batch takes"},
		{"not an object", `[1]`, jsonType, 400, "invalid_body", "not a JSON object"},
		{"no changes", `{"uid":1}`, jsonType, 400, "invalid_body", `no "changes"`},
		{"an unknown key", `{"changes":[],"Changes":[]}`, jsonType, 400, "invalid_body", "unknown field"},
		{"a repeated key", `{"changes":[],"changes":[]}`, jsonType, 400, "invalid_body", "twice"},
		{"more JSON after", `{"changes":[]} {}`, jsonType, 400, "invalid_body", "followed by more JSON"},
		{"changes not an array", `{"changes":{}}`, jsonType, 400, "invalid_changes", "not a JSON array"},
		{"a change not an object", `{"changes":[1]}`, jsonType, 400, "invalid_changes", "changes element 0"},
		{"an unknown op", `{"changes":[{"op":"move","group":"g","users":[1]}]}`, jsonType, 400, "invalid_changes", `changes element 0: op "move"`},
		{"remove_user", `{"changes":[{"op":"remove_user","group":"g","users":[1]}]}`, jsonType, 400, "invalid_changes", "changes element 0"},
		{"no op", `{"changes":[{"group":"g","users":[1]}]}`, jsonType, 400, "invalid_changes", "op is missing"},
		{"no group", `{"changes":[{"op":"add","users":[1]}]}`, jsonType, 400, "invalid_changes", "group is missing"},
		{"a bad group", `{"changes":[{"op":"add","group":"ok","users":[1]},{"op":"add","group":"","users":[1]}]}`, jsonType, 400, "invalid_group_id", "changes element 1"},
		{"a lone surrogate in a group", `{"changes":[{"op":"add","group":"\ud800","users":[1]}]}`, jsonType, 400, "invalid_changes", "changes element 0"},
		{"a change key in another case", `{"changes":[{"OP":"add","group":"g","users":[1]}]}`, jsonType, 400, "invalid_changes", "unknown field"},
		{"no users for an add", `{"changes":[{"op":"add","group":"g"}]}`, jsonType, 400, "missing_users", "changes element 0"},
		{"users for a deletion", `{"changes":[{"op":"delete_group","group":"g","users":[1]}]}`, jsonType, 400, "invalid_changes", "takes no users"},
		{"a bad user", `{"changes":[{"op":"add","group":"g","users":[1,0]}]}`, jsonType, 400, "invalid_users", "changes element 0: users element 1"},
		{"a bad acting uid", `{"changes":[],"uid":"x"}`, jsonType, 400, "invalid_uid", `"x"`},
		{"too many changes", many, jsonType, 413, "too_many_changes", "more than 3 changes"},
		{"too many changes, counted before a bad one past the limit is read", `{"changes":[` + strings.Repeat(`{"op":"delete_group","group":"g"},`, 3) + strings.Repeat(`1,`, 300) + `1]}`,
			jsonType, 413, "too_many_changes", "more than 3 changes"},
		{"too many users in all", tooManyUsers, jsonType, 413, "too_many_users", "in all"},
		{"a bad if_match", `{"changes":[{"op":"add","group":"g","users":[1],"if_match":"x"}]}`, jsonType, 400, "invalid_header", "changes element 0"},
		{"if_match not a string", `{"changes":[{"op":"add","group":"g","users":[1],"if_match":7}]}`, jsonType, 400, "invalid_changes", "if_match is not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/batch", strings.NewReader(tt.body))
			r.Header.Set("Content-Type", tt.contentType)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			assert.Equal(t, tt.wantStatus, w.Code, w.Body.String())
			var reply struct {
				Error struct{ Code, Message string }
			}
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &reply), w.Body.String())
			assert.Equal(t, tt.wantCode, reply.Error.Code)
			assert.Contains(t, reply.Error.Message, tt.wantMessage)
		})
	}
	assert.Zero(t, st.calls.Load(), "no bad batch may reach the store")
}

func TestBatchesRacingWithOneETagOneWins(t *testing.T) {
	h, _ := newBatchHandler(t)
	require.Equal(t, 200, sendTo(h, "POST", "/group-user/g", `users=[1]`, nil).Code)
	etag := sendTo(h, "GET", "/group-user/g", "", nil).Header().Get("ETag")
	tag, _ := json.Marshal(etag)
	const writers = 16
	codes := make([]int, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"changes":[{"op":"add","group":"other%d","users":[1]},{"op":"replace","group":"g","users":[%d],"if_match":%s}]}`, i, 100+i, tag)
			codes[i] = sendTo(h, "POST", "/batch", body, nil).Code
		}()
	}
	wg.Wait()
	won := 0
	for _, c := range codes {
		if c == 200 {
			won++
		} else {
			assert.Equal(t, 412, c)
		}
	}
	assert.Equal(t, 1, won)
	var groups []struct{ Group string }
	require.NoError(t, json.Unmarshal(sendTo(h, "GET", "/groups", "", nil).Body.Bytes(), &groups))
	assert.Len(t, groups, 2, "the group and the winner's other group: a losing batch applied nothing")
}
