package scimtest

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi/scim"
	"example.com/groupmembership/membership"
)

func testDiscovery(t *testing.T, s *server) {
	spc := s.must(http.StatusOK, "GET", "/scim/v2/ServiceProviderConfig", "").json
	assert.Equal(t, map[string]any{"supported": true}, spc["patch"])
	assert.Equal(t, false, spc["bulk"].(map[string]any)["supported"])
	assert.Equal(t, map[string]any{"supported": true, "maxResults": float64(1000)}, spc["filter"])
	assert.Equal(t, map[string]any{"supported": true}, spc["etag"])
	assert.Equal(t, map[string]any{"supported": false}, spc["sort"])
	assert.Equal(t, "oauthbearertoken", str(spc["authenticationSchemes"].([]any)[0], "type"))

	types := s.must(http.StatusOK, "GET", "/scim/v2/ResourceTypes", "").json
	assert.Equal(t, float64(2), types["totalResults"])
	user := s.must(http.StatusOK, "GET", "/scim/v2/ResourceTypes/User", "").json
	assert.Equal(t, "/Users", user["endpoint"])
	assert.Equal(t, "urn:ietf:params:scim:schemas:core:2.0:User", user["schema"])
	scimError(t, s.do("GET", "/scim/v2/ResourceTypes/Role", ""), http.StatusNotFound, "")

	schemas := s.must(http.StatusOK, "GET", "/scim/v2/Schemas", "").json
	assert.Equal(t, float64(2), schemas["totalResults"])
	group := s.must(http.StatusOK, "GET", "/scim/v2/Schemas/urn:ietf:params:scim:schemas:core:2.0:Group", "").json
	attrs := map[string]bool{}
	for _, a := range group["attributes"].([]any) {
		attrs[str(a, "name")] = true
	}
	assert.Equal(t, map[string]bool{"displayName": true, "members": true}, attrs)
	// caseExact as RFC 7643's core schemas have it, but for a group's
	// displayName, which the service compares exactly.
	assert.Equal(t, map[string]any{
		"userName": false, "name.givenName": false, "name.familyName": false, "displayName": false,
		"emails.value": false, "emails.type": false,
	}, caseExact(s.must(http.StatusOK, "GET", "/scim/v2/Schemas/urn:ietf:params:scim:schemas:core:2.0:User", "").json))
	assert.Equal(t, map[string]any{"displayName": true, "members.value": false, "members.display": false}, caseExact(group))
	scimError(t, s.do("GET", "/scim/v2/Schemas/urn:nope", ""), http.StatusNotFound, "")
	scimError(t, s.do("GET", "/scim/v2/ServiceProviderConfig?x=1", ""), http.StatusBadRequest, "invalidValue")
}

func testUsers(t *testing.T, s *server) {
	// A uid in use by a membership alone is not free: the new user gets
	// the next.
	_, err := s.svc.Write(t.Context(), membership.Write{Op: membership.OpAdd, GroupID: "old", Users: []membership.User{{UID: 41}}})
	require.NoError(t, err)
	created := s.must(http.StatusCreated, "POST", "/scim/v2/Users", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],
		"userName":"alice@example.com","externalId":"00u1","displayName":"Alice","name":{"givenName":"Alice","familyName":"Liddell","formatted":"ignored"},
		"emails":[{"value":"home@example.com","type":"home"},{"value":"alice@example.com","type":"work","primary":true}],
		"active":true,"password":"ignored","title":"ignored","urn:ietf:params:scim:schemas:extension:enterprise:2.0:User":{"department":"ignored"}}`)
	assert.Equal(t, "42", str(created.json, "id"), "the next free uid")
	assert.Equal(t, "http://example.com/scim/v2/Users/42", created.header.Get("Location"))
	assert.Equal(t, created.header.Get("Etag"), str(created.json, "meta", "version"))
	assert.Equal(t, map[string]any{"givenName": "Alice", "familyName": "Liddell"}, created.json["name"])
	assert.Equal(t, []any{map[string]any{"value": "alice@example.com", "type": "work", "primary": true}}, created.json["emails"])
	assert.Equal(t, "User", str(created.json, "meta", "resourceType"))
	assert.NotEmpty(t, str(created.json, "meta", "created"))
	assert.NotContains(t, created.json, "password")

	got := s.must(http.StatusOK, "GET", "/scim/v2/Users/42", "")
	assert.Equal(t, created.json, got.json)
	s.must(http.StatusCreated, "POST", "/scim/v2/Users", `{"userName":"bob"}`)
	scimError(t, s.do("POST", "/scim/v2/Users", `{"userName":"ALICE@Example.com"}`), http.StatusConflict, "uniqueness")
	scimError(t, s.do("POST", "/scim/v2/Users", `{"displayName":"No Name"}`), http.StatusBadRequest, "invalidValue")
	scimError(t, s.do("GET", "/scim/v2/Users/41", ""), http.StatusNotFound, "")
	scimError(t, s.do("GET", "/scim/v2/Users/x", ""), http.StatusNotFound, "")

	// displayName is the user's nickname on every route.
	_, err = s.svc.Write(t.Context(), membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 42}}})
	require.NoError(t, err)
	assert.Equal(t, []membership.Member{{UID: 42, Nickname: "Alice"}}, s.members("g"))
	_, err = s.svc.Write(t.Context(), membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 42, Nickname: "Ally", HasNickname: true}}})
	require.NoError(t, err)
	assert.Equal(t, "Ally", str(s.must(http.StatusOK, "GET", "/scim/v2/Users/42", "").json, "displayName"), "a nickname set elsewhere")

	// PUT replaces: what it leaves out is cleared, but active.
	s.must(http.StatusOK, "PATCH", "/scim/v2/Users/42", patchOps(`{"op":"replace","path":"active","value":false}`))
	put := s.must(http.StatusOK, "PUT", "/scim/v2/Users/42", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"id":"42","userName":"alice@example.com","displayName":"Alice L"}`)
	assert.Equal(t, false, put.json["active"], "kept")
	assert.NotContains(t, put.json, "name")
	assert.NotContains(t, put.json, "emails")
	assert.NotContains(t, put.json, "externalId")
	scimError(t, s.do("PUT", "/scim/v2/Users/77", `{"userName":"nobody"}`), http.StatusNotFound, "")
	scimError(t, s.do("PUT", "/scim/v2/Users/42", `{"userName":"BOB"}`), http.StatusConflict, "uniqueness")

	// A user in no group keeps its account and its nickname; DELETE
	// removes both, and the user from every group.
	s.must(http.StatusOK, "PATCH", "/scim/v2/Users/42", patchOps(`{"op":"replace","path":"active","value":true}`))
	_, err = s.svc.Write(t.Context(), membership.Write{Op: membership.OpAdd, GroupID: "h", Users: []membership.User{{UID: 42}}})
	require.NoError(t, err)
	s.must(http.StatusNoContent, "DELETE", "/scim/v2/Users/42", "")
	assert.Empty(t, s.groupsOf(42))
	scimError(t, s.do("GET", "/scim/v2/Users/42", ""), http.StatusNotFound, "")
	scimError(t, s.do("DELETE", "/scim/v2/Users/42", ""), http.StatusNotFound, "")
	scimError(t, s.do("DELETE", "/scim/v2/Users/0", ""), http.StatusNotFound, "")
}

func testUserPatches(t *testing.T, s *server) {
	id := s.createUser("carol", "Carol")
	path := "/scim/v2/Users/" + id
	for _, tt := range []struct {
		name  string
		ops   []string
		check func(t *testing.T, u map[string]any)
	}{
		{"replace of one attribute, Entra ID's op in its case", []string{`{"op":"Replace","path":"userName","value":"carol@example.com"}`},
			func(t *testing.T, u map[string]any) { assert.Equal(t, "carol@example.com", u["userName"]) }},
		{"Entra ID's work email and family name", []string{`{"op":"Replace","path":"emails[type eq \"work\"].value","value":"c@example.com"}`,
			`{"op":"Replace","path":"name.familyName","value":"Danvers"}`},
			func(t *testing.T, u map[string]any) {
				assert.Equal(t, "c@example.com", str(u["emails"].([]any)[0], "value"))
				assert.Equal(t, "Danvers", str(u, "name", "familyName"))
			}},
		{"several attributes without a path, dotted names too", []string{`{"op":"replace","value":{"displayName":"C. D.","name.givenName":"Carol","externalId":"x-1"}}`},
			func(t *testing.T, u map[string]any) {
				assert.Equal(t, "C. D.", u["displayName"])
				assert.Equal(t, "Carol", str(u, "name", "givenName"))
				assert.Equal(t, "x-1", u["externalId"])
			}},
		{"add of a complex attribute", []string{`{"op":"add","path":"name","value":{"givenName":"Caz","familyName":"D"}}`},
			func(t *testing.T, u map[string]any) {
				assert.Equal(t, map[string]any{"givenName": "Caz", "familyName": "D"}, u["name"])
			}},
		{"replace of a complex attribute leaves the sub-attributes it does not name", []string{`{"op":"replace","path":"name","value":{"familyName":"E"}}`},
			func(t *testing.T, u map[string]any) {
				assert.Equal(t, map[string]any{"givenName": "Caz", "familyName": "E"}, u["name"], "RFC 7644 3.5.2.3")
			}},
		{"and without a path", []string{`{"op":"Replace","value":{"name":{"familyName":"D"}}}`},
			func(t *testing.T, u map[string]any) {
				assert.Equal(t, map[string]any{"givenName": "Caz", "familyName": "D"}, u["name"])
			}},
		{"Okta's deactivation, a value without a path", []string{`{"op":"replace","value":{"active":false}}`},
			func(t *testing.T, u map[string]any) { assert.Equal(t, false, u["active"]) }},
		{"Entra ID's boolean as a string", []string{`{"op":"Replace","path":"active","value":"True"}`},
			func(t *testing.T, u map[string]any) { assert.Equal(t, true, u["active"]) }},
		{"removes", []string{`{"op":"remove","path":"externalId"}`, `{"op":"Remove","path":"emails[type eq \"work\"].value"}`, `{"op":"remove","path":"name.givenName"}`},
			func(t *testing.T, u map[string]any) {
				assert.NotContains(t, u, "externalId")
				assert.NotContains(t, u, "emails")
				assert.Equal(t, map[string]any{"familyName": "D"}, u["name"])
			}},
		{"an attribute the service does not keep is ignored", []string{`{"op":"replace","path":"title","value":"Boss"}`,
			`{"op":"add","path":"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department","value":"R&D"}`},
			func(t *testing.T, u map[string]any) { assert.NotContains(t, u, "title") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep := s.must(http.StatusOK, "PATCH", path, patchOps(tt.ops...))
			tt.check(t, rep.json)
			assert.Equal(t, rep.json, s.must(http.StatusOK, "GET", path, "").json, "as written")
		})
	}
	testRefusedUserPatches(t, s, path)
	s.createUser("dave", "")
	scimError(t, s.do("PATCH", path, patchOps(`{"op":"replace","path":"userName","value":"DAVE"}`)), http.StatusConflict, "uniqueness")
	scimError(t, s.do("PATCH", "/scim/v2/Users/999", patchOps(`{"op":"replace","path":"displayName","value":"x"}`)), http.StatusNotFound, "")
}

// testRefusedUserPatches checks that each bad PATCH of the user at path is
// refused with its scimType and changes nothing.
func testRefusedUserPatches(t *testing.T, s *server, path string) {
	before := s.must(http.StatusOK, "GET", path, "").json
	for _, tt := range []struct {
		name, body, scimType string
	}{
		{"an unknown op", patchOps(`{"op":"move","path":"userName","value":"x"}`), "invalidValue"},
		{"a remove without a path", patchOps(`{"op":"remove"}`), "noTarget"},
		{"an add without a value", patchOps(`{"op":"add","path":"displayName"}`), "invalidValue"},
		{"removing userName", patchOps(`{"op":"remove","path":"userName"}`), "mutability"},
		{"a userName not a string", patchOps(`{"op":"replace","path":"userName","value":7}`), "invalidValue"},
		{"active not a boolean", patchOps(`{"op":"replace","path":"active","value":"maybe"}`), "invalidValue"},
		{"no operations", `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],"Operations":[]}`, "invalidValue"},
		{"another message's schema", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"Operations":[{"op":"add","path":"displayName","value":"x"}]}`, "invalidValue"},
		{"a good operation before a bad one", patchOps(`{"op":"replace","path":"displayName","value":"Changed"}`, `{"op":"replace","path":"userName","value":""}`), "invalidValue"},
		{"more operations than the most", patchOps(slices.Repeat([]string{`{"op":"replace","path":"displayName","value":"Changed"}`}, scim.MaxPatchOperations+1)...), "invalidValue"},
		{"a name twice inside name", patchOps(`{"op":"replace","path":"name","value":{"givenName":"a","GivenName":"b"}}`), "invalidSyntax"},
		{"a name twice in a value without a path", patchOps(`{"op":"replace","value":{"displayName":"a","DisplayName":"b"}}`), "invalidSyntax"},
		{"a value without a path not an object", patchOps(`{"op":"replace","value":"a"}`), "invalidValue"},
		{"a replace of id", patchOps(`{"op":"replace","path":"id","value":"77"}`), "mutability"},
		{"a replace of id without a path", patchOps(`{"op":"replace","value":{"id":"77","displayName":"Changed"}}`), "mutability"},
		{"a user name too long", patchOps(`{"op":"replace","path":"userName","value":"` + strings.Repeat("x", 257) + `"}`), "invalidValue"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			scimError(t, s.do("PATCH", path, tt.body), http.StatusBadRequest, tt.scimType)
			assert.Equal(t, before, s.must(http.StatusOK, "GET", path, "").json, "nothing changed")
		})
	}
}

// caseExact returns the caseExact of each attribute of a schema that has
// one (a string's), by its path.
func caseExact(schema map[string]any) map[string]any {
	out := map[string]any{}
	var walk func(prefix string, attrs []any)
	walk = func(prefix string, attrs []any) {
		for _, a := range attrs {
			attr := a.(map[string]any)
			if c, ok := attr["caseExact"]; ok {
				out[prefix+str(attr, "name")] = c
			}
			if subs, ok := attr["subAttributes"].([]any); ok {
				walk(prefix+str(attr, "name")+".", subs)
			}
		}
	}
	walk("", schema["attributes"].([]any))
	return out
}
