package decode

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

func TestParseSubgroupsAcceptsEveryElementForm(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		groups string
		want   []membership.Subgroup
	}{
		{"empty array", `[]`, []membership.Subgroup{}},
		{"a group id", `["backend"]`, []membership.Subgroup{{GroupID: "backend"}}},
		{"an object", `[{"group":"backend"}]`, []membership.Subgroup{{GroupID: "backend"}}},
		{"with a ttl", `[{"group":"b","ttl":"4h"}]`, []membership.Subgroup{{GroupID: "b", Expiry: membership.Expiry{Set: true, TTL: 4 * time.Hour}}}},
		{"with expires, keys in any order", `[{"expires":"2026-12-01T01:00:00+01:00","group":"b"}]`,
			[]membership.Subgroup{{GroupID: "b", Expiry: membership.Expiry{Set: true, At: at}}}},
		{"expires null makes it permanent", `[{"group":"b","expires":null}]`, []membership.Subgroup{{GroupID: "b", Expiry: membership.Expiry{Set: true}}}},
		{"escapes and spaces", " [ \"a\\u00e9\" , {\"group\" : \"x/y\"} ] ", []membership.Subgroup{{GroupID: "aé"}, {GroupID: "x/y"}}},
		{"ids are the service's to check", `[""]`, []membership.Subgroup{{GroupID: ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSubgroups(tt.groups, 3)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseSubgroupsRejectsBadInput(t *testing.T) {
	tests := []struct {
		name     string
		groups   string
		wantCode membership.Code
		wantMsg  string // a part of the message that names the problem
	}{
		{"not JSON", `hello`, membership.CodeInvalidGroups, "groups is not a JSON array"},
		{"an object, not an array", `{"group":"a"}`, membership.CodeInvalidGroups, "groups is not a JSON array"},
		{"unclosed array", `["a"`, membership.CodeInvalidGroups, "not closed"},
		{"trailing data", `["a"] x`, membership.CodeInvalidGroups, "after the array"},
		{"a number", `["a",7]`, membership.CodeInvalidGroups, `groups element 1: got a number, want a group id (a string) or {"group": "group id"}`},
		{"null", `[null]`, membership.CodeInvalidGroups, "element 0: got null"},
		{"a list", `[["a"]]`, membership.CodeInvalidGroups, "element 0: got a list"},
		{"object without group", `[{"ttl":"4h"}]`, membership.CodeInvalidGroups, `element 0: the object has no "group"`},
		{"empty object", `[{}]`, membership.CodeInvalidGroups, `has no "group"`},
		{"group is a number", `[{"group":7}]`, membership.CodeInvalidGroups, "got a number, want a string group id"},
		{"unknown key", `[{"group":"a","uid":1}]`, membership.CodeInvalidGroups, `unknown key "uid": only "group", "expires" and "ttl" are allowed`},
		{"repeated group key", `[{"group":"a","group":"b"}]`, membership.CodeInvalidGroups, `"group" appears twice`},
		{"repeated ttl key", `[{"group":"a","ttl":"1h","ttl":"2h"}]`, membership.CodeInvalidGroups, `"ttl" appears twice`},
		{"repeated expires key", `[{"group":"a","expires":null,"expires":null}]`, membership.CodeInvalidGroups, `"expires" appears twice`},
		{"both expiries", `[{"group":"a","ttl":"1h","expires":"2030-01-01T00:00:00Z"}]`, membership.CodeInvalidGroups, `"expires" and "ttl" are both given`},
		{"bad ttl", `[{"group":"a","ttl":"1d"}]`, membership.CodeInvalidGroups, `ttl "1d" is not a duration`},
		{"ttl a number", `[{"group":"a","ttl":3600}]`, membership.CodeInvalidGroups, "got a number, want a duration"},
		{"ttl too short", `[{"group":"a","ttl":"1us"}]`, membership.CodeInvalidGroups, "not at least 1ms"},
		{"bad expires", `[{"group":"a","expires":"tomorrow"}]`, membership.CodeInvalidGroups, `expires "tomorrow" is not an RFC 3339 time`},
		{"not UTF-8", "[\"a\xffb\"]", membership.CodeInvalidGroups, "not valid UTF-8"},
		{"lone surrogate", `["\ud800"]`, membership.CodeInvalidGroups, "lone surrogate"},
		{"unquoted key", `[{group:"a"}]`, membership.CodeInvalidGroups, "want a quoted key"},
		{"missing colon", `[{"group" "a"}]`, membership.CodeInvalidGroups, `want : after key "group"`},
		{"missing comma in an object", `[{"group":"a" "ttl":"1h"}]`, membership.CodeInvalidGroups, "want , or } in element 0"},
		{"error names the element", `["a","b",{}]`, membership.CodeInvalidGroups, "element 2:"},
		{"too many groups", `["a","b","c","d"]`, membership.CodeTooManyGroups, "groups has more than 3 elements"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSubgroups(tt.groups, 3)
			require.Error(t, err)
			assert.Nil(t, got)
			assert.Equal(t, tt.wantCode, membership.ErrorCode(err))
			assert.Contains(t, membership.ErrorMessage(err), tt.wantMsg)
		})
	}
}

func TestParseSubgroupsCopiesIDsOutOfTheInput(t *testing.T) {
	body := []byte(`["backend",{"group":"frontend"}]`)
	got, err := ParseSubgroups(unsafe.String(unsafe.SliceData(body), len(body)), 10)
	require.NoError(t, err)
	for i := range body {
		body[i] = 'x'
	}
	assert.Equal(t, "backend", got[0].GroupID)
	assert.Equal(t, "frontend", got[1].GroupID)
}

func TestParseChangeBodiesOfGroups(t *testing.T) {
	tests := []struct {
		name, body string
		json       bool
		wantList   string
		wantUID    string
		wantErr    string // a part of the message, "" for none
	}{
		{"form", `groups=%5B%22a%22%5D&uid=7`, false, `["a"]`, "7", ""},
		{"form without uid", `groups=["a"]`, false, `["a"]`, "", ""},
		{"form with users", `users=[1]`, false, "", "", `unknown parameter "users": the body takes only groups and uid`},
		{"form with groups twice", `groups=[]&groups=[]`, false, "", "", "the parameter groups is given 2 times"},
		{"json", `{"groups":["a"],"uid":"7"}`, true, `["a"]`, "7", ""},
		{"json with users", `{"users":[1]}`, true, "", "", `unknown field "users": the body takes only "groups" and "uid"`},
		{"json spelt otherwise", `{"Groups":["a"]}`, true, "", "", `unknown field "Groups"`},
		{"json groups twice", `{"groups":[],"groups":[]}`, true, "", "", `the key "groups" is given twice`},
		{"json not an object", `["a"]`, true, "", "", `the body is not a JSON object: send an object with groups, and uid if you like, such as {"groups":["backend"]}`},
		{"json malformed", `{"groups":`, true, "", "", "the body is not a JSON object with groups and uid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parse := ParseChangeForm
			if tt.json {
				parse = ParseChangeJSON
			}
			list, uid, err := parse(tt.body, "groups")
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, membership.CodeInvalidBody, membership.ErrorCode(err))
				assert.Contains(t, membership.ErrorMessage(err), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantList, list)
			assert.Equal(t, tt.wantUID, uid)
		})
	}
}

func TestParseChecksTakesTransitive(t *testing.T) {
	tests := []struct {
		name, body     string
		wantTransitive bool
		wantErr        string
	}{
		{"absent", `{"checks":[{"group":"g","uid":1}]}`, false, ""},
		{"true", `{"checks":[{"group":"g","uid":1}],"transitive":true}`, true, ""},
		{"true first", `{"transitive":true,"checks":[]}`, true, ""},
		{"false", `{"checks":[],"transitive":false}`, false, ""},
		{"a string", `{"checks":[],"transitive":"true"}`, false, "transitive is not true or false"},
		{"null", `{"checks":[],"transitive":null}`, false, "transitive is not true or false"},
		{"twice", `{"transitive":true,"checks":[],"transitive":true}`, false, `the key "transitive" is given twice`},
		{"alone", `{"transitive":true}`, false, `the body has no "checks"`},
		{"another key", `{"checks":[],"deep":true}`, false, `unknown field "deep": the body takes only "checks" and "transitive"`},
		{"no comma", `{"checks":[] "transitive":true}`, false, "want , or } after a value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := ParseChecks(tt.body, 10)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Equal(t, membership.CodeInvalidBody, membership.ErrorCode(err))
				assert.Contains(t, membership.ErrorMessage(err), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantTransitive, req.Transitive)
		})
	}
}
