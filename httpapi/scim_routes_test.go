package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
)

// The SCIM routes need the service's token whenever it has one, reads
// included; what they write names the token's principal in the feed;
// their unknown paths and methods answer SCIM's errors.
func TestSCIMRoutesOfTheService(t *testing.T) {
	svc := membership.NewService(memory.New(), membership.ServiceOptions{})
	h := httpapi.NewHandler(svc, httpapi.Options{Access: httpapi.TokenOnly("secret")})
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
