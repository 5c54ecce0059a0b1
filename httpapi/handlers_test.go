package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/internal/accesslog"
	"example.com/groupmembership/internal/logtest"
	"example.com/groupmembership/internal/metrics/metricstest"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/directory"
)

const (
	testMaxBody  = 1024
	testMaxUsers = 5
	formType     = "application/x-www-form-urlencoded"
)

// newTestHandler returns the API over a fresh in-memory store, and the buffer
// its log goes to.
func newTestHandler(t *testing.T) (http.Handler, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	svc := membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: testMaxUsers})
	h := httpapi.NewHandler(svc, httpapi.Options{
		Logger:         slog.New(slog.NewJSONHandler(logs, nil)),
		AccessLog:      true,
		MaxBodyBytes:   testMaxBody,
		ListCacheBytes: 1 << 20, // every test reads through the cache
	})
	return h, logs
}

// do sends one request to h. contentType "" sends no Content-Type header.
func do(h http.Handler, method, path, body, contentType string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestAddAcceptsEveryElementForm(t *testing.T) {
	tests := []struct {
		name      string
		users     string
		wantCount string
		wantList  string
	}{
		{"bare integer", `[7]`, `1`, `[{"uid":7,"nickname":""}]`},
		{"numeric string", `["7"]`, `1`, `[{"uid":7,"nickname":""}]`},
		{"one-item list", `[[7]]`, `1`, `[{"uid":7,"nickname":""}]`},
		{"pair", `[[7,"Alice"]]`, `1`, `[{"uid":7,"nickname":"Alice"}]`},
		{"object", `[{"uid":7,"nickname":"Alice"}]`, `1`, `[{"uid":7,"nickname":"Alice"}]`},
		{"object without nickname", `[{"uid":7}]`, `1`, `[{"uid":7,"nickname":""}]`},
		{"mixed, listed in uid order", `[5,"3",[4],[2,"Bo"],{"uid":1,"nickname":"Al"}]`, `5`,
			`[{"uid":1,"nickname":"Al"},{"uid":2,"nickname":"Bo"},{"uid":3,"nickname":""},{"uid":4,"nickname":""},{"uid":5,"nickname":""}]`},
		{"largest uid stays exact", `[9223372036854775807]`, `1`, `[{"uid":9223372036854775807,"nickname":""}]`},
		{"empty array adds nothing", `[]`, `0`, `[]`},
		{"repeats in one request count once, last nickname wins", `[[7,"a"],[7,"b"],7]`, `1`, `[{"uid":7,"nickname":"b"}]`},
		{"nickname with HTML and line separators", `[[7,"<b>&\u2028"]]`, `1`, `[{"uid":7,"nickname":"<b>&\u2028"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newTestHandler(t)
			w := do(h, http.MethodPost, "/group-user/g", "users="+urlEncode(tt.users), formType)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
			assert.Equal(t, tt.wantCount, w.Body.String())

			w = do(h, http.MethodGet, "/group-user/g", "", "")
			require.Equal(t, http.StatusOK, w.Code)
			assert.JSONEq(t, tt.wantList, w.Body.String())
		})
	}
}

func TestChangeAndList(t *testing.T) {
	type step struct {
		method, path, body, contentType string
		wantStatus                      int
		wantBody                        string // compared as JSON
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"an unknown group lists empty", []step{
			{"GET", "/group-user/nobody", "", "", 200, `[]`},
		}},
		{"add without a Content-Type header", []step{
			{"POST", "/group-user/g", "users=[1,2]", "", 200, `2`},
			{"GET", "/group-user/g", "", "", 200, `[{"uid":1,"nickname":""},{"uid":2,"nickname":""}]`},
		}},
		{"add with a charset parameter", []step{
			{"POST", "/group-user/g", "users=[1]", formType + "; charset=utf-8", 200, `1`},
		}},
		{"members already in the group count 0", []step{
			{"POST", "/group-user/g", "users=[1,2]", formType, 200, `2`},
			{"POST", "/group-user/g", "users=[2,3]", formType, 200, `1`},
			{"POST", "/group-user/g", "users=[1,2,3]", formType, 200, `0`},
		}},
		{"a nickname given later replaces the earlier one, also with count 0", []step{
			{"POST", "/group-user/g", `users=[[1,"Ann"]]`, formType, 200, `1`},
			{"POST", "/group-user/g", `users=[[1,"Anna"]]`, formType, 200, `0`},
			{"POST", "/group-user/g", `users=[1]`, formType, 200, `0`},
			{"GET", "/group-user/g", "", "", 200, `[{"uid":1,"nickname":"Anna"}]`},
		}},
		{"a nickname is the user's, in every group", []step{
			{"POST", "/group-user/a", `users=[[1,"Ann"]]`, formType, 200, `1`},
			{"POST", "/group-user/b", `users=[1]`, formType, 200, `1`},
			{"GET", "/group-user/b", "", "", 200, `[{"uid":1,"nickname":"Ann"}]`},
		}},
		{"a cached list follows every change, also one made through another group", []step{
			{"POST", "/group-user/g", `users=[[1,"Ann"],2]`, formType, 200, `2`},
			{"GET", "/group-user/g", "", "", 200, `[{"uid":1,"nickname":"Ann"},{"uid":2,"nickname":""}]`},
			{"GET", "/group-user/g", "", "", 200, `[{"uid":1,"nickname":"Ann"},{"uid":2,"nickname":""}]`},
			{"POST", "/group-user/other", `users=[[2,"Bo"]]`, formType, 200, `1`},
			{"GET", "/group-user/g", "", "", 200, `[{"uid":1,"nickname":"Ann"},{"uid":2,"nickname":"Bo"}]`},
			{"DELETE", "/group-user/g", `users=[1,2]`, formType, 200, `2`},
			{"GET", "/group-user/g", "", "", 200, `[]`},
			{"POST", "/group-user/g", `users=[3]`, formType, 200, `1`},
			{"GET", "/group-user/g", "", "", 200, `[{"uid":3,"nickname":""}]`},
		}},
		{"remove reads the DELETE body and counts only members", []step{
			{"POST", "/group-user/g", "users=[1,2,3]", formType, 200, `3`},
			{"DELETE", "/group-user/g", "users=[1,3,4,3]", formType, 200, `2`},
			{"GET", "/group-user/g", "", "", 200, `[{"uid":2,"nickname":""}]`},
		}},
		{"remove accepts every element form and ignores nicknames", []step{
			{"POST", "/group-user/g", `users=[[1,"a"],2,3,4,5]`, formType, 200, `5`},
			{"POST", "/group-user/h", `users=[1,4,5]`, formType, 200, `3`}, // keeps them known
			{"DELETE", "/group-user/g", `users=[1,"2",[3],[4,"x"],{"uid":5,"nickname":"y"}]`, "", 200, `5`},
			{"GET", "/group-user/g", "", "", 200, `[]`},
			{"GET", "/group-user/h", "", "", 200, `[{"uid":1,"nickname":"a"},{"uid":4,"nickname":""},{"uid":5,"nickname":""}]`},
		}},
		{"a user in no group is forgotten, nickname included", []step{
			{"POST", "/group-user/g", `users=[[1,"a"],2]`, formType, 200, `2`},
			{"DELETE", "/group-user/g", `users=[1]`, formType, 200, `1`},
			{"POST", "/group-user/h", `users=[1]`, formType, 200, `1`},
			{"GET", "/group-user/h", "", "", 200, `[{"uid":1,"nickname":""}]`},
			{"GET", "/changes?after=2", "", "", 200, `[{"rev":3,"op":"add","group":"h","uids":[1]}]`},
			{"GET", "/changes?after=1&limit=1", "", "", 200, `[{"rev":2,"op":"remove","group":"g","uids":[1],"nicknames":[{"uid":1,"nickname":""}]}]`},
		}},
		{"remove touches only its own group", []step{
			{"POST", "/group-user/a", "users=[1]", formType, 200, `1`},
			{"POST", "/group-user/b", "users=[1]", formType, 200, `1`},
			{"DELETE", "/group-user/a", "users=[1]", formType, 200, `1`},
			{"GET", "/group-user/a", "", "", 200, `[]`},
			{"GET", "/group-user/b", "", "", 200, `[{"uid":1,"nickname":""}]`},
		}},
		{"remove from an unknown group counts 0", []step{
			{"DELETE", "/group-user/nobody", "users=[1]", formType, 200, `0`},
		}},
		{"the acting uid changes nothing", []step{
			{"POST", "/group-user/g", "users=[1]&uid=99", formType, 200, `1`},
			{"DELETE", "/group-user/g", "users=[2]&uid=99", formType, 200, `0`},
			{"GET", "/group-user/g", "", "", 200, `[{"uid":1,"nickname":""}]`},
		}},
		{"an escaped slash is part of one group id", []step{
			{"POST", "/group-user/team%2Fa", "users=[1]", formType, 200, `1`},
			{"GET", "/group-user/team%2Fa", "", "", 200, `[{"uid":1,"nickname":""}]`},
			{"GET", "/group-user/team", "", "", 200, `[]`},
		}},
		{"unicode group ids", []step{
			{"POST", "/group-user/%C3%A9quipe", "users=[1]", formType, 200, `1`},
			{"GET", "/group-user/%C3%A9quipe", "", "", 200, `[{"uid":1,"nickname":""}]`},
		}},
		{"exactly max-users users", []step{
			{"POST", "/group-user/g", "users=[1,2,3,4,5]", formType, 200, `5`},
		}},
		{"health", []step{
			{"GET", "/healthz", "", "", 200, `{"status":"ok"}`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newTestHandler(t)
			for i, s := range tt.steps {
				w := do(h, s.method, s.path, s.body, s.contentType)
				require.Equal(t, s.wantStatus, w.Code, "step %d: %s %s: %s", i, s.method, s.path, w.Body.String())
				assert.Equal(t, "application/json", w.Header().Get("Content-Type"), "step %d", i)
				assert.JSONEq(t, s.wantBody, untimed(t, w.Body.String()), "step %d", i)
			}
		})
	}
}

func TestJSONBodies(t *testing.T) {
	const jsonType = "application/json"
	h, logs := newTestHandler(t)
	w := do(h, "POST", "/group-user/g", `{"users":[1,"2",[3],[4,"Dee & co"],{"uid":5,"nickname":"E"}],"uid":42}`, jsonType)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, "5", w.Body.String())
	w = do(h, "POST", "/group-user/g", `{"uid":"43","users":[1,6]}`, jsonType+"; charset=utf-8")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, "1", w.Body.String())
	w = do(h, "DELETE", "/group-user/g", `{"users":[{"uid":1},2,99]}`, jsonType)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, "2", w.Body.String())
	w = do(h, "POST", "/group-user/g", `{"users":[]}`, jsonType)
	assert.Equal(t, "0", w.Body.String())
	assert.Equal(t,
		`[{"uid":3,"nickname":""},{"uid":4,"nickname":"Dee & co"},{"uid":5,"nickname":"E"},{"uid":6,"nickname":""}]`,
		do(h, "GET", "/group-user/g", "", "").Body.String())
	assert.Contains(t, logs.String(), `"uid":42`, "the acting uid of a JSON body is logged")
	assert.Contains(t, logs.String(), `"uid":43`)
}

func TestListIsStrictJSONInUIDOrder(t *testing.T) {
	h, _ := newTestHandler(t)
	do(h, "POST", "/group-user/g", `users=[30,9223372036854775807,[2,"Zoë \"Z\""]]`, formType)
	do(h, "POST", "/group-user/g", `users=[1,20]`, formType)
	w := do(h, "GET", "/group-user/g", "", "")
	require.Equal(t, http.StatusOK, w.Code)

	var got []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got), "the list must be strict JSON")
	var uids []string
	for _, rec := range got {
		assert.Len(t, rec, 2, "each record has exactly uid and nickname")
		uids = append(uids, string(rec["uid"]))
	}
	assert.Equal(t, []string{"1", "2", "20", "30", "9223372036854775807"}, uids)
	assert.JSONEq(t, `"Zoë \"Z\""`, string(got[1]["nickname"]))
}

func TestHeadListsNothingButHeaders(t *testing.T) {
	h, _ := newTestHandler(t)
	do(h, "POST", "/group-user/g", "users=[1]", formType)
	get := do(h, "GET", "/group-user/g", "", "")
	head := do(h, "HEAD", "/group-user/g", "", "")
	assert.Equal(t, http.StatusOK, head.Code)
	assert.Equal(t, "application/json", head.Header().Get("Content-Type"))
	assert.Equal(t, get.Header().Get("Content-Length"), head.Header().Get("Content-Length"))
}

func TestBadInputChangesNothing(t *testing.T) {
	long := strings.Repeat("a", 257)
	tests := []struct {
		name        string
		method      string
		path        string
		body        string
		contentType string
		wantStatus  int
		wantCode    string
		wantMsg     string // part of the message
	}{
		{"missing users", "POST", "/group-user/g", "uid=1", formType, 400, "missing_users", "users parameter is missing"},
		{"missing users on remove", "DELETE", "/group-user/g", "", formType, 400, "missing_users", "missing"},
		{"empty users", "POST", "/group-user/g", "users=", formType, 400, "missing_users", "missing or empty"},
		{"users in the query string only", "POST", "/group-user/g?users=[1]", "", formType, 400, "invalid_query", "it belongs in the body"},
		{"malformed JSON", "POST", "/group-user/g", "users=[1,", formType, 400, "invalid_users", "not valid JSON"},
		{"not an array", "POST", "/group-user/g", `users={"uid":1}`, formType, 400, "invalid_users", "not a JSON array"},
		{"a later element is wrong", "POST", "/group-user/g", `users=[[1,"Evil"],3,true]`, formType, 400, "invalid_users", "element 2: got true"},
		{"fraction uid", "POST", "/group-user/g", "users=[3,1.5]", formType, 400, "invalid_users", "element 1: uid 1.5 is not an integer"},
		{"exponent uid", "POST", "/group-user/g", "users=[1e3]", formType, 400, "invalid_users", "uid 1e3"},
		{"negative uid", "POST", "/group-user/g", "users=[-3]", formType, 400, "invalid_users", "uid -3"},
		{"zero uid", "POST", "/group-user/g", "users=[0]", formType, 400, "invalid_users", "uid 0"},
		{"overflowing uid", "POST", "/group-user/g", "users=[9223372036854775808]", formType, 400, "invalid_users", "9223372036854775808"},
		{"null element", "POST", "/group-user/g", "users=[null]", formType, 400, "invalid_users", "got null"},
		{"empty list element", "POST", "/group-user/g", "users=[[]]", formType, 400, "invalid_users", "the list is empty"},
		{"nickname not a string", "POST", "/group-user/g", "users=[[1,2]]", formType, 400, "invalid_users", "want a string nickname"},
		{"nickname too long", "POST", "/group-user/g", `users=[[1,"` + long + `"]]`, formType, 400, "invalid_users", "users element 0: the nickname is 257 bytes, longer than 256"},
		{"nickname not UTF-8", "POST", "/group-user/g", `users=[[1,"%FF"]]`, formType, 400, "invalid_users", "not valid UTF-8"},
		{"bad element on remove", "DELETE", "/group-user/g", "users=[1,x]", formType, 400, "invalid_users", "not valid JSON"},
		{"group id too long", "POST", "/group-user/" + long, "users=[5]", formType, 400, "invalid_group_id", "longer than 256"},
		{"group id with a control character", "POST", "/group-user/a%00b", "users=[5]", formType, 400, "invalid_group_id", "control character"},
		{"group id not UTF-8", "POST", "/group-user/%FF", "users=[5]", formType, 400, "invalid_group_id", "not valid UTF-8"},
		{"list with a bad group id", "GET", "/group-user/a%0Ab", "", "", 400, "invalid_group_id", "control character"},
		{"bad acting uid", "POST", "/group-user/g", "users=[5]&uid=abc", formType, 400, "invalid_uid", `"abc"`},
		{"empty acting uid", "POST", "/group-user/g", "users=[5]&uid=", formType, 400, "invalid_uid", "uid parameter"},
		{"acting uid without =", "DELETE", "/group-user/g", "users=[5]&uid", formType, 400, "invalid_uid", "uid parameter"},
		{"bad form encoding", "POST", "/group-user/g", "users=[5]%zz", formType, 400, "invalid_body", "not form-encoded"},
		{"users given twice", "POST", "/group-user/g", "users=[5]&users=[6]", formType, 400, "invalid_body", "users is given 2 times"},
		{"uid given twice", "DELETE", "/group-user/g", "users=[1]&uid=1&uid=2", formType, 400, "invalid_body", "uid is given 2 times"},
		{"too many users", "POST", "/group-user/g", "users=[1,2,3,4,5,6]", formType, 413, "too_many_users", "more than 5"},
		{"body too large", "POST", "/group-user/g", "users=[" + strings.Repeat("1,", testMaxBody/2) + "1]", formType, 413, "body_too_large", "larger than 1024 bytes"},
		{"form: an unknown key", "POST", "/group-user/g", "users=[9]&nickname=Bob&uid=7", formType, 400, "invalid_body", `unknown parameter "nickname": the body takes only users and uid`},
		{"form: a misspelt users", "PUT", "/group-user/g", "users=[9]&uids=7", formType, 400, "invalid_body", `unknown parameter "uids"`},
		{"form: an empty key", "DELETE", "/group-user/g", "users=[1]&=x", formType, 400, "invalid_body", `unknown parameter ""`},
		{"text body", "POST", "/group-user/g", `users=[5]`, "text/plain", 415, "unsupported_media_type", "text/plain"},
		{"JSON: unknown field", "POST", "/group-user/g", `{"users":[5],"group":"x"}`, "application/json", 400, "invalid_body", `unknown field "group"`},
		{"JSON: malformed", "POST", "/group-user/g", `{"users":[5]`, "application/json", 400, "invalid_body", "not a JSON object"},
		{"JSON: not an object", "POST", "/group-user/g", `[5]`, "application/json", 400, "invalid_body", `such as {"users":[1,2]}`},
		{"JSON: an array of users", "POST", "/group-user/g", `[{"users":[5]}]`, "application/json", 400, "invalid_body", "not a JSON object: send an object"},
		{"JSON: a key in another case", "POST", "/group-user/g", `{"USERS":[9]}`, "application/json", 400, "invalid_body", `unknown field "USERS"`},
		{"JSON: a key that folds to users", "POST", "/group-user/g", `{"users":[20],"uſers":[5]}`, "application/json", 400, "invalid_body", `unknown field "uſers"`},
		{"JSON: a repeated key", "POST", "/group-user/g", `{"users":[1],"users":[2]}`, "application/json", 400, "invalid_body", `the key "users" is given twice`},
		{"JSON: a repeated uid", "POST", "/group-user/g", `{"users":[1],"uid":1,"uid":2}`, "application/json", 400, "invalid_body", `the key "uid" is given twice`},
		{"JSON: a repeated null", "POST", "/group-user/g", `{"users":null,"users":[2]}`, "application/json", 400, "invalid_body", `given twice`},
		{"JSON: two values", "POST", "/group-user/g", `{"users":[5]} {}`, "application/json", 400, "invalid_body", "more than one JSON value"},
		{"JSON: missing users", "POST", "/group-user/g", `{"uid":1}`, "application/json", 400, "missing_users", "missing"},
		{"JSON: null users", "DELETE", "/group-user/g", `{"users":null}`, "application/json", 400, "missing_users", "missing"},
		{"JSON: users not an array", "POST", "/group-user/g", `{"users":"[5]"}`, "application/json", 400, "invalid_users", "not a JSON array"},
		{"JSON: bad element", "POST", "/group-user/g", `{"users":[5,1.5]}`, "application/json", 400, "invalid_users", "element 1: uid 1.5"},
		{"JSON: too many users", "POST", "/group-user/g", `{"users":[1,2,3,4,5,6]}`, "application/json", 413, "too_many_users", "more than 5"},
		{"JSON: bad uid", "POST", "/group-user/g", `{"users":[5],"uid":1.5}`, "application/json", 400, "invalid_uid", `"1.5"`},
		{"JSON: uid an object", "POST", "/group-user/g", `{"users":[5],"uid":{}}`, "application/json", 400, "invalid_uid", `"{}"`},
		{"JSON: empty uid string", "POST", "/group-user/g", `{"users":[5],"uid":""}`, "application/json", 400, "invalid_uid", `not an integer`},
		{"multipart body", "POST", "/group-user/g", "x", "multipart/form-data; boundary=x", 415, "unsupported_media_type", "multipart"},
		{"malformed Content-Type", "DELETE", "/group-user/g", "users=[1]", "text/", 415, "unsupported_media_type", "not supported"},
		{"POST to the groups", "POST", "/groups", "users=[5]", formType, 405, "method_not_allowed", "allowed: GET, HEAD"},
		{"GET of one group", "GET", "/groups/g", "", "", 405, "method_not_allowed", "allowed: DELETE"},
		{"PATCH", "PATCH", "/group-user/g", "users=[5]", formType, 405, "method_not_allowed", "PATCH"},
		{"POST to health", "POST", "/healthz", "", "", 405, "method_not_allowed", "allowed: GET, HEAD"},
		{"unknown path", "GET", "/nope", "", "", 404, "not_found", "/nope"},
		{"group-user without a group", "POST", "/group-user/", "users=[5]", formType, 404, "not_found", "/group-user/"},
		{"group-user with three segments", "GET", "/group-user/a/1/x", "", "", 404, "not_found", "/group-user/a/1/x"},
		{"member check with a bad uid", "GET", "/group-user/g/b", "", "", 400, "invalid_uid", `"b" is not a uid`},
		{"member check with a zero uid", "GET", "/group-user/g/0", "", "", 400, "invalid_uid", `"0" is not a uid`},
		{"member check with a bad group", "GET", "/group-user/a%00/1", "", "", 400, "invalid_group_id", "control character"},
		{"member check of a non-member", "GET", "/group-user/g/3", "", "", 404, "not_member", "user 3 is not a member"},
		{"POST to a member", "POST", "/group-user/g/1", "users=[5]", formType, 405, "method_not_allowed", "allowed: GET, HEAD"},
		{"limit zero", "GET", "/group-user/g?limit=0", "", "", 400, "invalid_query", `limit "0" is not an integer from 1 to 10000`},
		{"user groups: bad uid", "GET", "/user-group/x", "", "", 400, "invalid_uid", `"x" is not a uid`},
		{"user groups: bad limit", "GET", "/user-group/1?limit=0", "", "", 400, "invalid_query", `limit "0"`},
		{"user groups: after not a group id", "GET", "/user-group/1?after=a%00", "", "", 400, "invalid_query", "after is not a group id"},
		{"user groups: POST", "POST", "/user-group/1", "users=[1]", formType, 405, "method_not_allowed", "allowed: GET, HEAD"},
		{"limit too large", "GET", "/group-user/g?limit=10001", "", "", 400, "invalid_query", "from 1 to 10000"},
		{"limit not a number", "GET", "/group-user/g?limit=ten", "", "", 400, "invalid_query", `limit "ten"`},
		{"limit twice", "GET", "/group-user/g?limit=1&limit=2", "", "", 400, "invalid_query", "limit is given 2 times"},
		{"after not a uid", "GET", "/group-user/g?limit=1&after=-5", "", "", 400, "invalid_query", `after "-5" is not a uid`},
		{"no such route points at the API description", "GET", "/", "", "", 404, "not_found", "GET /openapi.json describes every route"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &countingStore{Store: memory.New()}
			h := httpapi.NewHandler(membership.NewService(st, membership.ServiceOptions{MaxUsers: testMaxUsers}), httpapi.Options{MaxBodyBytes: testMaxBody, ListCacheBytes: 1 << 20})
			w := do(h, "POST", "/group-user/g", `users=[[1,"Ann"],2]`, formType)
			require.Equal(t, http.StatusOK, w.Code)
			before := do(h, "GET", "/group-user/g", "", "").Body.String()
			st.changes.Store(0)

			w = do(h, tt.method, tt.path, tt.body, tt.contentType)
			assert.Equal(t, tt.wantStatus, w.Code)
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
			var body struct {
				Error struct{ Code, Message string }
			}
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), w.Body.String())
			assert.Equal(t, tt.wantCode, body.Error.Code)
			assert.Contains(t, body.Error.Message, tt.wantMsg)
			if tt.wantStatus == http.StatusMethodNotAllowed {
				assert.NotEmpty(t, w.Header().Get("Allow"))
			}

			assert.Zero(t, st.changes.Load(), "a bad request reached the store")
			assert.JSONEq(t, before, do(h, "GET", "/group-user/g", "", "").Body.String(), "the request changed group g")
		})
	}
}

// Headers the service cannot honour are refused with a message that names
// what is wrong, and change nothing: a compressed body (it would be read
// as plain text), two X-Min-Revision lines, an empty Idempotency-Key.
func TestBadHeadersChangeNothing(t *testing.T) {
	tests := []struct {
		name, method, path, body, contentType string
		header                                [][2]string // in order; a name may repeat
		wantStatus                            int
		wantCode, wantMsg                     string
	}{
		{"a gzipped add", "POST", "/group-user/g", "users=[5]", formType, [][2]string{{"Content-Encoding", "gzip"}},
			415, "unsupported_media_type", `Content-Encoding "gzip" is not supported: send the body uncompressed`},
		{"a gzipped JSON replace", "PUT", "/group-user/g", `{"users":[5]}`, "application/json", [][2]string{{"Content-Encoding", "identity, br"}},
			415, "unsupported_media_type", `Content-Encoding "br"`},
		{"a gzipped batch", "POST", "/batch", `{"writes":[]}`, "application/json", [][2]string{{"Content-Encoding", "deflate"}},
			415, "unsupported_media_type", `Content-Encoding "deflate"`},
		{"a gzipped check", "POST", "/check", `{"checks":[]}`, "application/json", [][2]string{{"Content-Encoding", "GZIP"}},
			415, "unsupported_media_type", `Content-Encoding "GZIP"`},
		{"two X-Min-Revision lines", "GET", "/group-user/g", "", "", [][2]string{{"X-Min-Revision", "1"}, {"X-Min-Revision", "99"}},
			400, "invalid_header", "the request has 2 X-Min-Revision header lines: send one revision"},
		{"an Idempotency-Key of spaces", "POST", "/group-user/g", "users=[5]", formType, [][2]string{{"Idempotency-Key", "   "}},
			400, "invalid_idempotency_key", "the Idempotency-Key is empty"},
		{"an empty Idempotency-Key", "DELETE", "/groups/g", "", "", [][2]string{{"Idempotency-Key", ""}},
			400, "invalid_idempotency_key", "the Idempotency-Key is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &countingStore{Store: memory.New()}
			h := httpapi.NewHandler(membership.NewService(st, membership.ServiceOptions{MaxUsers: testMaxUsers}), httpapi.Options{MaxBodyBytes: testMaxBody, ListCacheBytes: 1 << 20})
			require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", `users=[[1,"Ann"],2]`, formType).Code)
			before := do(h, "GET", "/group-user/g", "", "").Body.String()
			st.changes.Store(0)

			r := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			for _, kv := range tt.header {
				r.Header.Add(kv[0], kv[1])
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			assert.Equal(t, tt.wantStatus, w.Code)
			var body struct {
				Error struct{ Code, Message string }
			}
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), w.Body.String())
			assert.Equal(t, tt.wantCode, body.Error.Code)
			assert.Contains(t, body.Error.Message, tt.wantMsg)
			assert.Zero(t, st.changes.Load(), "a bad request reached the store")
			assert.JSONEq(t, before, do(h, "GET", "/group-user/g", "", "").Body.String(), "the request changed group g")
		})
	}
}

// Spaces around an Idempotency-Key are not part of it: " k" and "k" are one
// key, as they are once HTTP has stripped them.
func TestIdempotencyKeySpacesAreNotPartOfIt(t *testing.T) {
	h := httpapi.NewHandler(membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: testMaxUsers}), httpapi.Options{MaxBodyBytes: testMaxBody})
	send := func(key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/group-user/g", strings.NewReader("users=[5]"))
		r.Header.Set("Content-Type", formType)
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	first := send("k")
	require.Equal(t, http.StatusOK, first.Code, first.Body.String())
	again := send(" k\t")
	assert.Equal(t, http.StatusOK, again.Code, again.Body.String())
	assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"), "the same key, replayed")
	assert.Equal(t, first.Header().Get("X-Revision"), again.Header().Get("X-Revision"))
}

func TestBodyTooLargeWithoutContentLength(t *testing.T) {
	h, _ := newTestHandler(t)
	body := "users=[" + strings.Repeat("1,", testMaxBody) + "1]"
	r := httptest.NewRequest("POST", "/group-user/g", io.MultiReader(strings.NewReader(body)))
	r.ContentLength = -1 // as with chunked encoding: the limit must hold while reading
	r.Header.Set("Content-Type", formType)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
	assert.JSONEq(t, `{"error":{"code":"body_too_large","message":"the body is larger than 1024 bytes"}}`, w.Body.String())
	assert.JSONEq(t, `[]`, do(h, "GET", "/group-user/g", "", "").Body.String())
}

func TestAccessLogOffStillLogsInternalErrors(t *testing.T) {
	logs := &syncBuffer{}
	st := faultyStore{err: errors.New("disk on fire")}
	h := httpapi.NewHandler(membership.NewService(st, membership.ServiceOptions{}), httpapi.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	do(h, "GET", "/nope", "", "")
	do(h, "POST", "/group-user/g", "users=[1", formType)
	assert.Empty(t, logs.String(), "without the access log, requests that did not fail on the service's side are not logged")
	do(h, "GET", "/group-user/g", "", "")
	lines := logs.Lines()
	require.Len(t, lines, 1)
	assert.Contains(t, lines[0], "disk on fire")
}

func TestAccessLog(t *testing.T) {
	h, logs := newTestHandler(t)
	do(h, "POST", "/group-user/team%2Fa", "users=[1]&uid=42", formType)
	do(h, "GET", "/nope", "", "")

	lines := logs.Lines()
	require.Len(t, lines, 2)
	var post, notFound map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &post))
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &notFound))
	assert.Equal(t, "request", post["msg"])
	assert.Equal(t, "POST", post["method"])
	assert.Equal(t, "/group-user/team%2Fa", post["path"])
	assert.Equal(t, float64(200), post["status"])
	assert.Equal(t, float64(42), post["uid"], "the acting uid is logged")
	assert.Contains(t, post, "duration")
	assert.Equal(t, float64(404), notFound["status"])
	assert.NotContains(t, notFound, "uid")
}

// countingStore counts the calls that could change the store it wraps.
type countingStore struct {
	membership.Store
	changes atomic.Int64
}

func (s *countingStore) Write(ctx context.Context, w membership.Write) (membership.Result, error) {
	s.changes.Add(1)
	return s.Store.Write(ctx, w)
}

// faultyStore is a membership.Store whose every call fails the given way.
type faultyStore struct {
	err   error
	panic any
}

func (s faultyStore) fail() error {
	if s.panic != nil {
		panic(s.panic)
	}
	return s.err
}
func (s faultyStore) ListMembers(context.Context, string, membership.ListOptions, membership.ListFunc) (membership.Revision, error) {
	return 0, s.fail()
}
func (s faultyStore) Member(context.Context, string, membership.UID) (membership.Member, bool, error) {
	return membership.Member{}, false, s.fail()
}
func (s faultyStore) UserGroups(context.Context, membership.UID, membership.GroupListOptions, membership.GroupListFunc) error {
	return s.fail()
}
func (s faultyStore) Write(context.Context, membership.Write) (membership.Result, error) {
	return membership.Result{}, s.fail()
}
func (s faultyStore) Batch(context.Context, membership.Batch) (membership.BatchResult, error) {
	return membership.BatchResult{}, s.fail()
}
func (s faultyStore) Groups(context.Context, membership.GroupsOptions, membership.GroupsFunc) (membership.Revision, error) {
	return 0, s.fail()
}
func (s faultyStore) CheckMembers(context.Context, []membership.Check) ([]bool, membership.Revision, error) {
	return nil, 0, s.fail()
}
func (s faultyStore) Epoch() uint64 { return 1 }

func (s faultyStore) Revision(context.Context, string) (membership.Revision, error) {
	return 0, s.fail()
}
func (s faultyStore) Changes(context.Context, membership.ChangeOptions) ([]membership.Change, membership.Revision, error) {
	return nil, 0, s.fail()
}
func (s faultyStore) Subgroups(context.Context, string, membership.NestingListOptions, membership.NestedListFunc) (membership.Revision, error) {
	return 0, s.fail()
}
func (s faultyStore) Parents(context.Context, string, membership.NestingListOptions, membership.NestedListFunc) (membership.Revision, error) {
	return 0, s.fail()
}
func (s faultyStore) ListTransitiveMembers(context.Context, string, membership.ListOptions, membership.ListFunc) (membership.Revision, error) {
	return 0, s.fail()
}
func (s faultyStore) TransitiveMember(context.Context, string, membership.UID) (membership.Member, []string, bool, membership.Revision, error) {
	return membership.Member{}, nil, false, 0, s.fail()
}
func (s faultyStore) TransitiveUserGroups(context.Context, membership.UID, membership.GroupListOptions, membership.GroupListFunc) (membership.Revision, error) {
	return 0, s.fail()
}
func (s faultyStore) CheckTransitive(context.Context, []membership.Check) ([]bool, membership.Revision, error) {
	return nil, 0, s.fail()
}
func (s faultyStore) TransitiveRevision(context.Context, string) (membership.Revision, error) {
	return 0, s.fail()
}

func (s faultyStore) User(context.Context, membership.UID) (directory.UserRecord, bool, error) {
	return directory.UserRecord{}, false, s.fail()
}

func (s faultyStore) Users(context.Context, directory.UserQuery, directory.UsersFunc) error {
	return s.fail()
}

func (s faultyStore) FreeUID(context.Context) (membership.UID, error) { return 0, s.fail() }

func (s faultyStore) Group(context.Context, string, membership.ListFunc) (directory.GroupRecord, bool, error) {
	return directory.GroupRecord{}, false, s.fail()
}

func (s faultyStore) GroupRecords(context.Context, directory.GroupQuery, directory.GroupRecordsFunc) error {
	return s.fail()
}

func TestInternalFaultsAreJSON500sAndLogged(t *testing.T) {
	tests := []struct {
		name    string
		store   faultyStore
		wantLog string
	}{
		{"store error", faultyStore{err: errors.New("disk on fire at /var/secret")}, "disk on fire at /var/secret"},
		{"panic", faultyStore{panic: "boom"}, "panic: boom"},
	}
	for _, tt := range tests {
		for _, method := range []string{"POST", "DELETE", "GET"} {
			t.Run(tt.name+" "+method, func(t *testing.T) {
				logs := &syncBuffer{}
				h := httpapi.NewHandler(membership.NewService(tt.store, membership.ServiceOptions{}), httpapi.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
				w := do(h, method, "/group-user/g", "users=[1]", formType)
				assert.Equal(t, http.StatusInternalServerError, w.Code)
				assert.JSONEq(t, `{"error":{"code":"internal","message":"internal error"}}`, w.Body.String(),
					"the client must not see internal detail")
				lines := logs.Lines()
				require.Len(t, lines, 1)
				var line map[string]any
				require.NoError(t, json.Unmarshal([]byte(lines[0]), &line))
				assert.Equal(t, "ERROR", line["level"])
				assert.Equal(t, float64(500), line["status"])
				assert.Contains(t, line["err"], tt.wantLog)
			})
		}
	}
}

func TestUnavailableStoreIsA503(t *testing.T) {
	st := faultyStore{err: membership.Errorf(membership.CodeUnavailable, "the change could not be written to disk; nothing was changed")}
	h := httpapi.NewHandler(membership.NewService(st, membership.ServiceOptions{}), httpapi.Options{})
	for _, method := range []string{"POST", "DELETE"} {
		w := do(h, method, "/group-user/g", "users=[1]", formType)
		assert.Equal(t, http.StatusServiceUnavailable, w.Code)
		assert.JSONEq(t, `{"error":{"code":"unavailable","message":"the change could not be written to disk; nothing was changed"}}`, w.Body.String())
	}
}

func TestAbortHandlerPanicIsNotTurnedInto500(t *testing.T) {
	h := httpapi.NewHandler(membership.NewService(faultyStore{panic: http.ErrAbortHandler}, membership.ServiceOptions{}), httpapi.Options{})
	assert.PanicsWithValue(t, http.ErrAbortHandler, func() {
		do(h, "GET", "/group-user/g", "", "")
	}, "net/http must get ErrAbortHandler to abort the response")
}

func TestConcurrentAddsCountEachUserOnce(t *testing.T) {
	svc := membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: 1000})
	srv := httptest.NewServer(httpapi.NewHandler(svc, httpapi.Options{}))
	defer srv.Close()

	var users []string
	for uid := 1; uid <= 100; uid++ {
		users = append(users, fmt.Sprint(uid))
	}
	body := "users=" + urlEncode("["+strings.Join(users, ",")+"]")

	const clients = 16
	counts := make([]int, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(srv.URL+"/group-user/g", formType, strings.NewReader(body))
			if err != nil {
				errs[c] = err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				errs[c] = fmt.Errorf("status %d", resp.StatusCode)
				return
			}
			errs[c] = json.NewDecoder(resp.Body).Decode(&counts[c])
		}()
	}
	wg.Wait()
	total := 0
	for c := range clients {
		require.NoError(t, errs[c], "client %d", c)
		total += counts[c]
	}
	assert.Equal(t, 100, total, "16 clients adding the same 100 users")

	resp, err := http.Get(srv.URL + "/group-user/g")
	require.NoError(t, err)
	defer resp.Body.Close()
	var list []membership.Member
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	assert.Len(t, list, 100)
}

func urlEncode(s string) string {
	return strings.NewReplacer("%", "%25", "&", "%26", "+", "%2B", "=", "%3D", "#", "%23", " ", "%20").Replace(s)
}

// syncBuffer collects a log written from several goroutines.
type syncBuffer = logtest.Buffer

func TestListEscapesOnlyWhatJSONNeeds(t *testing.T) {
	h, _ := newTestHandler(t)
	w := do(h, "POST", "/group-user/g", "users="+urlEncode(`[[7,"<b> & \"q\" \\ \n \u2028\u2029 é"]]`), formType)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	w = do(h, "GET", "/group-user/g", "", "")
	assert.Equal(t, `[{"uid":7,"nickname":"<b> & \"q\" \\ \n \u2028\u2029 é"}]`, w.Body.String())
}

// checkPage asserts the body, Link and X-Total-Count that GET of path
// answers, and that HEAD carries the same count.
func checkPage(t *testing.T, h http.Handler, path, wantBody, wantLink, wantTotal string) {
	t.Helper()
	w := do(h, "GET", path, "", "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, wantBody, w.Body.String())
	assert.Equal(t, wantLink, w.Header().Get("Link"))
	assert.Equal(t, wantTotal, w.Header().Get("X-Total-Count"))
	head := do(h, "HEAD", path, "", "")
	assert.Equal(t, wantTotal, head.Header().Get("X-Total-Count"), "HEAD carries the count too")
}

func TestPagingAndCounts(t *testing.T) {
	h, _ := newTestHandler(t)
	do(h, "POST", "/group-user/team%2Fa", `users=[5,[3,"C"],9,1,7]`, formType)

	tests := []struct {
		name      string
		path      string
		wantBody  string
		wantLink  string
		wantTotal string
	}{
		{"whole group", "/group-user/team%2Fa", `[{"uid":1,"nickname":""},{"uid":3,"nickname":"C"},{"uid":5,"nickname":""},{"uid":7,"nickname":""},{"uid":9,"nickname":""}]`, "", "5"},
		{"first page", "/group-user/team%2Fa?limit=2", `[{"uid":1,"nickname":""},{"uid":3,"nickname":"C"}]`,
			`</group-user/team%2Fa?limit=2&after=3>; rel="next"`, "5"},
		{"middle page", "/group-user/team%2Fa?limit=2&after=3", `[{"uid":5,"nickname":""},{"uid":7,"nickname":""}]`,
			`</group-user/team%2Fa?limit=2&after=7>; rel="next"`, "5"},
		{"last page, exactly full: no next", "/group-user/team%2Fa?limit=1&after=7", `[{"uid":9,"nickname":""}]`, "", "5"},
		{"after a uid that is not a member", "/group-user/team%2Fa?limit=10&after=4", `[{"uid":5,"nickname":""},{"uid":7,"nickname":""},{"uid":9,"nickname":""}]`, "", "5"},
		{"after the last", "/group-user/team%2Fa?limit=3&after=9", `[]`, "", "5"},
		{"after without limit", "/group-user/team%2Fa?after=5", `[{"uid":7,"nickname":""},{"uid":9,"nickname":""}]`, "", "5"},
		{"unknown group", "/group-user/nobody?limit=3", `[]`, "", "0"},
		{"the documented largest page", "/group-user/team%2Fa?limit=10000&after=7", `[{"uid":9,"nickname":""}]`, "", "5"},
		{"the groups of a user, the largest page", "/user-group/3?limit=10000", `["team/a"]`, "", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkPage(t, h, tt.path, tt.wantBody, tt.wantLink, tt.wantTotal)
		})
	}
	// The cached whole list carries the count as well.
	w := do(h, "GET", "/group-user/team%2Fa", "", "")
	assert.Equal(t, "5", w.Header().Get("X-Total-Count"))
}

func TestMemberCheck(t *testing.T) {
	h, _ := newTestHandler(t)
	do(h, "POST", "/group-user/g", "users="+urlEncode(`[[7,"Zoë & co"],9223372036854775807]`), formType)
	w := do(h, "GET", "/group-user/g/7", "", "")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, `{"uid":7,"nickname":"Zoë & co"}`, w.Body.String())
	w = do(h, "GET", "/group-user/g/9223372036854775807", "", "")
	assert.Equal(t, `{"uid":9223372036854775807,"nickname":""}`, w.Body.String())
	assert.Equal(t, http.StatusOK, do(h, "HEAD", "/group-user/g/7", "", "").Code)
	assert.Equal(t, http.StatusNotFound, do(h, "HEAD", "/group-user/g/8", "", "").Code)
	w = do(h, "GET", "/group-user/other/7", "", "")
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.JSONEq(t, `{"error":{"code":"not_member","message":"user 7 is not a member of the group"}}`, w.Body.String())
}

func TestPagingWhileTheGroupChanges(t *testing.T) {
	// Members present throughout are each seen exactly once, whatever is
	// added or removed between pages.
	h := httpapi.NewHandler(membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: 1000}), httpapi.Options{ListCacheBytes: 1 << 20})
	var stable []string
	for uid := 10; uid <= 1000; uid += 10 {
		stable = append(stable, fmt.Sprint(uid))
	}
	require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", "users=["+strings.Join(stable, ",")+"]", formType).Code)

	seen := map[int64]int{}
	path := "/group-user/g?limit=7"
	for page := 0; path != ""; page++ {
		require.Less(t, page, 100, "paging does not end")
		w := do(h, "GET", path, "", "")
		require.Equal(t, http.StatusOK, w.Code)
		var list []membership.Member
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &list))
		for _, m := range list {
			seen[int64(m.UID)]++
		}
		// Churn: add members on both sides of the cursor, remove others.
		do(h, "POST", "/group-user/g", fmt.Sprintf("users=[%d,%d]", page*10+5, 1000-page*10+5), formType)
		do(h, "DELETE", "/group-user/g", fmt.Sprintf("users=[%d]", page*10+5), formType)
		path = ""
		if link := w.Header().Get("Link"); link != "" {
			path = strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
		}
	}
	for _, uid := range stable {
		var n int64
		_, _ = fmt.Sscan(uid, &n)
		assert.Equal(t, 1, seen[n], "uid %d", n)
	}
	for uid, n := range seen {
		assert.Equal(t, 1, n, "uid %d seen %d times", uid, n)
	}
}

func TestUserGroups(t *testing.T) {
	h, _ := newTestHandler(t)
	for _, g := range []string{"b", "team%2Fa", "a", "%C3%A9t%C3%A9", "c"} {
		require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/"+g, "users=[7,8]", formType).Code)
	}
	do(h, "DELETE", "/group-user/c", "users=[7]", formType)

	tests := []struct {
		name      string
		path      string
		wantBody  string
		wantLink  string
		wantTotal string
	}{
		{"all, in byte order", "/user-group/7", `["a","b","team/a","été"]`, "", "4"},
		{"first page", "/user-group/7?limit=2", `["a","b"]`, `</user-group/7?limit=2&after=b>; rel="next"`, "4"},
		{"next page, escaped", "/user-group/7?limit=1&after=b", `["team/a"]`, `</user-group/7?limit=1&after=team%2Fa>; rel="next"`, "4"},
		{"after an escaped id", "/user-group/7?limit=5&after=team%2Fa", `["été"]`, "", "4"},
		{"another user", "/user-group/8", `["a","b","c","team/a","été"]`, "", "5"},
		{"a user in no group", "/user-group/9", `[]`, "", "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkPage(t, h, tt.path, tt.wantBody, tt.wantLink, tt.wantTotal)
		})
	}
}

func TestRequestIDs(t *testing.T) {
	h, logs := newTestHandler(t)
	tests := []struct {
		name string
		sent string // "" sends none
		keep bool
	}{
		{"kept when well formed", "abc-123_x.y:z", true},
		{"none sent", "", false},
		{"a space is replaced", "abc 123", false},
		{"a newline is replaced", "abc\n123", false},
		{"too long is replaced", strings.Repeat("a", 129), false},
		{"128 characters are kept", strings.Repeat("a", 128), true},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/nope", nil) // also on errors
			if tt.sent != "" {
				r.Header.Set("X-Request-ID", tt.sent)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			got := w.Header().Get("X-Request-ID")
			require.NotEmpty(t, got)
			if tt.keep {
				assert.Equal(t, tt.sent, got)
			} else {
				assert.NotEqual(t, tt.sent, got)
				assert.Regexp(t, `^[0-9a-f]{12}-[0-9]+$`, got)
				assert.False(t, seen[got], "ids are unique")
				seen[got] = true
			}
			assert.Contains(t, logs.String(), `"request_id":"`+got+`"`, "the id is in the access log")
		})
	}
}

func TestAuth(t *testing.T) {
	const token = "s3cret-t0ken"
	newAuthHandler := func(authReads bool) (http.Handler, *countingStore) {
		st := &countingStore{Store: memory.New()}
		return httpapi.NewHandler(membership.NewService(st, membership.ServiceOptions{MaxUsers: 100}), httpapi.Options{Access: httpapi.TokenOnly(token), AuthReads: authReads}), st
	}
	send := func(h http.Handler, method, path, auth string) *httptest.ResponseRecorder {
		body := ""
		if strings.HasPrefix(path, "/group-user/") && method != "GET" && method != "HEAD" {
			body = "users=[1]"
		}
		contentType := formType
		if path == "/check" {
			body, contentType = `{"checks":[{"group":"g","uid":1}]}`, "application/json"
		}
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", contentType)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	routes := []struct {
		method, path string
		write        bool // needs the token without -auth-reads
		open         bool // never needs it
	}{
		{"POST", "/group-user/g", true, false},
		{"DELETE", "/group-user/g", true, false},
		{"PUT", "/group-user/g", true, false},
		{"DELETE", "/groups/g", true, false},
		{"DELETE", "/user-group/1", true, false},
		{"GET", "/groups", false, false},
		{"HEAD", "/groups", false, false},
		{"GET", "/group-user/g", false, false},
		{"HEAD", "/group-user/g", false, false},
		{"GET", "/group-user/g/1", false, false},
		{"POST", "/check", false, false}, // a read, though a POST
		{"GET", "/user-group/1", false, false},
		{"GET", "/openapi.json", false, false},
		{"GET", "/changes", false, false},
		{"GET", "/metrics", false, false},
		{"GET", "/healthz", false, true},
		{"GET", "/readyz", false, true},
	}
	for _, authReads := range []bool{false, true} {
		for _, rt := range routes {
			needs := !rt.open && (rt.write || authReads)
			t.Run(fmt.Sprintf("auth-reads=%v %s %s", authReads, rt.method, rt.path), func(t *testing.T) {
				h, st := newAuthHandler(authReads)
				for _, auth := range []string{"", "Bearer wrong", "Bearer " + token + "x", "Basic " + token, "Bearer" + token, token} {
					w := send(h, rt.method, rt.path, auth)
					if !needs {
						assert.NotEqual(t, http.StatusUnauthorized, w.Code, "auth %q", auth)
						continue
					}
					assert.Equal(t, http.StatusUnauthorized, w.Code, "auth %q", auth)
					assert.Equal(t, `Bearer realm="membership"`, w.Header().Get("WWW-Authenticate"))
					if rt.method != "HEAD" {
						assert.Contains(t, w.Body.String(), `"code":"unauthorized"`)
						assert.NotContains(t, w.Body.String(), token)
					}
				}
				assert.Zero(t, st.changes.Load(), "a refused request changes nothing")
				// The scheme is case-insensitive (RFC 9110 11.1).
				for _, auth := range []string{"Bearer " + token, "bearer " + token, "BEARER " + token, "Bearer  " + token} {
					w := send(h, rt.method, rt.path, auth)
					assert.NotEqual(t, http.StatusUnauthorized, w.Code, "the right token passes: %q", auth)
				}
			})
		}
	}
}

func TestReadyzSaysWhenShuttingDown(t *testing.T) {
	ready := false
	h := httpapi.NewHandler(membership.NewService(memory.New(), membership.ServiceOptions{}), httpapi.Options{Ready: func() bool { return ready }})
	w := do(h, "GET", "/readyz", "", "")
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Contains(t, w.Body.String(), `"code":"unavailable"`)
	ready = true
	w = do(h, "GET", "/readyz", "", "")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.JSONEq(t, `{"status":"ready"}`, w.Body.String())
}

// While the data loads, the API routes as it will once loaded: only the
// routes that need the data (and /readyz) answer 503 starting, with
// Retry-After, and every reply has its X-Request-ID, its log line and its
// count, which go on once loaded.
func TestLoadingStateRoutesAsUsual(t *testing.T) {
	logs := &syncBuffer{}
	h := httpapi.NewLoadingHandler(httpapi.Options{
		Logger:    slog.New(slog.NewJSONHandler(logs, nil)),
		AccessLog: true,
		Access:    httpapi.TokenOnly("secret"),
	})
	const starting = `{"error":{"code":"starting","message":"the service is starting: its data is loading; try again in a moment (/readyz says when it is ready)"}}`
	tests := []struct {
		method, path string
		token        bool
		wantStatus   int
		wantCode     string // "" for a reply that is not an error
		wantAllow    string
	}{
		{"GET", "/healthz", false, 200, "", ""},
		{"GET", "/openapi.json", false, 200, "", ""},
		{"GET", "/readyz", false, 503, "starting", ""},
		{"GET", "/group-user/g", false, 503, "starting", ""},
		{"HEAD", "/group-user/g", false, 503, "starting", ""},
		{"GET", "/group-user/g/1", false, 503, "starting", ""},
		{"GET", "/user-group/1", false, 503, "starting", ""},
		{"HEAD", "/user-group/1", false, 503, "starting", ""},
		{"GET", "/changes", false, 503, "starting", ""},
		{"POST", "/group-user/g", true, 503, "starting", ""},
		{"DELETE", "/group-user/g", true, 503, "starting", ""},
		{"POST", "/group-user/g", false, 401, "unauthorized", ""},
		{"PUT", "/group-user/g", true, 503, "starting", ""},
		{"GET", "/groups", false, 503, "starting", ""},
		{"DELETE", "/groups/g", true, 503, "starting", ""},
		{"DELETE", "/user-group/1", true, 503, "starting", ""},
		{"DELETE", "/groups/g", false, 401, "unauthorized", ""},
		{"PATCH", "/group-user/g", true, 405, "method_not_allowed", "GET, HEAD, POST, PUT, DELETE"},
		{"POST", "/groups", true, 405, "method_not_allowed", "GET, HEAD"},
		{"POST", "/readyz", true, 405, "method_not_allowed", "GET, HEAD"},
		{"GET", "/nowhere", false, 404, "not_found", ""},
		{"GET", "/group-user//g", false, 404, "not_found", ""},
		{"GET", "/healthz?x=1", false, 400, "invalid_query", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.path, nil)
			if tt.token {
				r.Header.Set("Authorization", "Bearer secret")
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			assert.Equal(t, tt.wantStatus, w.Code, w.Body.String())
			assert.NotEmpty(t, w.Header().Get("X-Request-ID"))
			assert.Equal(t, tt.wantAllow, w.Header().Get("Allow"))
			if tt.wantStatus == 503 {
				assert.Equal(t, "1", w.Header().Get("Retry-After"))
				if tt.method != "HEAD" {
					assert.JSONEq(t, starting, w.Body.String())
				}
			}
			if tt.wantCode != "" && tt.method != "HEAD" {
				assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
				assert.Contains(t, w.Body.String(), `"code":"`+tt.wantCode+`"`)
			}
		})
	}
	assert.Equal(t, len(tests), strings.Count(logs.String(), `"msg":"request"`), "every reply is logged")
	assert.Contains(t, logs.String(), `"method":"POST","path":"/group-user/g","status":503`)

	metricsWhileLoading := do(h, "GET", "/metrics", "", "")
	require.Equal(t, http.StatusOK, metricsWhileLoading.Code)
	families, err := metricstest.Parse(metricsWhileLoading.Body.String())
	require.NoError(t, err)
	posts := map[string]string{"route": "/group-user/{groupID}", "method": "POST", "status": "503"}
	n, _ := sample(families["membership_http_requests_total"], "membership_http_requests_total", posts)
	assert.Equal(t, 1.0, n, "the 503 starting is counted")
	writable, _ := sample(families["membership_store_writable"], "membership_store_writable", map[string]string{})
	assert.Equal(t, 0.0, writable, "a loading store takes no changes")

	h.Load(membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: testMaxUsers}), httpapi.StoreExtras{})
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/group-user/g", strings.NewReader("users=[1]"))
	r.Header.Set("Content-Type", formType)
	r.Header.Set("Authorization", "Bearer secret")
	h.ServeHTTP(w, r)
	assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, http.StatusOK, do(h, "GET", "/readyz", "", "").Code)
	assert.JSONEq(t, `[{"uid":1,"nickname":""}]`, do(h, "GET", "/group-user/g", "", "").Body.String())

	families, err = metricstest.Parse(do(h, "GET", "/metrics", "", "").Body.String())
	require.NoError(t, err)
	n, _ = sample(families["membership_http_requests_total"], "membership_http_requests_total", posts)
	assert.Equal(t, 1.0, n, "the counts of the loading state are kept")
	posts["status"] = "200"
	n, _ = sample(families["membership_http_requests_total"], "membership_http_requests_total", posts)
	assert.Equal(t, 1.0, n)
	writable, _ = sample(families["membership_store_writable"], "membership_store_writable", map[string]string{})
	assert.Equal(t, 1.0, writable)
}

// The access log's lines are the same through package accesslog as through
// slog, in both formats, for a success, a refusal, a request with an
// acting uid and a client's request id, and a failure on the service's
// side (a panic); only the time differs.
func TestAccessLinesAreTheSlogLines(t *testing.T) {
	for _, json := range []bool{false, true} {
		lines := map[bool]*syncBuffer{false: {}, true: {}}
		handlers := map[bool]http.Handler{}
		for _, fast := range []bool{false, true} {
			var h slog.Handler = slog.NewTextHandler(lines[fast], nil)
			if json {
				h = slog.NewJSONHandler(lines[fast], nil)
			}
			opts := httpapi.Options{Logger: slog.New(h), AccessLog: true, MaxBodyBytes: testMaxBody}
			if fast {
				opts.AccessLines = accesslog.New(lines[fast], json)
			}
			handlers[fast] = httpapi.NewHandler(membership.NewService(panicOnGroup{memory.New()}, membership.ServiceOptions{MaxUsers: testMaxUsers}), opts)
		}
		for _, fast := range []bool{false, true} {
			h := handlers[fast]
			do(h, "POST", "/group-user/g", "users=[1,2]&uid=42", formType)
			do(h, "GET", "/group-user/g?limit=0", "", "")
			r := httptest.NewRequest("GET", "/group-user/a%3Db", nil)
			r.Header.Set("X-Request-ID", "client-id-1")
			h.ServeHTTP(httptest.NewRecorder(), r)
			do(h, "GET", "/group-user/panic", "", "")
		}
		slow, fast := withoutTimes(lines[false].String()), withoutTimes(lines[true].String())
		require.Len(t, fast, 4, "json %v: one line per request, and nothing else", json)
		assert.Equal(t, slow, fast, "json %v", json)
		assert.Contains(t, fast[2], "client-id-1", "json %v", json)
		assert.Contains(t, fast[3], "panic: a test store panics", "json %v", json)
	}
}

// withoutTimes returns the lines of logs with what differs between two
// handlers taken out: the time, the duration, the request ids drawn, the
// stack after a panic's message.
func withoutTimes(logs string) []string {
	times := regexp.MustCompile(`(time=\S+|"time":"[^"]+"|duration=\S+|"duration":\d+)`)
	ids := regexp.MustCompile(`[0-9a-f]{12}-\d+`)
	stack := regexp.MustCompile(`(a test store panics)[^"]*`)
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		line = times.ReplaceAllString(line, "<time>")
		line = ids.ReplaceAllString(line, "<id>")
		out = append(out, stack.ReplaceAllString(line, "$1"))
	}
	return out
}

// panicOnGroup is a store that panics on a list of the group "panic".
type panicOnGroup struct{ *memory.Store }

func (p panicOnGroup) ListMembers(ctx context.Context, groupID string, opts membership.ListOptions, list membership.ListFunc) (membership.Revision, error) {
	if groupID == "panic" {
		panic("a test store panics")
	}
	return p.Store.ListMembers(ctx, groupID, opts, list)
}
