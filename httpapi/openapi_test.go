package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/membership"
)

func loadOpenAPI(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	require.NoError(t, json.Unmarshal(openAPIDocument, &doc))
	return doc
}

// TestOpenAPIDocumentsEveryRoute fails when a route is registered but not
// documented, or documented but not registered.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	assert.Equal(t, "3.1.0", doc["openapi"])

	var documented []string
	for path, item := range doc["paths"].(map[string]any) {
		for key := range item.(map[string]any) {
			switch key {
			case "get", "head", "post", "put", "delete", "patch", "options":
				documented = append(documented, strings.ToUpper(key)+" "+path)
			}
		}
	}
	var registered []string
	for _, r := range routes(deps{svc: membership.NewService(store.NewMemory(), 0), lists: newLists(newListCache(0), budget.New(1))}) {
		registered = append(registered, r.method+" "+r.path)
		if r.method == http.MethodGet {
			registered = append(registered, "HEAD "+r.path) // the mux serves HEAD with GET
		}
	}
	slices.Sort(documented)
	slices.Sort(registered)
	for _, op := range registered {
		assert.Contains(t, documented, op, "registered but not documented")
	}
	for _, op := range documented {
		assert.Contains(t, registered, op, "documented but not registered")
	}
}

func TestOpenAPIListsEveryErrorCode(t *testing.T) {
	doc := loadOpenAPI(t)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	var documented []string
	for _, c := range schemas["ErrorCode"].(map[string]any)["enum"].([]any) {
		documented = append(documented, c.(string))
	}
	var mapped []string
	for code := range statusOf {
		mapped = append(mapped, string(code))
	}
	slices.Sort(documented)
	slices.Sort(mapped)
	assert.Equal(t, mapped, documented)
}

func TestOpenAPIReferencesResolve(t *testing.T) {
	doc := loadOpenAPI(t)
	var refs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "$ref" {
					refs = append(refs, x.(string))
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	require.NotEmpty(t, refs)
	for _, ref := range refs {
		require.True(t, strings.HasPrefix(ref, "#/"), ref)
		var node any = doc
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			m, ok := node.(map[string]any)
			require.True(t, ok, "%s does not resolve", ref)
			node, ok = m[part]
			require.True(t, ok, "%s does not resolve", ref)
		}
	}
}

func TestOpenAPIIsServed(t *testing.T) {
	h := NewHandler(membership.NewService(store.NewMemory(), 0), Options{})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/openapi.json", nil))
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.JSONEq(t, string(openAPIDocument), w.Body.String())
}
