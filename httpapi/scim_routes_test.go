package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
)

// The SCIM routes need the service's token whenever it has one, reads
// included; what they write names the token's principal in the feed;
// their unknown paths and methods answer SCIM's errors.
func TestSCIMRoutesOfTheService(t *testing.T) {
	store := memory.New()
	svc := membership.NewService(store, membership.ServiceOptions{})
	h := httpapi.NewDirectoryHandler(svc, store, httpapi.Options{Access: httpapi.TokenOnly("secret")})
	do := func(method, path, body string, auth bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		if body != "" {
			r.Header.Set("Content-Type", "application/scim+json")
		}
		if auth {
			r.Header.Set("Authorization", "Bearer secret")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for _, path := range []string{"/scim/v2/Users", "/scim/v2/Groups", "/scim/v2/ServiceProviderConfig"} {
		assert.Equal(t, http.StatusUnauthorized, do("GET", path, "", false).Code, "GET %s without the token", path)
		assert.Equal(t, http.StatusOK, do("GET", path, "", true).Code, "GET %s with it", path)
	}
	assert.Equal(t, http.StatusUnauthorized, do("POST", "/scim/v2/Users", `{"userName":"a"}`, false).Code)
	created := do("POST", "/scim/v2/Users", `{"userName":"a"}`, true)
	require.Equal(t, http.StatusCreated, created.Code, created.Body.String())
	changes, _, err := svc.Changes(context.Background(), membership.ChangeOptions{})
	require.NoError(t, err)
	require.Len(t, changes, 1)
	assert.Equal(t, "token", changes[0].Principal, "the change names who made it")
	assert.Equal(t, http.StatusOK, do("GET", "/group-user/any", "", false).Code, "the other reads need no token without -auth-reads")

	notFound := do("GET", "/scim/v2/Bulk", "", true)
	assert.Equal(t, http.StatusNotFound, notFound.Code)
	assert.JSONEq(t, `{"schemas":["urn:ietf:params:scim:api:messages:2.0:Error"],"status":"404","detail":"there is no SCIM resource at \"/scim/v2/Bulk\""}`, notFound.Body.String())
	wrong := do("POST", "/scim/v2/Users/1", `{}`, true)
	assert.Equal(t, http.StatusMethodNotAllowed, wrong.Code)
	assert.Equal(t, "GET, HEAD, PUT, PATCH, DELETE", wrong.Header().Get("Allow"))
	assert.Equal(t, "application/scim+json", wrong.Header().Get("Content-Type"))
}

// scimAccess is a SCIM request of TestSCIMAccess, and what it needs, as
// accessRoute says: "read" or "write" of team-a/x (in the scoped
// principals' groups) or of secret (outside), "read *" or "write *" of
// every group, "any" principal.
type scimAccess struct {
	method, path, body, need string
	served                   int
}

var scimAccessRoutes = []scimAccess{
	{"GET", "/scim/v2/ServiceProviderConfig", "", "any", 200},
	{"GET", "/scim/v2/Schemas", "", "any", 200},
	{"GET", "/scim/v2/Users", "", "read *", 200},
	{"GET", "/scim/v2/Users?filter=userName+eq+%22ann%22", "", "read *", 200},
	{"GET", "/scim/v2/Users/1", "", "read *", 200},
	{"POST", "/scim/v2/Users", `{"userName":"bob"}`, "write *", 201},
	{"PUT", "/scim/v2/Users/1", `{"userName":"ann","active":true}`, "write *", 200},
	{"PATCH", "/scim/v2/Users/1", `{"Operations":[{"op":"replace","path":"active","value":false}]}`, "write *", 200},
	{"DELETE", "/scim/v2/Users/1", "", "write *", 204},
	{"GET", "/scim/v2/Groups", "", "read *", 200},
	{"GET", "/scim/v2/Groups?filter=displayName+eq+%22team-a%2Fx%22", "", "read *", 200},
	{"GET", "/scim/v2/Groups/team-a%2Fx", "", "read team-a/x", 200},
	{"GET", "/scim/v2/Groups/secret", "", "read secret", 200},
	{"POST", "/scim/v2/Groups", `{"displayName":"team-a/new"}`, "write team-a/x", 201},
	{"POST", "/scim/v2/Groups", `{"displayName":"secret/new"}`, "write secret", 201},
	{"PUT", "/scim/v2/Groups/team-a%2Fx", `{"displayName":"X","members":[{"value":"1"}]}`, "write team-a/x", 200},
	{"PATCH", "/scim/v2/Groups/team-a%2Fx", `{"Operations":[{"op":"add","path":"members","value":[{"value":"2"}]}]}`, "write team-a/x", 204},
	{"PATCH", "/scim/v2/Groups/secret", `{"Operations":[{"op":"replace","path":"displayName","value":"S"}]}`, "write secret", 204},
	{"DELETE", "/scim/v2/Groups/team-a%2Fx", "", "write team-a/x", 204},
	{"DELETE", "/scim/v2/Groups/secret", "", "write secret", 204},
}

// scimAllowed reports whether principal may make a request that needs
// need (principalRights).
func scimAllowed(principal, need string) bool {
	p := principalRights[principal]
	right, group, _ := strings.Cut(need, " ")
	switch {
	case need == "any":
		return true
	case group == "*":
		return p.all && (right == "read" || p.right >= 2)
	case !p.all && group != "team-a/x":
		return false
	}
	return right == "read" || p.right >= 2
}

// TestSCIMAccess sends every SCIM request as every principal, and none,
// with -auth-reads and without, each to a fresh service: they need a
// principal, reads included, whatever -auth-reads says (401 as a SCIM
// error), and the principal's rights hold (403 as a SCIM
// error naming it): an account is of no group, so a user's read needs
// read on every group, its write write on every group; a group's, the
// right on the group.
func TestSCIMAccess(t *testing.T) {
	for _, authReads := range []bool{false, true} {
		for _, rt := range scimAccessRoutes {
			for _, principal := range []string{"", "wrong", "reader", "writer", "reads-all", "writes-all", "ops"} {
				h, svc := accessHandler(t, authReads)
				_, err := svc.Write(context.Background(), membership.Write{Op: membership.OpSetUser, UIDs: []membership.UID{1},
					Account: &account.Account{UserName: "ann", Active: true}})
				require.NoError(t, err)
				w := sendSCIMAsPrincipal(h, principal, rt.method, rt.path, rt.body)
				name := fmt.Sprintf("auth-reads=%v %s %s as %q", authReads, rt.method, rt.path, principal)
				_, known := principalRights[principal]
				switch {
				case !known:
					assert.Equal(t, http.StatusUnauthorized, w.Code, "%s: %s", name, w.Body.String())
					assert.Equal(t, "application/scim+json", w.Header().Get("Content-Type"), name)
					assert.Equal(t, `Bearer realm="membership"`, w.Header().Get("WWW-Authenticate"), name)
					assert.JSONEq(t, `{"schemas":["urn:ietf:params:scim:api:messages:2.0:Error"],"status":"401",`+
						`"detail":"this request needs the header Authorization: Bearer <token>, with the token of one of the service's principals"}`, w.Body.String(), name)
				case !scimAllowed(principal, rt.need):
					require.Equal(t, http.StatusForbidden, w.Code, "%s: %s", name, w.Body.String())
					assert.Equal(t, "application/scim+json", w.Header().Get("Content-Type"), name)
					assert.Contains(t, w.Body.String(), `"status":"403"`, name)
					assert.Contains(t, w.Body.String(), fmt.Sprintf(`principal \"%s\" lacks `, principal), name)
				default:
					assert.Equal(t, rt.served, w.Code, "%s: %s", name, w.Body.String())
				}
			}
		}
	}
}

// sendSCIMAsPrincipal is sendAsPrincipal of a SCIM request.
func sendSCIMAsPrincipal(h http.Handler, principal, method, path, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/scim+json")
	}
	if principal != "" {
		r.Header.Set("Authorization", "Bearer "+principal+"-token")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// The 403 of a SCIM request says what its principal lacks, and why.
func TestSCIMForbiddenSaysWhy(t *testing.T) {
	h, _ := accessHandler(t, false)
	for _, tt := range []struct{ principal, method, path, body, detail string }{
		{"writer", "POST", "/scim/v2/Users", `{"userName":"bob"}`,
			`principal "writer" lacks write on every group (*): an account is of no group, and a write of one may take its user out of every group`},
		{"writer", "GET", "/scim/v2/Users/1", "", `principal "writer" lacks read on every group (*): an account is of no group`},
		{"reader", "GET", "/scim/v2/Groups", "", `principal "reader" lacks read on every group (*): a list of groups by their attributes may name any group`},
		{"writer", "PATCH", "/scim/v2/Groups/secret", `{"Operations":[{"op":"replace","path":"displayName","value":"S"}]}`,
			`principal "writer" lacks read on group "secret"`},
	} {
		w := sendSCIMAsPrincipal(h, tt.principal, tt.method, tt.path, tt.body)
		require.Equal(t, http.StatusForbidden, w.Code, w.Body.String())
		assert.JSONEq(t, fmt.Sprintf(`{"schemas":["urn:ietf:params:scim:api:messages:2.0:Error"],"status":"403","detail":%q}`, tt.detail), w.Body.String())
	}
}

// While the service loads its data, a SCIM route answers 503 as a SCIM
// error, as the other routes answer theirs.
func TestSCIMIsStartingWhileTheDataLoads(t *testing.T) {
	h := httpapi.NewLoadingHandler(httpapi.Options{})
	for _, path := range []string{"/scim/v2/Users", "/scim/v2/Groups/g"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		assert.Equal(t, http.StatusServiceUnavailable, w.Code, path)
		assert.Equal(t, "application/scim+json", w.Header().Get("Content-Type"), path)
		assert.Equal(t, "1", w.Header().Get("Retry-After"), path)
		assert.JSONEq(t, `{"schemas":["urn:ietf:params:scim:api:messages:2.0:Error"],"status":"503",`+
			`"detail":"the service is starting: its data is loading; try again in a moment (/readyz says when it is ready)"}`, w.Body.String(), path)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/group-user/g", nil))
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Contains(t, w.Body.String(), `"code":"starting"`, "the other routes keep the service's own")
}
