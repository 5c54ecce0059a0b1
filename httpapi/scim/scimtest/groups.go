package scimtest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
)

func testGroups(t *testing.T, s *server) {
	alice := s.createUser("alice", "Alice")
	created := s.must(http.StatusCreated, "POST", "/scim/v2/Groups", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:Group"],
		"displayName":"Eng/Ops","externalId":"g-1","members":[{"value":"`+alice+`","display":"ignored"},{"value":"9"}]}`)
	assert.Equal(t, "Eng/Ops", str(created.json, "id"), "the display name is the id")
	assert.Equal(t, "http://example.com/scim/v2/Groups/Eng%2FOps", created.header.Get("Location"))
	assert.Equal(t, []any{map[string]any{"value": alice, "display": "Alice"}, map[string]any{"value": "9"}}, created.json["members"])
	assert.Equal(t, []membership.Member{{UID: 1, Nickname: "Alice"}, {UID: 9}}, s.members("Eng/Ops"), "the service's own list")
	got := s.must(http.StatusOK, "GET", "/scim/v2/Groups/Eng%2FOps", "")
	assert.Equal(t, created.json, got.json)
	assert.Equal(t, created.header.Get("Etag"), str(got.json, "meta", "version"))
	noMembers := s.must(http.StatusOK, "GET", "/scim/v2/Groups/Eng%2FOps?excludedAttributes=members", "").json
	assert.NotContains(t, noMembers, "members")

	// Another group of the same name takes the next free id; an empty
	// group exists.
	second := s.must(http.StatusCreated, "POST", "/scim/v2/Groups", `{"displayName":"Eng/Ops"}`)
	assert.Equal(t, "Eng/Ops-2", str(second.json, "id"))
	assert.Equal(t, []any{}, second.json["members"])
	scimError(t, s.do("POST", "/scim/v2/Groups", `{"externalId":"no name"}`), http.StatusBadRequest, "invalidValue")
	scimError(t, s.do("POST", "/scim/v2/Groups", `{"displayName":"x","members":[{"value":"abc"}]}`), http.StatusBadRequest, "invalidValue")
	scimError(t, s.do("POST", "/scim/v2/Groups", `{"displayName":"x","members":[{"value":"1","VALUE":"2"}]}`), http.StatusBadRequest, "invalidSyntax")
	scimError(t, s.do("POST", "/scim/v2/Groups", `{"displayName":"x","members":{"value":"1","Value":"2"}}`), http.StatusBadRequest, "invalidSyntax")
	scimError(t, s.do("POST", "/scim/v2/Groups", `{"displayName":"x","members":["1"]}`), http.StatusBadRequest, "invalidValue")
	scimError(t, s.do("POST", "/scim/v2/Groups", `{"displayName":"x","members":[{"value":"1"}]}`, "Idempotency-Key", "k"), http.StatusBadRequest, "invalidValue")
	rev := s.latest()
	for _, name := range []string{strings.Repeat("x", 257), `a\u000ab`} {
		scimError(t, s.do("POST", "/scim/v2/Groups", `{"displayName":"`+name+`"}`), http.StatusBadRequest, "invalidValue")
		scimError(t, s.do("PUT", "/scim/v2/Groups/Eng%2FOps", `{"displayName":"`+name+`"}`), http.StatusBadRequest, "invalidValue")
	}
	scimError(t, s.do("POST", "/scim/v2/Groups", `{"displayName":"x","externalId":"`+strings.Repeat("x", 257)+`"}`), http.StatusBadRequest, "invalidValue")
	assert.Empty(t, s.feedSince(rev), "a displayName or an externalId past its bounds changes nothing")

	// Renaming changes neither the id nor the members; PUT leaves the
	// members when it names none, and replaces them when it does.
	put := s.must(http.StatusOK, "PUT", "/scim/v2/Groups/Eng%2FOps", `{"id":"Eng/Ops","displayName":"Platform"}`)
	assert.Equal(t, "Platform", put.json["displayName"])
	assert.Equal(t, "Eng/Ops", put.json["id"])
	assert.NotContains(t, put.json, "externalId", "cleared")
	assert.Equal(t, []membership.UID{1, 9}, uids(s.members("Eng/Ops")))
	s.must(http.StatusOK, "PUT", "/scim/v2/Groups/Eng%2FOps", `{"displayName":"Platform","members":[{"value":"9"},{"value":"10"}]}`)
	assert.Equal(t, []membership.UID{9, 10}, uids(s.members("Eng/Ops")))
	scimError(t, s.do("PUT", "/scim/v2/Groups/Eng%2FOps", `{"id":"other","displayName":"x"}`), http.StatusBadRequest, "mutability")
	scimError(t, s.do("PUT", "/scim/v2/Groups/nope", `{"displayName":"x"}`), http.StatusNotFound, "")

	s.must(http.StatusNoContent, "DELETE", "/scim/v2/Groups/Eng%2FOps", "")
	assert.Empty(t, s.members("Eng/Ops"))
	scimError(t, s.do("GET", "/scim/v2/Groups/Eng%2FOps", ""), http.StatusNotFound, "")
	scimError(t, s.do("DELETE", "/scim/v2/Groups/Eng%2FOps", ""), http.StatusNotFound, "")
	scimError(t, s.do("GET", "/scim/v2/Groups/"+strings.Repeat("x", 300), ""), http.StatusNotFound, "")

	// Nested groups are not members.
	_, err := s.svc.Write(t.Context(), membership.Write{Op: membership.OpAddGroups, GroupID: "Eng/Ops-2", Subgroups: []membership.Subgroup{{GroupID: "sub"}}})
	require.NoError(t, err)
	assert.Equal(t, []any{}, s.must(http.StatusOK, "GET", "/scim/v2/Groups/Eng%2FOps-2", "").json["members"])
}

func testGroupPatches(t *testing.T, s *server) {
	s.must(http.StatusCreated, "POST", "/scim/v2/Groups", `{"displayName":"g","externalId":"x","members":[{"value":"1"},{"value":"2"},{"value":"3"}]}`)
	path := "/scim/v2/Groups/g"
	for _, tt := range []struct {
		name  string
		ops   []string
		want  []membership.UID
		attrs account.GroupAttributes
	}{
		{"add, Okta's", []string{`{"op":"add","path":"members","value":[{"value":"4","display":"d"},{"value":"5"}]}`},
			[]membership.UID{1, 2, 3, 4, 5}, account.GroupAttributes{DisplayName: "g", ExternalID: "x"}},
		{"remove with a value removes only those, Entra ID's", []string{`{"op":"Remove","path":"members","value":[{"$ref":null,"value":"2"}]}`},
			[]membership.UID{1, 3, 4, 5}, account.GroupAttributes{DisplayName: "g", ExternalID: "x"}},
		{"remove of members[value eq], Okta's", []string{`{"op":"remove","path":"members[value eq \"4\"]"}`},
			[]membership.UID{1, 3, 5}, account.GroupAttributes{DisplayName: "g", ExternalID: "x"}},
		{"replace of displayName", []string{`{"op":"Replace","path":"displayName","value":"Gee"}`},
			[]membership.UID{1, 3, 5}, account.GroupAttributes{DisplayName: "Gee", ExternalID: "x"}},
		{"several attributes without a path, Okta's with the id", []string{`{"op":"replace","value":{"id":"g","displayName":"G2","externalId":"y"}}`},
			[]membership.UID{1, 3, 5}, account.GroupAttributes{DisplayName: "G2", ExternalID: "y"}},
		{"members without a path", []string{`{"op":"add","value":{"members":[{"value":"6"}]}}`},
			[]membership.UID{1, 3, 5, 6}, account.GroupAttributes{DisplayName: "G2", ExternalID: "y"}},
		{"in order: an add then its remove, a remove then its add", []string{`{"op":"add","path":"members","value":[{"value":"7"}]}`,
			`{"op":"remove","path":"members[value eq \"7\"]"}`, `{"op":"remove","path":"members","value":[{"value":"1"}]}`,
			`{"op":"add","path":"members","value":[{"value":"1"}]}`},
			[]membership.UID{1, 3, 5, 6}, account.GroupAttributes{DisplayName: "G2", ExternalID: "y"}},
		{"replace of members", []string{`{"op":"replace","path":"members","value":[{"value":"8"},{"value":"9"}]}`, `{"op":"add","path":"members","value":[{"value":"10"}]}`},
			[]membership.UID{8, 9, 10}, account.GroupAttributes{DisplayName: "G2", ExternalID: "y"}},
		{"remove of externalId", []string{`{"op":"remove","path":"externalId"}`},
			[]membership.UID{8, 9, 10}, account.GroupAttributes{DisplayName: "G2"}},
		{"remove of members without a value empties the group, which stays", []string{`{"op":"remove","path":"members"}`},
			[]membership.UID{}, account.GroupAttributes{DisplayName: "G2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rev := s.latest()
			rep := s.must(http.StatusNoContent, "PATCH", path, patchOps(tt.ops...))
			assert.Empty(t, rep.body)
			assert.Equal(t, tt.want, uids(s.members("g")))
			g, err := s.dir.Group(t.Context(), "g", nil)
			require.NoError(t, err)
			assert.Equal(t, tt.attrs, g.Attributes)
			assert.LessOrEqual(t, len(s.feedSince(rev)), 1, "a PATCH is one change")
		})
	}
	answered := s.must(http.StatusOK, "PATCH", path+"?excludedAttributes=members", patchOps(`{"op":"replace","path":"displayName","value":"G3"}`))
	assert.Equal(t, "G3", answered.json["displayName"], "asked for attributes, it answers the group")

	// Many operations, one revision; one bad operation, nothing.
	var ops []string
	for uid := 100; uid < 300; uid++ {
		ops = append(ops, fmt.Sprintf(`{"op":"add","path":"members","value":[{"value":"%d"}]}`, uid))
	}
	rev := s.latest()
	s.must(http.StatusNoContent, "PATCH", path, patchOps(append(ops, `{"op":"replace","path":"displayName","value":"many"}`)...))
	changes := s.feedSince(rev)
	require.Len(t, changes, 1)
	assert.Equal(t, membership.OpBatch, changes[0].Op)
	assert.Len(t, s.members("g"), 200)
	rev = s.latest()
	for _, bad := range []string{
		`{"op":"add","path":"members","value":[{"value":"abc"}]}`,
		`{"op":"add","path":"members","value":[{"value":"0"}]}`,
		`{"op":"add","path":"members","value":"42"}`,
		`{"op":"remove","path":"displayName"}`,
		`{"op":"replace","value":{"id":"other"}}`,
		`{"op":"add","path":"members[value eq \"5\"]","value":[{"value":"5"}]}`,
		`{"op":"remove","path":"members[display eq \"x\"]"}`,
		`{"op":"replace","path":"displayName","value":""}`,
	} {
		rep := s.do("PATCH", path, patchOps(append(ops[:3:3], bad)...))
		require.Equal(t, http.StatusBadRequest, rep.status, "%s: %s", bad, rep.body)
		assert.Empty(t, s.feedSince(rev), "%s changed nothing", bad)
	}
	scimError(t, s.do("PATCH", "/scim/v2/Groups/none", patchOps(ops[0])), http.StatusNotFound, "")
}
