package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

const jsonType = "application/json"

// checkCounter is a memory.Store that counts the calls of CheckMembers.
type checkCounter struct {
	*memory.Store
	calls atomic.Int64
}

func (s *checkCounter) CheckMembers(ctx context.Context, checks []membership.Check) ([]bool, membership.Revision, error) {
	s.calls.Add(1)
	return s.Store.CheckMembers(ctx, checks)
}

// newCheckHandler returns the API over a fresh store that takes at most 3
// checks a request, and the store.
func newCheckHandler(t *testing.T) (http.Handler, *checkCounter) {
	t.Helper()
	st := &checkCounter{Store: memory.New()}
	svc := membership.NewService(st, membership.ServiceOptions{MaxUsers: testMaxUsers, MaxChecks: 3})
	return httpapi.NewHandler(svc, httpapi.Options{MaxBodyBytes: testMaxBody}), st
}

// postCheck sends POST /check with body, as JSON, and the headers given.
func postCheck(h http.Handler, body string, header map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "/check", strings.NewReader(body))
	r.Header.Set("Content-Type", jsonType)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestCheckAnswersEachPairInOrderAtOneRevision(t *testing.T) {
	h, _ := newCheckHandler(t)
	require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/admins", "users=[1,3,9223372036854775807]", formType).Code)
	require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/a%2Fb", "users=[2]", formType).Code)
	tests := []struct {
		name, body, contentType, want string
	}{
		{"members and not", `{"checks":[{"group":"admins","uid":1},{"group":"admins","uid":2},{"group":"a/b","uid":2}]}`, jsonType,
			`{"results":[true,false,true]}`},
		{"uids as strings, keys in any order, spaces", " {\n\"checks\" : [ {\"uid\":\"3\", \"group\":\"admins\"} ,{\"group\":\"admins\",\"uid\":9223372036854775807} ] } ", jsonType,
			`{"results":[true,true]}`},
		{"an escaped group id, an unknown group, a repeat", `{"checks":[{"group":"a\/b","uid":2},{"group":"nobody","uid":1},{"group":"a\u002fb","uid":2}]}`, jsonType,
			`{"results":[true,false,true]}`},
		{"no checks", `{"checks":[]}`, jsonType, `{"results":[]}`},
		{"a charset", `{"checks":[{"group":"admins","uid":1}]}`, "application/json; charset=utf-8", `{"results":[true]}`},
		{"no Content-Type", `{"checks":[{"group":"admins","uid":1}]}`, "", `{"results":[true]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := do(h, "POST", "/check", tt.body, tt.contentType)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			assert.JSONEq(t, tt.want, w.Body.String())
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
			assert.Equal(t, "no-store", w.Header().Get("Cache-Control"))
			assert.Equal(t, latestRevision(t, h), w.Header().Get("X-Revision"))
		})
	}
}

func TestCheckRefusesBadRequestsBeforeTheStore(t *testing.T) {
	check := func(group, uid string) string { return `{"group":` + group + `,"uid":` + uid + `}` }
	ok := check(`"g"`, "1")
	body := func(checks ...string) string { return `{"checks":[` + strings.Join(checks, ",") + `]}` }
	tests := []struct {
		name        string
		body        string
		contentType string
		header      map[string]string
		wantStatus  int
		wantCode    string
		wantMessage string // a part of it
	}{
		{"empty body", "", jsonType, nil, 400, "invalid_body", "not a JSON object"},
		{"an array", `[]`, jsonType, nil, 400, "invalid_body", "not a JSON object"},
		{"no checks", `{}`, jsonType, nil, 400, "invalid_body", `no "checks"`},
		{"unknown key", `{"checks":[],"uid":1}`, jsonType, nil, 400, "invalid_body", `unknown field "uid"`},
		{"a key in another case", `{"CHECKS":[]}`, jsonType, nil, 400, "invalid_body", `unknown field "CHECKS"`},
		{"a key that folds to checks", `{"checkſ":[]}`, jsonType, nil, 400, "invalid_body", "unknown field"},
		{"checks twice", `{"checks":[],"checks":[]}`, jsonType, nil, 400, "invalid_body", "given twice"},
		{"two values", `{"checks":[]} {}`, jsonType, nil, 400, "invalid_body", "more than one JSON value"},
		{"the object not closed", `{"checks":[]`, jsonType, nil, 400, "invalid_body", "not valid JSON"},
		{"a trailing comma", `{"checks":[],}`, jsonType, nil, 400, "invalid_body", "want a quoted key"},
		{"checks not an array", `{"checks":{}}`, jsonType, nil, 400, "invalid_checks", "checks is not a JSON array"},
		{"checks null", `{"checks":null}`, jsonType, nil, 400, "invalid_checks", "checks is not a JSON array"},
		{"the array not closed", `{"checks":[` + ok, jsonType, nil, 400, "invalid_checks", "the array is not closed"},
		{"an element not an object", body(ok, `1`), jsonType, nil, 400, "invalid_checks", "checks element 1: got a number"},
		{"no uid", body(ok, `{"group":"g"}`), jsonType, nil, 400, "invalid_checks", `checks element 1: the object has no "uid"`},
		{"no group", body(ok, `{"uid":1}`), jsonType, nil, 400, "invalid_checks", `checks element 1: the object has no "group"`},
		{"an unknown key", body(ok, `{"group":"g","uid":1,"nickname":"x"}`), jsonType, nil, 400, "invalid_checks", `checks element 1: unknown key "nickname"`},
		{"a key in another case", body(`{"Group":"g","uid":1}`), jsonType, nil, 400, "invalid_checks", `checks element 0: unknown key "Group"`},
		{"a key twice", body(ok, `{"group":"g","uid":1,"uid":2}`), jsonType, nil, 400, "invalid_checks", `checks element 1: the key "uid" appears twice`},
		{"uid 0", body(ok, check(`"g"`, "0")), jsonType, nil, 400, "invalid_checks", "checks element 1: uid 0 is not"},
		{"uid 1.5", body(ok, check(`"g"`, "1.5")), jsonType, nil, 400, "invalid_checks", "checks element 1: uid 1.5 is not"},
		{"uid 1e3", body(ok, check(`"g"`, "1e3")), jsonType, nil, 400, "invalid_checks", "checks element 1: uid 1e3 is not"},
		{"uid -3", body(ok, check(`"g"`, "-3")), jsonType, nil, 400, "invalid_checks", "checks element 1: uid -3 is not"},
		{"uid 07 as a string", body(ok, check(`"g"`, `"07"`)), jsonType, nil, 400, "invalid_checks", `checks element 1: uid "07" is not`},
		{"uid past the largest", body(ok, check(`"g"`, "9223372036854775808")), jsonType, nil, 400, "invalid_checks", "checks element 1: uid 9223372036854775808"},
		{"uid true", body(ok, check(`"g"`, "true")), jsonType, nil, 400, "invalid_checks", "checks element 1: got true"},
		{"uid null", body(ok, check(`"g"`, "null")), jsonType, nil, 400, "invalid_checks", "checks element 1: got null"},
		{"group a number", body(ok, check(`1`, "1")), jsonType, nil, 400, "invalid_checks", "checks element 1: got a number, want a string group id"},
		{"group empty", body(ok, check(`""`, "1")), jsonType, nil, 400, "invalid_checks", "checks element 1: group id is empty"},
		{"group with a control character", body(ok, check(`"a\u0000"`, "1")), jsonType, nil, 400, "invalid_checks", "checks element 1: group id has control character U+0000"},
		{"group too long", body(check(`"`+strings.Repeat("g", membership.MaxGroupIDBytes+1)+`"`, "1")), jsonType, nil, 400, "invalid_checks", "checks element 0: group id is 257 bytes"},
		{"group not UTF-8", body(ok, check("\"a\xff\"", "1")), jsonType, nil, 400, "invalid_checks", "checks element 1: a string is not valid UTF-8"},
		{"group with a lone surrogate", body(ok, check(`"a\ud800"`, "1")), jsonType, nil, 400, "invalid_checks", "checks element 1: a string is not valid UTF-8"},
		{"too many checks", body(ok, ok, ok, ok), jsonType, nil, 413, "too_many_checks", "checks has more than 3 elements"},
		{"body too large", body(check(`"`+strings.Repeat("g", testMaxBody)+`"`, "1")), jsonType, nil, 413, "body_too_large", "larger than"},
		{"a form", "checks=[]", formType, nil, 415, "unsupported_media_type", "POST /check takes application/json"},
		{"text", body(ok), "text/plain", nil, 415, "unsupported_media_type", ""},
		{"a bad X-Min-Revision", body(ok), jsonType, map[string]string{"X-Min-Revision": "0"}, 400, "invalid_header", "X-Min-Revision"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, st := newCheckHandler(t)
			r := httptest.NewRequest("POST", "/check", strings.NewReader(tt.body))
			r.Header.Set("Content-Type", tt.contentType)
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			assert.Equal(t, tt.wantStatus, w.Code, w.Body.String())
			code, message := errorOf(w)
			assert.Equal(t, tt.wantCode, code)
			assert.Contains(t, message, tt.wantMessage)
			assert.Empty(t, w.Header().Get("X-Revision"))
			assert.Zero(t, st.calls.Load(), "a bad request must not reach the store")
		})
	}

	t.Run("a query", func(t *testing.T) {
		h, st := newCheckHandler(t)
		w := do(h, "POST", "/check?x=1", body(ok), jsonType)
		assert.Equal(t, http.StatusBadRequest, w.Code)
		assert.Equal(t, "invalid_query", errorCode(t, w))
		assert.Zero(t, st.calls.Load())
	})
	t.Run("another method", func(t *testing.T) {
		h, st := newCheckHandler(t)
		w := do(h, "GET", "/check", "", "")
		assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
		assert.Equal(t, "POST", w.Header().Get("Allow"))
		assert.Equal(t, "method_not_allowed", errorCode(t, w))
		assert.Zero(t, st.calls.Load())
	})
	t.Run("a store fault", func(t *testing.T) {
		h := httpapi.NewHandler(membership.NewService(faultyStore{err: fmt.Errorf("disk on fire")}, membership.ServiceOptions{}), httpapi.Options{})
		w := do(h, "POST", "/check", body(ok), jsonType)
		assert.Equal(t, http.StatusInternalServerError, w.Code)
		assert.JSONEq(t, `{"error":{"code":"internal","message":"internal error"}}`, w.Body.String())
	})
}

func TestCheckWithMinRevision(t *testing.T) {
	const checks = `{"checks":[{"group":"g","uid":1},{"group":"g","uid":2}]}`
	st := &waitCounter{Store: memory.New(), waiting: make(chan struct{}, 100)}
	h := httpapi.NewHandler(membership.NewService(st, membership.ServiceOptions{MaxUsers: testMaxUsers}), httpapi.Options{MinRevisionWait: time.Hour})
	require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", "users=[1]", formType).Code)

	w := postCheck(h, checks, map[string]string{"X-Min-Revision": "1"})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.JSONEq(t, `{"results":[true,false]}`, w.Body.String())
	assert.Equal(t, "1", w.Header().Get("X-Revision"))

	got := make(chan *httptest.ResponseRecorder, 1)
	go func() { got <- postCheck(h, checks, map[string]string{"X-Min-Revision": "2"}) }()
	<-st.waiting // the check waits on the feed: it did not read before the write
	require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", "users=[2]", formType).Code)
	w = <-got
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.JSONEq(t, `{"results":[true,true]}`, w.Body.String())
	assert.Equal(t, "2", w.Header().Get("X-Revision"))

	t.Run("a revision that does not come is 503 once the wait is over", func(t *testing.T) {
		h := httpapi.NewHandler(membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: testMaxUsers}), httpapi.Options{MinRevisionWait: time.Millisecond})
		w := postCheck(h, checks, map[string]string{"X-Min-Revision": "5"})
		assert.Equal(t, http.StatusServiceUnavailable, w.Code)
		assert.Equal(t, "unavailable", errorCode(t, w))
		assert.Equal(t, "1", w.Header().Get("Retry-After"))
	})
}

func TestCheckWithAuth(t *testing.T) {
	const token = "s3cret"
	const checks = `{"checks":[{"group":"g","uid":1}]}`
	for _, authReads := range []bool{false, true} {
		t.Run(fmt.Sprintf("auth-reads=%v", authReads), func(t *testing.T) {
			h := httpapi.NewHandler(membership.NewService(memory.New(), membership.ServiceOptions{}), httpapi.Options{Access: httpapi.TokenOnly(token), AuthReads: authReads})
			w := postCheck(h, checks, nil)
			if authReads {
				assert.Equal(t, http.StatusUnauthorized, w.Code)
				assert.Equal(t, "unauthorized", errorCode(t, w))
			} else {
				assert.Equal(t, http.StatusOK, w.Code, "a read, though a POST: no token needed")
			}
			w = postCheck(h, checks, map[string]string{"Authorization": "Bearer " + token})
			assert.Equal(t, http.StatusOK, w.Code)
			assert.JSONEq(t, `{"results":[false]}`, w.Body.String())
			w = postCheck(h, checks, map[string]string{"Authorization": "Bearer wrong"})
			if authReads {
				assert.Equal(t, http.StatusUnauthorized, w.Code)
			}
		})
	}
}

// TestCheckAnswersAreOfOneRevision has writers move users between two groups
// while /check asks about every user in both: each reply must be what the
// feed, replayed up to its X-Revision, says. A user read in both groups or
// in neither at a revision where the feed has them in one is a reply of
// mixed revisions.
func TestCheckAnswersAreOfOneRevision(t *testing.T) {
	const writers, perWriter, rounds = 4, 10, 10
	st := memory.New()
	svc := membership.NewService(st, membership.ServiceOptions{MaxChecks: 2 * writers * perWriter})
	h := httpapi.NewHandler(svc, httpapi.Options{})
	checks := storetest.MovingChecks(writers * perWriter)
	var elems []string
	for _, c := range checks {
		elems = append(elems, fmt.Sprintf(`{"group":%q,"uid":%d}`, c.GroupID, c.UID))
	}
	body := `{"checks":[` + strings.Join(elems, ",") + `]}`

	move := func(uid membership.UID, from, to string) error {
		users := fmt.Sprintf("users=[%d]", uid)
		if from != "" {
			if r := do(h, "DELETE", "/group-user/"+from, users, formType); r.Code != http.StatusOK {
				return fmt.Errorf("DELETE: %d %s", r.Code, r.Body)
			}
		}
		if r := do(h, "POST", "/group-user/"+to, users, formType); r.Code != http.StatusOK {
			return fmt.Errorf("POST: %d %s", r.Code, r.Body)
		}
		return nil
	}
	check := func() (storetest.CheckObservation, error) {
		r := postCheck(h, body, nil)
		if r.Code != http.StatusOK {
			return storetest.CheckObservation{}, fmt.Errorf("/check: %d %s", r.Code, r.Body)
		}
		var reply struct{ Results []bool }
		rev, err := strconv.ParseUint(r.Header().Get("X-Revision"), 10, 64)
		if err == nil {
			err = json.Unmarshal(r.Body.Bytes(), &reply)
		}
		return storetest.CheckObservation{Checks: checks, Found: reply.Results, Revision: membership.Revision(rev)}, err
	}
	observations, errs := storetest.CheckWhileMoving(writers, perWriter, rounds, move, check)
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NotEmpty(t, observations)
	changes, _, err := st.Changes(context.Background(), membership.ChangeOptions{})
	require.NoError(t, err)
	require.Equal(t, membership.Revision(1), changes[0].Revision, "the test needs the whole feed")
	storetest.CheckAgainstFeed(t, changes, observations)
}
