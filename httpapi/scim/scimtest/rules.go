package scimtest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// active false removes the user from every group, in one change, and
// keeps it out of every group, on every route, until it is active again.
func testDeactivation(t *testing.T, s *server) {
	id := s.createUser("erin", "Erin")
	for _, g := range []string{"a", "b"} {
		s.must(http.StatusCreated, "POST", "/scim/v2/Groups", `{"displayName":"`+g+`","members":[{"value":"`+id+`"},{"value":"50"}]}`)
	}
	rev := s.latest()
	s.must(http.StatusOK, "PATCH", "/scim/v2/Users/"+id, patchOps(`{"op":"replace","path":"active","value":false}`))
	assert.Empty(t, s.groupsOf(1))
	assert.Equal(t, []membership.UID{50}, uids(s.members("a")))
	changes := s.feedSince(rev)
	require.Len(t, changes, 1, "one change")
	assert.Equal(t, membership.OpSetUser, changes[0].Op)
	assert.False(t, changes[0].Account.Active)

	for _, w := range []membership.Write{
		{Op: membership.OpAdd, GroupID: "a", Users: []membership.User{{UID: 1}}},
		{Op: membership.OpReplace, GroupID: "a", Users: []membership.User{{UID: 1}, {UID: 50}}},
	} {
		_, err := s.svc.Write(t.Context(), w)
		assert.Equal(t, membership.CodeInactiveUser, membership.ErrorCode(err), "%s on the other routes", w.Op)
	}
	_, err := s.svc.Batch(t.Context(), membership.Batch{Writes: []membership.Write{{Op: membership.OpAdd, GroupID: "c", Users: []membership.User{{UID: 1}}}}})
	assert.Equal(t, membership.CodeInactiveUser, membership.ErrorCode(err), "in a batch")
	scimError(t, s.do("PATCH", "/scim/v2/Groups/a", patchOps(`{"op":"add","path":"members","value":[{"value":"`+id+`"},{"value":"51"}]}`)),
		http.StatusBadRequest, "invalidValue")
	assert.Equal(t, []membership.UID{50}, uids(s.members("a")), "nothing changed")
	scimError(t, s.do("POST", "/scim/v2/Groups", `{"displayName":"c","members":[{"value":"`+id+`"}]}`), http.StatusBadRequest, "invalidValue")
	assert.Equal(t, "Erin", str(s.must(http.StatusOK, "GET", "/scim/v2/Users/"+id, "").json, "displayName"), "the account keeps its nickname")

	s.must(http.StatusOK, "PATCH", "/scim/v2/Users/"+id, patchOps(`{"op":"replace","value":{"active":true}}`))
	assert.Empty(t, s.groupsOf(1), "activation brings no membership back")
	s.must(http.StatusNoContent, "PATCH", "/scim/v2/Groups/a", patchOps(`{"op":"add","path":"members","value":[{"value":"`+id+`"}]}`))
	assert.Equal(t, []membership.Member{{UID: 1, Nickname: "Erin"}, {UID: 50}}, s.members("a"))
}

// meta.version is the ETag: If-Match on PUT, PATCH and DELETE takes it,
// and refuses an older one with 412, changing nothing.
func testVersions(t *testing.T, s *server) {
	id := s.createUser("fay", "")
	v1 := str(s.must(http.StatusOK, "GET", "/scim/v2/Users/"+id, "").json, "meta", "version")
	v2 := str(s.must(http.StatusOK, "PATCH", "/scim/v2/Users/"+id, patchOps(`{"op":"replace","path":"displayName","value":"Fay"}`), "If-Match", v1).json, "meta", "version")
	assert.NotEqual(t, v1, v2)
	for _, rep := range []reply{
		s.do("PATCH", "/scim/v2/Users/"+id, patchOps(`{"op":"replace","path":"displayName","value":"X"}`), "If-Match", v1),
		s.do("PUT", "/scim/v2/Users/"+id, `{"userName":"fay"}`, "If-Match", v1),
		s.do("DELETE", "/scim/v2/Users/"+id, "", "If-Match", v1),
	} {
		scimError(t, rep, http.StatusPreconditionFailed, "")
		assert.Contains(t, rep.json["detail"], "the User is not", "a User's 412 names the User")
	}
	assert.Equal(t, "Fay", str(s.must(http.StatusOK, "GET", "/scim/v2/Users/"+id, "").json, "displayName"))
	scimError(t, s.do("PATCH", "/scim/v2/Users/"+id, patchOps(`{"op":"replace","path":"displayName","value":"X"}`), "If-Match", `"bad`), http.StatusBadRequest, "invalidSyntax")
	s.must(http.StatusNoContent, "DELETE", "/scim/v2/Users/"+id, "", "If-Match", v2)

	created := s.must(http.StatusCreated, "POST", "/scim/v2/Groups", `{"displayName":"v"}`)
	g1 := created.header.Get("Etag")
	g2 := s.must(http.StatusOK, "PATCH", "/scim/v2/Groups/v?attributes=displayName", patchOps(`{"op":"add","path":"members","value":[{"value":"3"}]}`), "If-Match", g1).header.Get("Etag")
	assert.NotEqual(t, g1, g2, "a member added moves the version")
	for _, rep := range []reply{
		s.do("PATCH", "/scim/v2/Groups/v", patchOps(`{"op":"add","path":"members","value":[{"value":"4"}]}`), "If-Match", g1),
		s.do("PUT", "/scim/v2/Groups/v", `{"displayName":"w"}`, "If-Match", g1),
		s.do("DELETE", "/scim/v2/Groups/v", "", "If-Match", g1),
	} {
		scimError(t, rep, http.StatusPreconditionFailed, "")
		assert.Contains(t, rep.json["detail"], "the Group is not", "a Group's 412 names the Group, not the batch it was written in")
	}
	assert.Equal(t, []membership.UID{3}, uids(s.members("v")))
	s.must(http.StatusNoContent, "DELETE", "/scim/v2/Groups/v", "", "If-Match", g2)

	// A retry with the same Idempotency-Key is answered again, applying
	// nothing more.
	id = s.createUser("gus", "")
	body := patchOps(`{"op":"replace","path":"displayName","value":"Gus"}`)
	first := s.must(http.StatusOK, "PATCH", "/scim/v2/Users/"+id, body, "Idempotency-Key", "patch-gus")
	rev := s.latest()
	again := s.must(http.StatusOK, "PATCH", "/scim/v2/Users/"+id, body, "Idempotency-Key", "patch-gus")
	assert.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	assert.Equal(t, first.json, again.json)
	assert.Empty(t, s.feedSince(rev))
	scimError(t, s.do("PATCH", "/scim/v2/Users/"+id, patchOps(`{"op":"replace","path":"displayName","value":"Other"}`), "Idempotency-Key", "patch-gus"),
		http.StatusUnprocessableEntity, "")
}

// Errors are SCIM's, with the status of what went wrong, and the body's
// bounds hold.
func testErrors(t *testing.T, s *server) {
	for _, tt := range []struct {
		name, body, contentType string
		status                  int
		scimType                string
	}{
		{"not JSON", `{"userName":`, "", http.StatusBadRequest, "invalidSyntax"},
		{"not an object", `["userName"]`, "", http.StatusBadRequest, "invalidSyntax"},
		{"two objects", `{"userName":"a"}{}`, "", http.StatusBadRequest, "invalidSyntax"},
		{"a name twice, in two cases", `{"userName":"a","USERNAME":"b"}`, "", http.StatusBadRequest, "invalidSyntax"},
		{"not UTF-8", "{\"userName\":\"\xff\"}", "", http.StatusBadRequest, "invalidSyntax"},
		{"a control character", `{"userName":"a\u0007"}`, "", http.StatusBadRequest, "invalidValue"},
		{"a media type of another", `{"userName":"a"}`, "text/plain", http.StatusUnsupportedMediaType, ""},
		{"too large", `{"userName":"` + strings.Repeat("a", 1<<20) + `"}`, "", http.StatusRequestEntityTooLarge, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			headers := []string{}
			if tt.contentType != "" {
				headers = append(headers, "Content-Type", tt.contentType)
			}
			scimError(t, s.do("POST", "/scim/v2/Users", tt.body, headers...), tt.status, tt.scimType)
		})
	}
	s.must(http.StatusCreated, "POST", "/scim/v2/Users", `{"userName":"json"}`, "Content-Type", "application/json; charset=utf-8")
	users, err := s.dir.FreeUID(t.Context())
	require.NoError(t, err)
	assert.Equal(t, membership.UID(2), users, "only the last POST created a user")

	// Members past the most one request may name (-max-users) are refused
	// at the first past it, 413, before the rest is read: here the
	// element after it, not a uid, is never reached.
	s.must(http.StatusCreated, "POST", "/scim/v2/Groups", `{"displayName":"cap"}`)
	tooMany := `[` + strings.Repeat(`{"value":"7"},`, membership.DefaultMaxUsers) + `{"value":"7"},{"value":"not a uid"}]`
	rev := s.latest()
	for _, tt := range []struct{ method, path, body string }{
		{"POST", "/scim/v2/Groups", `{"displayName":"capped","members":` + tooMany + `}`},
		{"PUT", "/scim/v2/Groups/cap", `{"displayName":"cap","members":` + tooMany + `}`},
		{"PATCH", "/scim/v2/Groups/cap", patchOps(`{"op":"add","path":"members","value":` + tooMany + `}`)},
		{"PATCH", "/scim/v2/Groups/cap", patchOps(`{"op":"remove","path":"members","value":` + tooMany + `}`)},
	} {
		scimError(t, s.do(tt.method, tt.path, tt.body), http.StatusRequestEntityTooLarge, "")
	}
	var ops []string
	for uid := 1; uid <= membership.DefaultMaxUsers/1000+1; uid++ {
		var members []string
		for i := range 1000 {
			members = append(members, fmt.Sprintf(`{"value":"%d"}`, uid*1000+i))
		}
		ops = append(ops, `{"op":"add","path":"members","value":[`+strings.Join(members, ",")+`]}`)
	}
	scimError(t, s.do("PATCH", "/scim/v2/Groups/cap", patchOps(append(ops, `{"op":"add","path":"members","value":[{"value":"x"}]}`)...)),
		http.StatusRequestEntityTooLarge, "")
	assert.Empty(t, s.feedSince(rev), "nothing changed")
	s.must(http.StatusNoContent, "DELETE", "/scim/v2/Groups/cap", "")

	// A group with more members than a reply lists is read without them.
	for start := 1; start <= 10001; start += 5000 {
		var us []membership.User
		for uid := start; uid < start+5000 && uid <= 10001; uid++ {
			us = append(us, membership.User{UID: membership.UID(uid)})
		}
		_, err := s.svc.Write(t.Context(), membership.Write{Op: membership.OpAdd, GroupID: "big", Users: us})
		require.NoError(t, err)
	}
	scimError(t, s.do("GET", "/scim/v2/Groups/big", ""), http.StatusBadRequest, "tooMany")
	s.must(http.StatusOK, "GET", "/scim/v2/Groups/big?excludedAttributes=members", "")
	scimError(t, s.do("GET", "/scim/v2/Groups", ""), http.StatusBadRequest, "tooMany")
	list := s.must(http.StatusOK, "GET", "/scim/v2/Groups?excludedAttributes=members", "").json
	assert.Equal(t, float64(1), list["totalResults"])
}
