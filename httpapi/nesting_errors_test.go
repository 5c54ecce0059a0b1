package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNestingWritesRefuseBadRequests(t *testing.T) {
	tooMany := `groups=["a","b","c","d","e","f"]`
	tests := []struct {
		name, method, path, body, contentType string
		header                                map[string]string
		wantStatus                            int
		wantCode                              string
		wantMessage                           string // a part of it
	}{
		{"no body", "POST", "/group-group/eng", "", formType, nil, 400, "missing_groups", "the groups parameter is missing or empty"},
		{"empty groups", "PUT", "/group-group/eng", "groups=", formType, nil, 400, "missing_groups", "missing or empty"},
		{"json without groups", "DELETE", "/group-group/eng", `{"uid":1}`, jsonType, nil, 400, "missing_groups", "missing or empty"},
		{"json groups null", "POST", "/group-group/eng", `{"groups":null}`, jsonType, nil, 400, "missing_groups", "missing or empty"},
		{"users for groups", "POST", "/group-group/eng", "users=[1]", formType, nil, 400, "invalid_body", `unknown parameter "users"`},
		{"json users for groups", "POST", "/group-group/eng", `{"users":[1]}`, jsonType, nil, 400, "invalid_body", `unknown field "users"`},
		{"bad json", "POST", "/group-group/eng", `{"groups":["a"]`, jsonType, nil, 400, "invalid_body", "not a JSON object with groups and uid"},
		{"groups not an array", "POST", "/group-group/eng", `{"groups":"a"}`, jsonType, nil, 400, "invalid_groups", "groups is not a JSON array"},
		{"a uid for a group", "POST", "/group-group/eng", `groups=[7]`, formType, nil, 400, "invalid_groups", "groups element 0: got a number"},
		{"a bad group id", "POST", "/group-group/eng", `groups=["ok","a\u0000b"]`, formType, nil, 400, "invalid_groups", "groups element 1: group id has control character"},
		{"an empty group id", "PUT", "/group-group/eng", `groups=[""]`, formType, nil, 400, "invalid_groups", "groups element 0: group id is empty"},
		{"an expiry in the past", "POST", "/group-group/eng", `{"groups":[{"group":"a","expires":"2001-01-01T00:00:00Z"}]}`, jsonType, nil, 400, "invalid_groups", "is not in the future"},
		{"too many", "POST", "/group-group/eng", tooMany, formType, nil, 413, "too_many_groups", "groups has more than 5 elements"},
		{"itself", "POST", "/group-group/eng", `groups=["eng"]`, formType, nil, 409, "cycle", "adding eng to eng makes a cycle: eng > eng"},
		{"itself in a replace", "PUT", "/group-group/eng", `groups=["a","eng"]`, formType, nil, 409, "cycle", "eng > eng"},
		{"a bad acting uid", "POST", "/group-group/eng", `groups=["a"]&uid=0`, formType, nil, 400, "invalid_uid", "the uid parameter"},
		{"a bad content type", "POST", "/group-group/eng", `groups=["a"]`, "text/plain", nil, 415, "unsupported_media_type", "text/plain"},
		{"a bad group id in the path", "POST", "/group-group/" + strings.Repeat("x", 300), `groups=["a"]`, formType, nil, 400, "invalid_group_id", "group id"},
		{"a query", "POST", "/group-group/eng?groups=a", `groups=["a"]`, formType, nil, 400, "invalid_query", `unknown parameter "groups": it belongs in the body of a POST, PUT or DELETE of /group-group/{groupID}`},
		{"If-None-Match with a tag", "PUT", "/group-group/eng", `groups=["a"]`, formType, map[string]string{"If-None-Match": `"x"`}, 400, "invalid_header", "takes only *"},
		{"a malformed If-Match", "PUT", "/group-group/eng", `groups=["a"]`, formType, map[string]string{"If-Match": `"x`}, 400, "invalid_header", "If-Match"},
		{"an empty Idempotency-Key", "POST", "/group-group/eng", `groups=["a"]`, formType, map[string]string{"Idempotency-Key": " "}, 400, "invalid_idempotency_key", "the Idempotency-Key is empty"},
		{"a body too large", "POST", "/group-group/eng", `groups=["` + strings.Repeat("a", testMaxBody) + `"]`, formType, nil, 413, "body_too_large", "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newTestHandler(t)
			header := map[string]string{"Content-Type": tt.contentType}
			for k, v := range tt.header {
				header[k] = v
			}
			w := sendTo(h, tt.method, tt.path, tt.body, header)
			require.Equal(t, tt.wantStatus, w.Code, w.Body.String())
			code, message := errorOf(w)
			assert.Equal(t, tt.wantCode, code)
			assert.Contains(t, message, tt.wantMessage)
		})
	}
}

func TestNestingReadsRefuseBadQueries(t *testing.T) {
	tests := []struct {
		path, wantMessage string
	}{
		{"/group-group/eng?limit=0", "limit"},
		{"/group-group/eng?after=", "after is empty"},
		{"/group-group/eng?after=a%00b", "after is not a group id"},
		{"/group-group/eng?transitive=yes", `transitive "yes" is not true or false`},
		{"/group-group/eng?transitive=true&transitive=true", "transitive is given 2 times"},
		{"/group-group/eng?uid=1", `unknown parameter "uid"`},
		{"/group-parents/eng?limit=10001", "limit"},
		{"/group-parents/eng?transitive=1", `transitive "1" is not true or false`},
		{"/group-user/eng?transitive=TRUE", `transitive "TRUE" is not true or false`},
		{"/group-user/eng/1?transitive=on", `transitive "on" is not true or false`},
		{"/group-user/eng/1?limit=1", `unknown parameter "limit"`},
		{"/user-group/1?transitive=yes", `transitive "yes" is not true or false`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			h, _ := newTestHandler(t)
			w := do(h, "GET", tt.path, "", "")
			require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
			code, message := errorOf(w)
			assert.Equal(t, "invalid_query", code)
			assert.Contains(t, message, tt.wantMessage)
		})
	}
	h, _ := newTestHandler(t)
	w := do(h, "GET", "/group-group/"+strings.Repeat("x", 300), "", "")
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Equal(t, "invalid_group_id", errorCode(t, w))
	w = do(h, "GET", "/group-parents/"+strings.Repeat("x", 300), "", "")
	assert.Equal(t, "invalid_group_id", errorCode(t, w))
}

func TestNestingBatchRefusesBadChanges(t *testing.T) {
	tests := []struct {
		name, body  string
		wantStatus  int
		wantCode    string
		wantMessage string
	}{
		{"add_groups without groups", `{"changes":[{"op":"add_groups","group":"g"}]}`, 400, "missing_groups", `changes element 0: add_groups takes groups`},
		{"add_groups with users", `{"changes":[{"op":"add_groups","group":"g","users":[1],"groups":["a"]}]}`, 400, "invalid_changes", "add_groups takes no users"},
		{"add with groups", `{"changes":[{"op":"add","group":"g","users":[1],"groups":["a"]}]}`, 400, "invalid_changes", "add takes no groups"},
		{"delete_group with groups", `{"changes":[{"op":"delete_group","group":"g","groups":["a"]}]}`, 400, "invalid_changes", "delete_group takes no groups"},
		{"expire_groups is the service's", `{"changes":[{"op":"expire_groups","group":"g","groups":["a"]}]}`, 400, "invalid_changes", `op "expire_groups" is not add, remove, replace, delete_group, add_groups, remove_groups or replace_groups`},
		{"a bad element", `{"changes":[{"op":"remove_groups","group":"g","groups":[1]}]}`, 400, "invalid_groups", "changes element 0: groups element 0: got a number"},
		{"a bad group id", `{"changes":[{"op":"add","group":"g","users":[1]},{"op":"replace_groups","group":"g","groups":[""]}]}`, 400, "invalid_groups", "group id is empty"},
		{"itself", `{"changes":[{"op":"add_groups","group":"g","groups":["g"]}]}`, 409, "cycle", "adding g to g makes a cycle"},
		{"too many in all", `{"changes":[{"op":"add","group":"g","users":[1,2,3]},{"op":"add_groups","group":"h","groups":["a","b","c"]}]}`, 413, "too_many_users", "the batch names more than 5 users and groups in all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newTestHandler(t)
			w := sendTo(h, "POST", "/batch", tt.body, map[string]string{"Content-Type": jsonType})
			require.Equal(t, tt.wantStatus, w.Code, w.Body.String())
			code, message := errorOf(w)
			assert.Equal(t, tt.wantCode, code)
			assert.Contains(t, message, tt.wantMessage)
		})
	}
}
