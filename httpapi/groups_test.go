package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
)

// send sends one request to h with a form body (none when body is "") and
// the given headers.
func send(h http.Handler, method, path, body string, header map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", formType)
	}
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// errorCode returns the code of an error reply's body, "" for another.
func errorCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	code, _ := errorOf(w)
	return code
}

// errorOf returns the code and message of an error reply's body, "" for
// another.
func errorOf(w *httptest.ResponseRecorder) (code, message string) {
	var body struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal(w.Body.Bytes(), &body)
	return body.Error.Code, body.Error.Message
}

// latestRevision returns the store's latest revision, from /changes.
func latestRevision(t *testing.T, h http.Handler) string {
	t.Helper()
	w := do(h, "GET", "/changes?limit=1", "", "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	return w.Header().Get("X-Revision")
}

// linkPath returns the URL of a reply's Link to the next page, "" for none.
func linkPath(w *httptest.ResponseRecorder) string {
	return strings.TrimSuffix(strings.TrimPrefix(w.Header().Get("Link"), "<"), `>; rel="next"`)
}

func TestGroupsListsGroupsWithMembersInByteOrder(t *testing.T) {
	h, _ := newTestHandler(t)
	for _, g := range []string{"b", "team%2Fa", "a", "%C3%A9t%C3%A9", "a%26b%20c", "team%2Fb", "emptied"} {
		require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/"+g, "users=[7,8]", formType).Code)
	}
	do(h, "POST", "/group-user/b", "users=[9]", formType)
	do(h, "DELETE", "/group-user/emptied", "users=[7,8]", formType)
	revision := latestRevision(t, h)

	tests := []struct {
		name      string
		path      string
		wantBody  string
		wantLink  string
		wantTotal string
	}{
		{"all, in byte order; emptied groups are not listed", "/groups",
			`[{"group":"a","members":2},{"group":"a&b c","members":2},{"group":"b","members":3},{"group":"team/a","members":2},{"group":"team/b","members":2},{"group":"été","members":2}]`, "", "6"},
		{"first page", "/groups?limit=2", `[{"group":"a","members":2},{"group":"a&b c","members":2}]`,
			`</groups?limit=2&after=a%26b+c>; rel="next"`, "6"},
		{"the next page, after an escaped id", "/groups?limit=2&after=a%26b+c", `[{"group":"b","members":3},{"group":"team/a","members":2}]`,
			`</groups?limit=2&after=team%2Fa>; rel="next"`, "6"},
		{"the last page, exactly full: no next", "/groups?limit=2&after=team%2Fa", `[{"group":"team/b","members":2},{"group":"été","members":2}]`, "", "6"},
		{"after an id that is no group", "/groups?after=c", `[{"group":"team/a","members":2},{"group":"team/b","members":2},{"group":"été","members":2}]`, "", "6"},
		{"after the last", "/groups?after=%C3%A9t%C3%A9", `[]`, "", "6"},
		{"a prefix", "/groups?prefix=team%2F", `[{"group":"team/a","members":2},{"group":"team/b","members":2}]`, "", "2"},
		{"a prefix, paged: the Link keeps it", "/groups?prefix=team%2F&limit=1", `[{"group":"team/a","members":2}]`,
			`</groups?limit=1&after=team%2Fa&prefix=team%2F>; rel="next"`, "2"},
		{"a prefix and after", "/groups?prefix=team%2F&limit=1&after=team%2Fa", `[{"group":"team/b","members":2}]`, "", "2"},
		{"a prefix that is a whole id", "/groups?prefix=a", `[{"group":"a","members":2},{"group":"a&b c","members":2}]`, "", "2"},
		{"a prefix nothing has", "/groups?prefix=zz", `[]`, "", "0"},
		{"the largest page", "/groups?limit=10000", `[{"group":"a","members":2},{"group":"a&b c","members":2},{"group":"b","members":3},{"group":"team/a","members":2},{"group":"team/b","members":2},{"group":"été","members":2}]`, "", "6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkPage(t, h, tt.path, tt.wantBody, tt.wantLink, tt.wantTotal)
			w := do(h, "GET", tt.path, "", "")
			assert.Equal(t, revision, w.Header().Get("X-Revision"))
			assert.Equal(t, "no-cache", w.Header().Get("Cache-Control"))
			assert.Regexp(t, `^"[0-9a-f]{16}-`+revision+`"$`, w.Header().Get("ETag"))
		})
	}
}

func TestGroupsPagesThroughManyGroups(t *testing.T) {
	h := httpapi.NewHandler(membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: 10}), httpapi.Options{})
	const groups = 2500 // more than the page a request without limit gets
	for i := range groups {
		require.Equal(t, http.StatusOK, do(h, "POST", fmt.Sprintf("/group-user/g%05d", i), fmt.Sprintf("users=[%d]", i+1), formType).Code)
	}
	for _, start := range []string{"/groups?limit=7", "/groups"} {
		var seen []string
		path := start
		for page := 0; path != ""; page++ {
			require.Less(t, page, groups, "paging does not end")
			w := do(h, "GET", path, "", "")
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			assert.Equal(t, fmt.Sprint(groups), w.Header().Get("X-Total-Count"))
			var list []struct {
				Group   string
				Members int
			}
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &list))
			for _, g := range list {
				seen = append(seen, g.Group)
				assert.Equal(t, 1, g.Members)
			}
			path = linkPath(w)
		}
		require.Len(t, seen, groups, start)
		for i, g := range seen {
			assert.Equal(t, fmt.Sprintf("g%05d", i), g, start)
		}
	}
	w := do(h, "GET", "/groups", "", "")
	assert.Equal(t, `</groups?limit=1000&after=g00999>; rel="next"`, w.Header().Get("Link"), "without limit, a page of 1000")
}

func TestGroupsETagAndIfNoneMatch(t *testing.T) {
	h, _ := newTestHandler(t)
	do(h, "POST", "/group-user/a", "users=[1]", formType)
	w := do(h, "GET", "/groups", "", "")
	require.Equal(t, http.StatusOK, w.Code)
	tag := w.Header().Get("ETag")
	require.NotEmpty(t, tag)

	w = doWith(h, "GET", "/groups", map[string]string{"If-None-Match": tag})
	assert.Equal(t, http.StatusNotModified, w.Code)
	assert.Empty(t, w.Body.String())
	assert.Equal(t, tag, w.Header().Get("ETag"))
	assert.Equal(t, http.StatusNotModified, doWith(h, "HEAD", "/groups?prefix=a", map[string]string{"If-None-Match": `"x", W/` + tag}).Code)

	do(h, "POST", "/group-user/other", "users=[1]", formType) // any change moves it
	w = doWith(h, "GET", "/groups", map[string]string{"If-None-Match": tag})
	assert.Equal(t, http.StatusOK, w.Code)
	assert.NotEqual(t, tag, w.Header().Get("ETag"))
	assert.JSONEq(t, `[{"group":"a","members":1},{"group":"other","members":1}]`, w.Body.String())
}

func TestGroupsBadQueries(t *testing.T) {
	long := strings.Repeat("a", 257)
	tests := []struct {
		name, path, wantMsg string
	}{
		{"limit zero", "/groups?limit=0", `limit "0" is not an integer from 1 to 10000`},
		{"limit too large", "/groups?limit=10001", "from 1 to 10000"},
		{"limit not a number", "/groups?limit=ten", `limit "ten"`},
		{"limit with a sign", "/groups?limit=%2B5", `limit "+5"`},
		{"after with a control character", "/groups?after=a%00", "after is not a group id"},
		{"after too long", "/groups?after=" + long, "after is not a group id"},
		{"after not UTF-8", "/groups?after=%FF", "after is not a group id"},
		{"prefix with a control character", "/groups?prefix=%0A", "prefix is not the start of a group id"},
		{"prefix too long", "/groups?prefix=" + long, "prefix is not the start of a group id"},
		{"an empty prefix", "/groups?prefix=", "prefix is empty"},
		{"prefix twice", "/groups?prefix=a&prefix=b", "prefix is given 2 times"},
		{"an unknown parameter", "/groups?search=a", `unknown parameter "search"`},
		{"a malformed query", "/groups?after=%zz", "malformed"},
	}
	h, _ := newTestHandler(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := do(h, "GET", tt.path, "", "")
			assert.Equal(t, http.StatusBadRequest, w.Code)
			code, msg := errorOf(w)
			assert.Equal(t, "invalid_query", code)
			assert.Contains(t, msg, tt.wantMsg)
		})
	}
}

func TestReplace(t *testing.T) {
	type step struct {
		method, path, body string
		wantStatus         int
		wantBody           string // compared as JSON
		wantRevision       string // "" to skip
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"makes the group exactly the users listed", []step{
			{"POST", "/group-user/g", "users=[1,2,3]", 200, `3`, "1"},
			{"PUT", "/group-user/g", "users=[2,3,4,5]", 200, `{"added":2,"removed":1}`, "2"},
			{"GET", "/group-user/g", "", 200, `[{"uid":2,"nickname":""},{"uid":3,"nickname":""},{"uid":4,"nickname":""},{"uid":5,"nickname":""}]`, ""},
		}},
		{"creates a group", []step{
			{"PUT", "/group-user/new", `users=[[1,"Ann"],2]`, 200, `{"added":2,"removed":0}`, "1"},
			{"GET", "/group-user/new", "", 200, `[{"uid":1,"nickname":"Ann"},{"uid":2,"nickname":""}]`, ""},
		}},
		{"nicknames as on add: given ones are set, others kept, the last wins", []step{
			{"POST", "/group-user/g", `users=[[1,"Ann"],[2,"Bo"]]`, 200, `2`, "1"},
			{"PUT", "/group-user/g", `users=[1,[2,"B"],[2,"Bob"],[3,"Cy"]]`, 200, `{"added":1,"removed":0}`, "2"},
			{"GET", "/group-user/g", "", 200, `[{"uid":1,"nickname":"Ann"},{"uid":2,"nickname":"Bob"},{"uid":3,"nickname":"Cy"}]`, ""},
		}},
		{"users=[] empties the group", []step{
			{"POST", "/group-user/g", "users=[1,2]", 200, `2`, "1"},
			{"PUT", "/group-user/g", "users=[]", 200, `{"added":0,"removed":2}`, "2"},
			{"GET", "/group-user/g", "", 200, `[]`, ""},
			{"GET", "/groups", "", 200, `[]`, ""},
		}},
		{"a replace that changes nothing takes no revision", []step{
			{"POST", "/group-user/g", `users=[[1,"Ann"],2]`, 200, `2`, "1"},
			{"POST", "/group-user/h", `users=[9]`, 200, `1`, "2"},
			{"PUT", "/group-user/g", `users=[2,[1,"Ann"],1]`, 200, `{"added":0,"removed":0}`, "1"},
			{"PUT", "/group-user/nobody", `users=[]`, 200, `{"added":0,"removed":0}`, ""},
			{"GET", "/changes?after=2", "", 200, `[]`, "2"},
		}},
		{"a nickname change alone is a change", []step{
			{"POST", "/group-user/g", `users=[[1,"Ann"]]`, 200, `1`, "1"},
			{"PUT", "/group-user/g", `users=[[1,"Anna"]]`, 200, `{"added":0,"removed":0}`, "2"},
			{"GET", "/group-user/g", "", 200, `[{"uid":1,"nickname":"Anna"}]`, ""},
		}},
		{"a user left in no group is forgotten", []step{
			{"POST", "/group-user/g", `users=[[1,"Ann"],2]`, 200, `2`, "1"},
			{"PUT", "/group-user/g", `users=[2]`, 200, `{"added":0,"removed":1}`, "2"},
			{"POST", "/group-user/h", `users=[1]`, 200, `1`, "3"},
			{"GET", "/group-user/h", "", 200, `[{"uid":1,"nickname":""}]`, ""},
		}},
		{"a JSON body, with the acting uid", []step{
			{"PUT", "/group-user/g", `{"users":[1,{"uid":2,"nickname":"Bo"}],"uid":42}`, 200, `{"added":2,"removed":0}`, "1"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newTestHandler(t)
			for i, s := range tt.steps {
				contentType := formType
				if strings.HasPrefix(s.body, "{") {
					contentType = "application/json"
				}
				w := do(h, s.method, s.path, s.body, contentType)
				require.Equal(t, s.wantStatus, w.Code, "step %d: %s %s: %s", i, s.method, s.path, w.Body.String())
				assert.JSONEq(t, s.wantBody, w.Body.String(), "step %d", i)
				if s.wantRevision != "" {
					assert.Equal(t, s.wantRevision, w.Header().Get("X-Revision"), "step %d", i)
				}
			}
		})
	}
}

func TestDeleteGroupAndRemoveUser(t *testing.T) {
	h, _ := newTestHandler(t)
	do(h, "POST", "/group-user/a", `users=[[1,"Ann"],2,3]`, formType)
	do(h, "POST", "/group-user/b", `users=[1,3]`, formType)
	do(h, "POST", "/group-user/team%2Fc", `users=[1]`, formType)

	w := do(h, "DELETE", "/groups/a", "", "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, "3", w.Body.String(), "the bare number of members removed")
	assert.Equal(t, "4", w.Header().Get("X-Revision"))
	assert.JSONEq(t, `[]`, do(h, "GET", "/group-user/a", "", "").Body.String())
	assert.JSONEq(t, `["b","team/c"]`, do(h, "GET", "/user-group/1", "", "").Body.String())
	assert.JSONEq(t, `[{"uid":1,"nickname":"Ann"},{"uid":3,"nickname":""}]`, do(h, "GET", "/group-user/b", "", "").Body.String(),
		"a user still in another group keeps their nickname")

	w = do(h, "DELETE", "/groups/a", "", "")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "0", w.Body.String(), "deleting an empty group removes nobody")
	assert.Equal(t, "4", w.Header().Get("X-Revision"), "and takes no revision")

	w = do(h, "DELETE", "/user-group/1", "", "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, "2", w.Body.String(), "the bare number of groups left")
	assert.Equal(t, "5", w.Header().Get("X-Revision"))
	assert.JSONEq(t, `[]`, do(h, "GET", "/user-group/1", "", "").Body.String())
	assert.JSONEq(t, `[{"uid":3,"nickname":""}]`, do(h, "GET", "/group-user/b", "", "").Body.String())
	assert.JSONEq(t, `[{"group":"b","members":1}]`, do(h, "GET", "/groups", "", "").Body.String())
	do(h, "POST", "/group-user/b", `users=[1]`, formType)
	assert.JSONEq(t, `[{"uid":1,"nickname":""},{"uid":3,"nickname":""}]`, do(h, "GET", "/group-user/b", "", "").Body.String(),
		"the user's nickname was forgotten")

	w = do(h, "DELETE", "/user-group/99", "", "")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "0", w.Body.String(), "a user in no group leaves none")
	assert.Equal(t, "6", w.Header().Get("X-Revision"), "and takes no revision")
}

// Every refused request changes nothing, and never reaches the store.
func TestGroupWritesRefuseBadRequests(t *testing.T) {
	long := strings.Repeat("a", 257)
	tests := []struct {
		name         string
		method, path string
		body         string
		header       map[string]string
		wantStatus   int
		wantCode     string
		wantMsg      string
	}{
		{"PUT: missing users", "PUT", "/group-user/g", "uid=1", nil, 400, "missing_users", "missing"},
		{"PUT: bad users", "PUT", "/group-user/g", "users=[1,1.5]", nil, 400, "invalid_users", "element 1"},
		{"PUT: too many users", "PUT", "/group-user/g", "users=[1,2,3,4,5,6]", nil, 413, "too_many_users", "more than 5"},
		{"PUT: body too large", "PUT", "/group-user/g", "users=[" + strings.Repeat("1,", testMaxBody/2) + "1]", nil, 413, "body_too_large", "larger than"},
		{"PUT: bad group id", "PUT", "/group-user/a%00b", "users=[1]", nil, 400, "invalid_group_id", "control character"},
		{"PUT: group id too long", "PUT", "/group-user/" + long, "users=[1]", nil, 400, "invalid_group_id", "longer than 256"},
		{"PUT: bad acting uid", "PUT", "/group-user/g", "users=[1]&uid=x", nil, 400, "invalid_uid", `"x"`},
		{"PUT: a text body", "PUT", "/group-user/g", "users=[1]", map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type", "text/plain"},
		{"PUT: a query", "PUT", "/group-user/g?users=[1]", "users=[1]", nil, 400, "invalid_query", "belongs in the body"},
		{"DELETE of /group-user without users stays a 400", "DELETE", "/group-user/g", "", nil, 400, "missing_users", "missing"},
		{"DELETE group: bad group id", "DELETE", "/groups/a%0Ab", "", nil, 400, "invalid_group_id", "control character"},
		{"DELETE group: group id not UTF-8", "DELETE", "/groups/%FF", "", nil, 400, "invalid_group_id", "not valid UTF-8"},
		{"DELETE group: a body", "DELETE", "/groups/g", "users=[1]", nil, 400, "invalid_body", "takes no body"},
		{"DELETE group: a query", "DELETE", "/groups/g?users=[1]", "", nil, 400, "invalid_query", "belongs in the body"},
		{"DELETE group: no id", "DELETE", "/groups/", "", nil, 404, "not_found", "not a canonical path"},
		{"DELETE group: two segments", "DELETE", "/groups/a/b", "", nil, 404, "not_found", "no route"},
		{"DELETE all groups", "DELETE", "/groups", "", nil, 405, "method_not_allowed", "allowed: GET, HEAD"},
		{"remove user: bad uid", "DELETE", "/user-group/x", "", nil, 400, "invalid_uid", `"x" is not a uid`},
		{"remove user: zero uid", "DELETE", "/user-group/0", "", nil, 400, "invalid_uid", `"0" is not a uid`},
		{"remove user: a leading zero", "DELETE", "/user-group/01", "", nil, 400, "invalid_uid", `"01" is not a uid`},
		{"remove user: too large", "DELETE", "/user-group/9223372036854775808", "", nil, 400, "invalid_uid", "is not a uid"},
		{"remove user: a body", "DELETE", "/user-group/1", "users=[1]", nil, 400, "invalid_body", "takes no body"},
		{"remove user: If-Match", "DELETE", "/user-group/1", "", map[string]string{"If-Match": "*"}, 400, "invalid_header", "If-Match is not taken here"},
		{"remove user: If-None-Match", "DELETE", "/user-group/1", "", map[string]string{"If-None-Match": "*"}, 400, "invalid_header", "If-None-Match is not taken here"},
		{"the body is checked before the precondition", "PUT", "/group-user/g", "users=[x]", map[string]string{"If-Match": `"0000000000000000-1"`}, 400, "invalid_users", "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &countingStore{Store: memory.New()}
			h := httpapi.NewHandler(membership.NewService(st, membership.ServiceOptions{MaxUsers: testMaxUsers}), httpapi.Options{MaxBodyBytes: testMaxBody})
			require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", `users=[[1,"Ann"],2]`, formType).Code)
			before := do(h, "GET", "/group-user/g", "", "").Body.String()
			st.changes.Store(0)

			w := send(h, tt.method, tt.path, tt.body, tt.header)
			assert.Equal(t, tt.wantStatus, w.Code, w.Body.String())
			code, msg := errorOf(w)
			assert.Equal(t, tt.wantCode, code)
			assert.Contains(t, msg, tt.wantMsg)
			assert.Empty(t, w.Header().Get("X-Revision"))
			assert.Zero(t, st.changes.Load(), "a bad request reached the store")
			assert.JSONEq(t, before, do(h, "GET", "/group-user/g", "", "").Body.String())
		})
	}
}

func TestConditionalWrites(t *testing.T) {
	type request struct {
		method, path, body string
	}
	writes := map[string]request{
		"POST":         {"POST", "/group-user/g", "users=[9]"},
		"PUT":          {"PUT", "/group-user/g", "users=[9]"},
		"DELETE":       {"DELETE", "/group-user/g", "users=[1]"},
		"DELETE group": {"DELETE", "/groups/g", ""},
	}
	// current and stale stand for the ETag of g now and before its last
	// change; other is the ETag of another group, the empty "e".
	tests := []struct {
		name     string
		ifMatch  string // "" sends none
		noneOf   string // If-None-Match; "" sends none
		empty    bool   // write to the empty group "e" instead of g
		want     int
		wantCode string
	}{
		{"the current ETag", "current", "", false, 200, ""},
		{"a stale ETag", "stale", "", false, 412, "precondition_failed"},
		{"a weak current ETag never matches", "W/current", "", false, 412, "precondition_failed"},
		{"several, the current among them", `"x", stale, current`, "", false, 200, ""},
		{"several, none current", `stale, W/current, "x"`, "", false, 412, "precondition_failed"},
		{"the current revision in another epoch", "otherEpoch", "", false, 412, "precondition_failed"},
		{"a well-formed tag that is not the service's", `"abc"`, "", false, 412, "precondition_failed"},
		{"an empty tag", `""`, "", false, 412, "precondition_failed"},
		{"* on a group with members", "*", "", false, 200, ""},
		{"* on an empty group", "*", "", true, 412, "precondition_failed"},
		{"the ETag of an empty group", "other", "", true, 200, ""},
		{"If-None-Match: * on a group with members", "", "*", false, 412, "precondition_failed"},
		{"If-None-Match: * on an empty group", "", "*", true, 200, ""},
		{"If-Match: * and If-None-Match: * never both hold", "*", "*", false, 412, "precondition_failed"},
		{"spaces and empty list elements", " , current ,, ", "", false, 200, ""},
		{"an unterminated quote", `"abc`, "", false, 400, "invalid_header"},
		{"a tag without quotes", `abc`, "", false, 400, "invalid_header"},
		{"two tags without a comma", `"a" "b"`, "", false, 400, "invalid_header"},
		{"* among tags", `*, current`, "", false, 400, "invalid_header"},
		{"an empty header", " ", "", false, 400, "invalid_header"},
		{"a space inside the quotes", `"a b"`, "", false, 400, "invalid_header"},
		{"a lowercase weak prefix", `w/"a"`, "", false, 400, "invalid_header"},
		{"If-None-Match with a tag on a write", "", "current", false, 400, "invalid_header"},
		{"If-None-Match malformed", "", `"abc`, false, 400, "invalid_header"},
	}
	for _, tt := range tests {
		for _, name := range []string{"POST", "PUT", "DELETE", "DELETE group"} {
			req := writes[name]
			t.Run(name+": "+tt.name, func(t *testing.T) {
				h, _ := newTestHandler(t)
				require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", `users=[[1,"Ann"],2]`, formType).Code)
				stale := do(h, "GET", "/group-user/g", "", "").Header().Get("ETag")
				require.Equal(t, http.StatusOK, do(h, "POST", "/group-user/g", `users=[3]`, formType).Code)
				group := "g"
				path := req.path
				if tt.empty {
					group = "e"
					path = strings.TrimSuffix(path, "/g") + "/e"
				}
				read := do(h, "GET", "/group-user/"+group, "", "")
				current := read.Header().Get("ETag")
				other := do(h, "GET", "/group-user/e", "", "").Header().Get("ETag")
				epoch := strings.Trim(current[:17], `"`)
				otherEpoch := `"ffffffffffffffff` + strings.TrimPrefix(current, `"`+epoch)
				if epoch == "ffffffffffffffff" {
					otherEpoch = `"0000000000000000` + strings.TrimPrefix(current, `"`+epoch)
				}
				tags := strings.NewReplacer("otherEpoch", otherEpoch, "current", current, "stale", stale, "other", other)
				header := map[string]string{}
				if tt.ifMatch != "" {
					header["If-Match"] = tags.Replace(tt.ifMatch)
				}
				if tt.noneOf != "" {
					header["If-None-Match"] = tags.Replace(tt.noneOf)
				}
				latest := latestRevision(t, h)

				w := send(h, req.method, path, req.body, header)
				require.Equal(t, tt.want, w.Code, "%v: %s", header, w.Body.String())
				assert.Equal(t, tt.wantCode, errorCode(t, w))
				if tt.want == http.StatusOK {
					assert.NotEmpty(t, w.Header().Get("X-Revision"))
					return
				}
				assert.Equal(t, latest, latestRevision(t, h), "a refused write takes no revision")
				assert.Equal(t, read.Body.String(), do(h, "GET", "/group-user/"+group, "", "").Body.String(), "nothing changed")
				if tt.want == http.StatusPreconditionFailed {
					assert.Equal(t, current, w.Header().Get("ETag"), "a 412 carries the group's current ETag")
				} else {
					assert.Empty(t, w.Header().Get("ETag"))
				}
			})
		}
	}
}

// Several If-Match fields are one list.
func TestIfMatchFieldsAreOneList(t *testing.T) {
	h, _ := newTestHandler(t)
	do(h, "POST", "/group-user/g", `users=[1]`, formType)
	current := do(h, "GET", "/group-user/g", "", "").Header().Get("ETag")
	r := httptest.NewRequest("PUT", "/group-user/g", strings.NewReader("users=[2]"))
	r.Header.Set("Content-Type", formType)
	r.Header.Add("If-Match", `"x"`)
	r.Header.Add("If-Match", current)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.JSONEq(t, `{"added":1,"removed":1}`, w.Body.String())
}

// A PUT with If-None-Match: * creates a group once: the second finds it.
func TestIfNoneMatchStarCreatesOnce(t *testing.T) {
	h, _ := newTestHandler(t)
	star := map[string]string{"If-None-Match": "*"}
	w := send(h, "PUT", "/group-user/g", `users=[1]`, star)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	w = send(h, "PUT", "/group-user/g", `users=[2]`, star)
	assert.Equal(t, http.StatusPreconditionFailed, w.Code)
	assert.JSONEq(t, `[{"uid":1,"nickname":""}]`, do(h, "GET", "/group-user/g", "", "").Body.String())
}

// N writers racing with the same If-Match: exactly one wins, the others
// get 412 with the winner's ETag, and the group is the winner's.
func TestConcurrentConditionalWritesOneWins(t *testing.T) {
	svc := membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: 100})
	srv := httptest.NewServer(httpapi.NewHandler(svc, httpapi.Options{}))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/group-user/g", formType, strings.NewReader("users=[1]"))
	require.NoError(t, err)
	resp.Body.Close()
	resp, err = http.Get(srv.URL + "/group-user/g")
	require.NoError(t, err)
	resp.Body.Close()
	tag := resp.Header.Get("ETag")
	require.NotEmpty(t, tag)

	const writers = 16
	// PUT writers put in users 100+i, POST writers 200+i: never one the
	// winner before put in, which would change nothing.
	base := map[string]int{"PUT": 100, "POST": 200}
	var uids []string
	for i := range writers {
		uids = append(uids, fmt.Sprint(100+i), fmt.Sprint(200+i))
	}
	everyWriter := "[" + strings.Join(uids, ",") + "]"
	for _, method := range []string{"PUT", "POST", "DELETE"} {
		codes := make([]int, writers)
		etags := make([]string, writers)
		errs := make([]error, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Each writer changes the group: its own user in, or
				// every user the writers before could have put in out.
				body := fmt.Sprintf("users=[%d]", base[method]+i)
				if method == "DELETE" {
					body = "users=" + everyWriter
				}
				req, err := http.NewRequest(method, srv.URL+"/group-user/g", strings.NewReader(body))
				if err != nil {
					errs[i] = err
					return
				}
				req.Header.Set("Content-Type", formType)
				req.Header.Set("If-Match", tag)
				<-start
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs[i] = err
					return
				}
				resp.Body.Close()
				codes[i], etags[i] = resp.StatusCode, resp.Header.Get("ETag")
			}()
		}
		close(start)
		wg.Wait()
		wins := 0
		for i := range writers {
			require.NoError(t, errs[i], "writer %d", i)
			switch codes[i] {
			case http.StatusOK:
				wins++
			case http.StatusPreconditionFailed:
				assert.NotEqual(t, tag, etags[i], "%s: a 412 names the state that won", method)
			default:
				t.Errorf("%s: writer %d got %d, want 200 or 412", method, i, codes[i])
			}
		}
		assert.Equal(t, 1, wins, "%s: exactly one writer with the same If-Match wins", method)
		resp, err := http.Get(srv.URL + "/group-user/g")
		require.NoError(t, err)
		resp.Body.Close()
		tag = resp.Header.Get("ETag")
		for i := range writers {
			if codes[i] == http.StatusPreconditionFailed {
				assert.Equal(t, tag, etags[i], "%s: the 412s carry the winner's ETag", method)
			}
		}
	}
}

func TestChangesFeedReportsTheNewOps(t *testing.T) {
	h, _ := newTestHandler(t)
	steps := []struct {
		method, path, body string
		wantChange         string // "" when the request takes no revision
	}{
		{"POST", "/group-user/g", `users=[1,[2,"Bo"],3]`, `{"rev":1,"op":"add","group":"g","uids":[1,2,3],"nicknames":[{"uid":2,"nickname":"Bo"}]}`},
		{"POST", "/group-user/h", `users=[3,4]`, `{"rev":2,"op":"add","group":"h","uids":[3,4]}`},
		{"PUT", "/group-user/g", `users=[[2,"Bob"],3,[5,"Eve"]]`, `{"rev":3,"op":"replace","group":"g","uids":[2,3,5],"nicknames":[{"uid":2,"nickname":"Bob"},{"uid":5,"nickname":"Eve"}]}`},
		{"PUT", "/group-user/g", `users=[2,3,5]`, ""},
		{"PUT", "/group-user/h", `users=[]`, `{"rev":4,"op":"replace","group":"h","uids":[]}`},
		{"DELETE", "/groups/g", "", `{"rev":5,"op":"delete_group","group":"g"}`},
		{"POST", "/group-user/team%2Fa", `users=[[7,"Al"],8]`, `{"rev":6,"op":"add","group":"team/a","uids":[7,8],"nicknames":[{"uid":7,"nickname":"Al"}]}`},
		{"DELETE", "/user-group/7", "", `{"rev":7,"op":"remove_user","uids":[7]}`},
		{"DELETE", "/user-group/7", "", ""},
	}
	var want []string
	for i, s := range steps {
		w := do(h, s.method, s.path, s.body, formType)
		require.Equal(t, http.StatusOK, w.Code, "step %d: %s", i, w.Body.String())
		if s.wantChange != "" {
			want = append(want, s.wantChange)
		}
		w = do(h, "GET", "/changes", "", "")
		require.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, "["+strings.Join(want, ",")+"]", untimed(t, w.Body.String()), "step %d", i)
	}
}

// The Link of a page of groups escapes its query values, so that every
// group id, however odd, leads to the page after it.
func TestGroupsLinkEscapesEveryID(t *testing.T) {
	h := httpapi.NewHandler(membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: 10}), httpapi.Options{})
	ids := []string{"a b", "a+b", "a&b", "a=b", "a#b", "a%b", "a/b", "a?b", "a;b", "é", "\u2028", "..", "."}
	for _, id := range ids {
		path := "/group-user/" + url.PathEscape(id)
		if id == "." || id == ".." {
			path = "/group-user/" + strings.Repeat("%2E", len(id))
		}
		require.Equal(t, http.StatusOK, do(h, "POST", path, "users=[1]", formType).Code, id)
	}
	var seen []string
	for path := "/groups?limit=1"; path != ""; {
		w := do(h, "GET", path, "", "")
		require.Equal(t, http.StatusOK, w.Code, "%s: %s", path, w.Body.String())
		var list []struct{ Group string }
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &list))
		for _, g := range list {
			seen = append(seen, g.Group)
		}
		require.LessOrEqual(t, len(seen), len(ids), "paging does not end")
		path = linkPath(w)
	}
	assert.ElementsMatch(t, ids, seen)
}
