package scimtest

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"example.com/groupmembership/membership"
)

// ids returns the ids of a list's resources, in order.
func ids(list map[string]any) []string {
	out := []string{}
	resources, _ := list["Resources"].([]any)
	for _, r := range resources {
		out = append(out, str(r, "id"))
	}
	return out
}

// filtered returns path with the filter f, escaped, and more parameters.
func filtered(path, f string, more ...string) string {
	q := url.Values{"filter": {f}}
	for i := 0; i+1 < len(more); i += 2 {
		q.Set(more[i], more[i+1])
	}
	return path + "?" + q.Encode()
}

func testUserLists(t *testing.T, s *server) {
	for _, u := range []struct{ userName, externalID string }{{"ann", "e1"}, {"ben", "e2"}, {"cy", "e2"}, {"dee", ""}, {"Éve", ""}} {
		body := `{"userName":"` + u.userName + `"`
		if u.externalID != "" {
			body += `,"externalId":"` + u.externalID + `"`
		}
		s.must(http.StatusCreated, "POST", "/scim/v2/Users", body+`}`)
	}
	all := s.must(http.StatusOK, "GET", "/scim/v2/Users", "").json
	assert.Equal(t, []string{"1", "2", "3", "4", "5"}, ids(all))
	assert.Equal(t, float64(5), all["totalResults"])
	assert.Equal(t, float64(1), all["startIndex"])
	assert.Equal(t, []any{"urn:ietf:params:scim:api:messages:2.0:ListResponse"}, all["schemas"])
	for _, tt := range []struct {
		query string
		want  []string
		total int
	}{
		{"/scim/v2/Users?startIndex=2&count=2", []string{"2", "3"}, 5},
		{"/scim/v2/Users?startIndex=5&count=2", []string{"5"}, 5},
		{"/scim/v2/Users?startIndex=9", []string{}, 5},
		{"/scim/v2/Users?startIndex=0&count=1", []string{"1"}, 5},
		{"/scim/v2/Users?count=0", []string{}, 5},
		{"/scim/v2/Users?count=-3", []string{}, 5},
		{filtered("/scim/v2/Users", `userName eq "BEN"`), []string{"2"}, 1},
		{filtered("/scim/v2/Users", `userName eq "éve"`), []string{"5"}, 1},
		{filtered("/scim/v2/Users", `UserName Eq "ann"`), []string{"1"}, 1},
		{filtered("/scim/v2/Users", `urn:ietf:params:scim:schemas:core:2.0:User:userName eq "ann"`), []string{"1"}, 1},
		{filtered("/scim/v2/Users", `externalId eq "e2"`), []string{"2", "3"}, 2},
		{filtered("/scim/v2/Users", `externalId eq "E2"`), []string{}, 0},
		{filtered("/scim/v2/Users", `externalId eq "e2"`, "startIndex", "2"), []string{"3"}, 2},
		{filtered("/scim/v2/Users", `id eq "4"`), []string{"4"}, 1},
		{filtered("/scim/v2/Users", `id eq "40"`), []string{}, 0},
		{filtered("/scim/v2/Users", `id eq "x"`), []string{}, 0},
		{filtered("/scim/v2/Users", `externalId eq "e2" and userName eq "cy"`), []string{"3"}, 1},
		{filtered("/scim/v2/Users", `userName eq "cy" and externalId eq "e1"`), []string{}, 0},
		{filtered("/scim/v2/Users", `userName eq "nobody"`), []string{}, 0},
	} {
		list := s.must(http.StatusOK, "GET", tt.query, "").json
		assert.Equal(t, tt.want, ids(list), tt.query)
		assert.Equal(t, float64(tt.total), list["totalResults"], tt.query)
		assert.Equal(t, float64(len(tt.want)), list["itemsPerPage"], tt.query)
	}
	one := s.must(http.StatusOK, "GET", filtered("/scim/v2/Users", `userName eq "ann"`, "attributes", "userName,name.givenName"), "").json
	assert.Equal(t, map[string]any{"schemas": []any{"urn:ietf:params:scim:schemas:core:2.0:User"}, "id": "1", "userName": "ann"}, one["Resources"].([]any)[0])
	one = s.must(http.StatusOK, "GET", "/scim/v2/Users/1?excludedAttributes=meta,active", "").json
	assert.NotContains(t, one, "meta")
	assert.NotContains(t, one, "active")
	assert.Equal(t, "ann", one["userName"])
	for _, f := range []string{`userName co "a"`, `userName eq ann`, `displayName eq "x"`, `userName eq "a" or userName eq "b"`,
		`userName eq "a" and`, `(userName eq "a")`, `userName eq "unterminated`, `userName`, strings.Repeat("x", 1025),
		// RFC 7644's grammar separates the words of a filter with one space.
		`userName  eq "a"`, ` userName eq "a"`, `userName eq "a" `, `userName eq  "a"`, `userName eq "a"  and id eq "1"`, ` `} {
		scimError(t, s.do("GET", filtered("/scim/v2/Users", f), ""), http.StatusBadRequest, "invalidFilter")
	}
	refused := s.do("GET", filtered("/scim/v2/Users", `displayName eq "x"`), "").json
	assert.Contains(t, refused["detail"], "compares id, userName, externalId", "the attributes as SCIM names them")
	for _, q := range []string{"?count=x", "?startIndex=1.5", "?sortBy=userName", "?attributes=a&excludedAttributes=b", "?count=1&count=2"} {
		scimError(t, s.do("GET", "/scim/v2/Users"+q, ""), http.StatusBadRequest, "invalidValue")
	}
	for _, q := range []string{"?count=100000", "?count=99999999999999999999", "?startIndex=-99999999999999999999"} {
		assert.Len(t, ids(s.must(http.StatusOK, "GET", "/scim/v2/Users"+q, "").json), 5, "%s: a count past the most is the most, a startIndex below 1 is 1", q)
	}
	for _, q := range []string{"?count=-99999999999999999999", "?startIndex=99999999999999999999"} {
		list := s.must(http.StatusOK, "GET", "/scim/v2/Users"+q, "").json
		assert.Equal(t, []string{}, ids(list), q)
		assert.Equal(t, float64(5), list["totalResults"], q)
	}
}

func testGroupLists(t *testing.T, s *server) {
	for _, g := range []string{`{"displayName":"b","externalId":"x"}`, `{"displayName":"a","members":[{"value":"7"}]}`, `{"displayName":"c","externalId":"x"}`} {
		s.must(http.StatusCreated, "POST", "/scim/v2/Groups", g)
	}
	// A group written on the other routes is a SCIM group: its id is its
	// display name.
	_, err := s.svc.Write(t.Context(), membership.Write{Op: membership.OpAdd, GroupID: "d", Users: []membership.User{{UID: 7}, {UID: 8}}})
	assert.NoError(t, err)
	for _, tt := range []struct {
		query string
		want  []string
		total int
	}{
		{"/scim/v2/Groups", []string{"a", "b", "c", "d"}, 4},
		{"/scim/v2/Groups?startIndex=2&count=2", []string{"b", "c"}, 4},
		{"/scim/v2/Groups?startIndex=4&count=2", []string{"d"}, 4},
		{filtered("/scim/v2/Groups", `displayName eq "c"`), []string{"c"}, 1},
		{filtered("/scim/v2/Groups", `displayName eq "d"`), []string{"d"}, 1},
		{filtered("/scim/v2/Groups", `displayName eq "C"`), []string{}, 0},
		{filtered("/scim/v2/Groups", `externalId eq "x"`), []string{"b", "c"}, 2},
		{filtered("/scim/v2/Groups", `externalId eq "x"`, "count", "1"), []string{"b"}, 2},
		{filtered("/scim/v2/Groups", `id eq "a" and members eq "7"`, "excludedAttributes", "members"), []string{"a"}, 1},
		{filtered("/scim/v2/Groups", `id eq "a" and members eq "8"`, "excludedAttributes", "members"), []string{}, 0},
		{filtered("/scim/v2/Groups", `id eq "nope" and members eq "7"`), []string{}, 0},
		{filtered("/scim/v2/Groups", `members eq "7"`), []string{"a", "d"}, 2},
		{filtered("/scim/v2/Groups", `members.value eq "8"`), []string{"d"}, 1},
		{filtered("/scim/v2/Groups", `members eq "x"`), []string{}, 0},
		{filtered("/scim/v2/Groups", `displayName eq "a" and externalId eq "x"`), []string{}, 0},
	} {
		list := s.must(http.StatusOK, "GET", tt.query, "").json
		assert.Equal(t, tt.want, ids(list), tt.query)
		assert.Equal(t, float64(tt.total), list["totalResults"], tt.query)
	}
	list := s.must(http.StatusOK, "GET", "/scim/v2/Groups?excludedAttributes=members", "").json
	for _, r := range list["Resources"].([]any) {
		assert.NotContains(t, r, "members")
	}
	list = s.must(http.StatusOK, "GET", "/scim/v2/Groups?attributes=members.value", "").json
	assert.Equal(t, map[string]any{"schemas": []any{"urn:ietf:params:scim:schemas:core:2.0:Group"}, "id": "a", "members": []any{map[string]any{"value": "7"}}},
		list["Resources"].([]any)[0])
	scimError(t, s.do("GET", filtered("/scim/v2/Groups", `userName eq "a"`), ""), http.StatusBadRequest, "invalidFilter")
	scimError(t, s.do("GET", filtered("/scim/v2/Groups", `displayName sw "a"`), ""), http.StatusBadRequest, "invalidFilter")
	scimError(t, s.do("GET", filtered("/scim/v2/Groups", `displayName eq "a" and  id eq "a"`), ""), http.StatusBadRequest, "invalidFilter")
}
