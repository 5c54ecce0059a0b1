package httpapi

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi/decode"
	"example.com/groupmembership/httpapi/lists"
	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/httpapi/scim"
	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/internal/store/memory"
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
	for _, r := range routes(shared{svc: membership.NewService(memory.New(), membership.ServiceOptions{}), encodedLists: lists.NewEncodedLists(lists.NewCache(0), budget.New(1))}) {
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
	for code := range middleware.StatusOf {
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
	h := NewHandler(membership.NewService(memory.New(), membership.ServiceOptions{}), Options{})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/openapi.json", nil))
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.JSONEq(t, string(openAPIDocument), w.Body.String())
}

// resolve follows v's $ref, if it has one.
func resolve(t *testing.T, doc map[string]any, v any) map[string]any {
	t.Helper()
	m := v.(map[string]any)
	ref, ok := m["$ref"].(string)
	if !ok {
		return m
	}
	var node any = doc
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		node = node.(map[string]any)[part]
	}
	require.NotNil(t, node, ref)
	return resolve(t, doc, node)
}

// paramNames returns the names of the parameters of operation op, its
// path's included.
func paramNames(t *testing.T, doc map[string]any, item, op map[string]any) []string {
	var names []string
	for _, list := range []any{item["parameters"], op["parameters"]} {
		ps, _ := list.([]any)
		for _, p := range ps {
			names = append(names, resolve(t, doc, p)["name"].(string))
		}
	}
	slices.Sort(names)
	return names
}

func headerNames(t *testing.T, doc map[string]any, response any) []string {
	var names []string
	headers, _ := resolve(t, doc, response)["headers"].(map[string]any)
	for name := range headers {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// TestOpenAPIDocumentsEveryReply holds the document to what every route can
// answer: X-Request-ID on every reply, 400 for a bad query everywhere, 503
// wherever the data is needed (it may be loading), and HEAD exactly as GET
// but for the body.
func TestOpenAPIDocumentsEveryReply(t *testing.T) {
	doc := loadOpenAPI(t)
	paths := doc["paths"].(map[string]any)
	for _, r := range routes(shared{svc: membership.NewService(memory.New(), membership.ServiceOptions{}), encodedLists: lists.NewEncodedLists(lists.NewCache(0), budget.New(1))}) {
		item := paths[r.path].(map[string]any)
		methods := []string{strings.ToLower(r.method)}
		if r.method == http.MethodGet {
			methods = append(methods, "head")
		}
		for _, m := range methods {
			op := item[m].(map[string]any)
			responses := op["responses"].(map[string]any)
			for status, response := range responses {
				assert.Contains(t, headerNames(t, doc, response), "X-Request-ID", "%s %s %s", m, r.path, status)
			}
			assert.Contains(t, responses, "400", "%s %s: a bad query", m, r.path)
			if r.data || r.path == "/readyz" {
				assert.Contains(t, responses, "503", "%s %s: the data may be loading", m, r.path)
			}
		}
		if r.method == http.MethodGet {
			get, head := item["get"].(map[string]any), item["head"].(map[string]any)
			assert.Equal(t, paramNames(t, doc, item, get), paramNames(t, doc, item, head), "HEAD %s takes GET's parameters", r.path)
			getResponses, headResponses := get["responses"].(map[string]any), head["responses"].(map[string]any)
			for status, response := range getResponses {
				require.Contains(t, headResponses, status, "HEAD %s answers what GET does", r.path)
				assert.Equal(t, headerNames(t, doc, response), headerNames(t, doc, headResponses[status]), "HEAD %s %s sends GET's headers", r.path, status)
			}
		}
	}
	groupID := doc["components"].(map[string]any)["parameters"].(map[string]any)["groupID"].(map[string]any)
	assert.Equal(t, float64(membership.MaxGroupIDBytes), groupID["schema"].(map[string]any)["maxLength"],
		"the limit is in bytes; a string that fits it has at most as many characters")
}

// TestOpenAPIDocumentsIdempotencyKeys holds the document to safe retries:
// every write takes Idempotency-Key, a key as ValidateIdempotencyKey takes
// it, its 200 may carry Idempotent-Replayed, and it may answer 409 and 422
// with the error body; no read takes the header.
func TestOpenAPIDocumentsIdempotencyKeys(t *testing.T) {
	doc := loadOpenAPI(t)
	paths := doc["paths"].(map[string]any)
	writes := 0
	for _, r := range routes(shared{svc: membership.NewService(memory.New(), membership.ServiceOptions{}), encodedLists: lists.NewEncodedLists(lists.NewCache(0), budget.New(1))}) {
		if strings.HasPrefix(r.path, scim.Prefix+"/") {
			continue // TestOpenAPIDocumentsSCIM
		}
		item := paths[r.path].(map[string]any)
		op := item[strings.ToLower(r.method)].(map[string]any)
		isWrite := r.method != http.MethodGet && !r.read
		if !isWrite {
			assert.NotContains(t, paramNames(t, doc, item, op), "Idempotency-Key", "%s %s is a read: it ignores the header", r.method, r.path)
			continue
		}
		writes++
		assert.Contains(t, paramNames(t, doc, item, op), "Idempotency-Key", "%s %s", r.method, r.path)
		responses := op["responses"].(map[string]any)
		assert.Contains(t, headerNames(t, doc, responses["200"]), "Idempotent-Replayed", "%s %s", r.method, r.path)
		for _, status := range []string{"409", "422"} {
			require.Contains(t, responses, status, "%s %s", r.method, r.path)
			schema := resolve(t, doc, responses[status])["content"].(map[string]any)["application/json"].(map[string]any)["schema"]
			assert.Equal(t, "#/components/schemas/Error", schema.(map[string]any)["$ref"], "%s %s %s", r.method, r.path, status)
		}
	}
	assert.Equal(t, 9, writes, "POST, PUT and DELETE of /group-user/{groupID} and of /group-group/{groupID}, DELETE /groups/{groupID}, DELETE /user-group/{uid}, POST /batch")

	param := doc["components"].(map[string]any)["parameters"].(map[string]any)["Idempotency-Key"].(map[string]any)
	assert.Equal(t, "header", param["in"])
	schema := param["schema"].(map[string]any)
	assert.Equal(t, "string", schema["type"])
	assert.Equal(t, 1.0, schema["minLength"])
	assert.Equal(t, float64(membership.MaxIdempotencyKeyBytes), schema["maxLength"])
	pattern := regexp.MustCompile(schema["pattern"].(string))
	for c := 0; c < 256; c++ {
		key := "k" + string([]byte{byte(c)})
		assert.Equal(t, membership.ValidateIdempotencyKey(key) == nil, pattern.MatchString(key), "byte 0x%02x", c)
	}
	assert.Contains(t, doc["components"].(map[string]any)["headers"], "Idempotent-Replayed")
}

// TestOpenAPIDocumentsExpiries holds the document to the forms of an
// expiry: the element object's "expires" (a time or null) and "ttl" (a
// duration whose pattern takes what the parser takes), a member's
// "expires", a change's "expiries" and the op expire.
func TestOpenAPIDocumentsExpiries(t *testing.T) {
	doc := loadOpenAPI(t)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	var object map[string]any
	for _, form := range schemas["User"].(map[string]any)["oneOf"].([]any) {
		if f := resolve(t, doc, form); f["type"] == "object" {
			object = f
		}
	}
	require.NotNil(t, object, "the element's object form")
	props := object["properties"].(map[string]any)
	expires := resolve(t, doc, props["expires"])
	assert.Equal(t, []any{"string", "null"}, expires["type"])
	assert.Equal(t, "date-time", expires["format"])
	ttl := resolve(t, doc, props["ttl"])
	assert.Equal(t, "string", ttl["type"])
	pattern := regexp.MustCompile(ttl["pattern"].(string))
	for _, d := range []string{"4h", "90m", "1h30m", "1.5h", "1ms", "300000us", "+2h", "1h0m0.5s", ".5h", "100µs", "0s", "87841h"} {
		assert.True(t, pattern.MatchString(d), "%q is a duration", d)
	}
	for _, d := range []string{"", "4", "4 h", "4hours", "1d", "-1h", "h", "1.h.", "4h ", "P1D"} {
		_, err := decode.ParseUsers(`[{"uid":1,"ttl":"`+d+`"}]`, 1)
		assert.Error(t, err, "%q", d)
		assert.False(t, pattern.MatchString(d), "%q is not a duration the parser takes", d)
	}
	member := schemas["Member"].(map[string]any)["properties"].(map[string]any)
	assert.Equal(t, "date-time", resolve(t, doc, member["expires"])["format"])
	assert.NotContains(t, schemas["Member"].(map[string]any)["required"], "expires", "a member without an expiry has none")
	change := schemas["Change"].(map[string]any)
	assert.Contains(t, change["properties"].(map[string]any)["op"].(map[string]any)["enum"], "expire")
	expiries := change["properties"].(map[string]any)["expiries"].(map[string]any)
	item := resolve(t, doc, expiries["items"])
	assert.ElementsMatch(t, []any{"uid", "expires"}, item["required"])
	assert.Equal(t, []any{"string", "null"}, resolve(t, doc, item["properties"].(map[string]any)["expires"])["type"])
}

// TestOpenAPIComponentNamesDoNotClash: oapi-codegen makes a Go type of
// every component (schemas, parameters, request bodies, responses,
// headers), named after it without its dashes, and stops on a clash
// ("duplicate typename"); so no two components of different kinds have the
// same name, whatever its case and punctuation.
func TestOpenAPIComponentNamesDoNotClash(t *testing.T) {
	components := loadOpenAPI(t)["components"].(map[string]any)
	typeName := func(name string) string {
		return strings.ToLower(strings.Map(func(r rune) rune {
			if r == '-' || r == '_' || r == '.' {
				return -1
			}
			return r
		}, name))
	}
	kindOf := map[string]string{}
	for _, kind := range []string{"schemas", "parameters", "requestBodies", "responses", "headers"} {
		for name := range components[kind].(map[string]any) {
			key := typeName(name)
			if other, ok := kindOf[key]; ok {
				assert.Fail(t, "a name clash", "%s %s and %s: the same Go type name", kind, name, other)
			}
			kindOf[key] = kind + " " + name
		}
	}
	assert.Greater(t, len(kindOf), 40)
}

// schemaAt is a schema of the document, where it is (a JSON pointer), and
// the name it is under: its property's, parameter's, header's or
// component's.
type schemaAt struct {
	where, name string
	schema      map[string]any
}

// schemasOf returns every schema of the document, inline ones included, in
// the order of a depth-first walk.
func schemasOf(doc map[string]any) []schemaAt {
	var found []schemaAt
	var walk func(v any, where, name string, isSchema bool)
	walk = func(v any, where, name string, isSchema bool) {
		switch v := v.(type) {
		case []any:
			for i, x := range v {
				walk(x, fmt.Sprintf("%s/%d", where, i), name, isSchema)
			}
		case map[string]any:
			if isSchema {
				found = append(found, schemaAt{where, name, v})
			}
			if n, ok := v["name"].(string); ok && v["in"] != nil {
				name = n // a parameter
			}
			for k, x := range v {
				at := where + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
				switch {
				case isSchema && k == "properties":
					for p, s := range x.(map[string]any) {
						walk(s, at+"/"+p, p, true) // property names here have no / or ~
					}
				case isSchema && slices.Contains([]string{"items", "prefixItems", "oneOf", "anyOf", "allOf", "additionalProperties"}, k):
					walk(x, at, name, true)
				case k == "schema":
					walk(x, at, name, true)
				case where == "#/components/schemas":
					walk(x, at, k, true)
				case where == "#/components/headers" || strings.HasSuffix(where, "/headers"):
					walk(x, at, k, false)
				case !isSchema:
					walk(x, at, name, false)
				}
			}
		}
	}
	walk(doc, "#", "", false)
	return found
}

// TestOpenAPIIntegersAre64Bit holds the document to the Go types of the
// values it describes: uids (membership.UID), revisions (membership.Revision,
// X-Revision, after on /changes), counts and sizes (int) are 64-bit, and
// say so with format int64, so that generators do not make them int (32
// bits on some platforms) or int32. Any other integer says it fits 32 bits:
// format int32 or a maximum that does.
func TestOpenAPIIntegersAre64Bit(t *testing.T) {
	sixtyFour := []string{"UID", "uid", "actor", "after", "rev", "oldest_revision", "X-Revision", "X-Min-Revision",
		"X-Total-Count", "Count", "added", "removed", "members"}
	integers := 0
	for _, s := range schemasOf(loadOpenAPI(t)) {
		if s.schema["type"] != "integer" {
			continue
		}
		integers++
		if slices.Contains(sixtyFour, s.name) {
			assert.Equal(t, "int64", s.schema["format"], "%s (%s) is 64-bit", s.where, s.name)
			continue
		}
		maximum, bounded := s.schema["maximum"].(float64)
		assert.True(t, s.schema["format"] == "int64" || s.schema["format"] == "int32" || bounded && maximum <= math.MaxInt32,
			"%s (%s): an integer says its width, format int64 or int32, or has a maximum that fits 32 bits", s.where, s.name)
	}
	assert.Greater(t, integers, 20)
}

// TestOpenAPISchemasAreTyped holds every schema to a type generators can
// use: each has a type (an enum or a const too), a $ref or a oneOf, anyOf
// or allOf; an array has items; an object has properties or typed
// additionalProperties. The one object of any members is OpenAPIDocument,
// this document.
func TestOpenAPISchemasAreTyped(t *testing.T) {
	schemas := schemasOf(loadOpenAPI(t))
	require.NotEmpty(t, schemas)
	for _, s := range schemas {
		var says []string
		for _, key := range []string{"type", "$ref", "oneOf", "anyOf", "allOf"} {
			if s.schema[key] != nil {
				says = append(says, key)
			}
		}
		assert.NotEmpty(t, says, "%s (%s) says what it is", s.where, s.name)
		if s.schema["enum"] != nil || s.schema["const"] != nil {
			assert.NotNil(t, s.schema["type"], "%s (%s): an enum or a const has a type", s.where, s.name)
		}
		switch s.schema["type"] {
		case "array":
			assert.NotNil(t, s.schema["items"], "%s (%s): an array has items", s.where, s.name)
		case "object":
			_, typedValues := s.schema["additionalProperties"].(map[string]any)
			if s.schema["properties"] == nil && !typedValues {
				assert.Equal(t, "#/components/schemas/OpenAPIDocument", s.where, "%s (%s): an object has properties or typed additionalProperties", s.where, s.name)
			}
		}
	}
}

// TestOpenAPITuplesHaveItems holds each tuple (prefixItems) to an items
// that generators reading only items (oapi-codegen) type its elements by,
// and that never applies: the tuple's length is fixed by minItems and
// maxItems, and items admits each of its elements.
func TestOpenAPITuplesHaveItems(t *testing.T) {
	tuples := 0
	for _, s := range schemasOf(loadOpenAPI(t)) {
		prefix, ok := s.schema["prefixItems"].([]any)
		if !ok {
			continue
		}
		tuples++
		assert.Equal(t, float64(len(prefix)), s.schema["minItems"], "%s", s.where)
		assert.Equal(t, float64(len(prefix)), s.schema["maxItems"], "%s", s.where)
		require.IsType(t, map[string]any{}, s.schema["items"], "%s has items", s.where)
		items := s.schema["items"].(map[string]any)
		admitted := []any{items["$ref"]}
		for _, alternative := range append(slices.Clone(asSlice(items["anyOf"])), asSlice(items["oneOf"])...) {
			admitted = append(admitted, alternative.(map[string]any)["$ref"])
		}
		for _, element := range prefix {
			assert.Contains(t, admitted, element.(map[string]any)["$ref"], "%s: items admits each element", s.where)
		}
	}
	assert.Equal(t, 2, tuples, "users elements [uid] and [uid, nickname]")
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// TestOpenAPIDocumentsNesting holds the document to groups in groups: the
// feed's and the batch's ops, the element forms of groups, the via of a
// transitive member, and transitive on every read that takes it.
func TestOpenAPIDocumentsNesting(t *testing.T) {
	doc := loadOpenAPI(t)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	enum := func(schema string) []any {
		return schemas[schema].(map[string]any)["properties"].(map[string]any)["op"].(map[string]any)["enum"].([]any)
	}
	for _, op := range []membership.Op{membership.OpAddGroups, membership.OpRemoveGroups, membership.OpReplaceGroups, membership.OpExpireGroups} {
		assert.Contains(t, enum("Change"), string(op))
		if op != membership.OpExpireGroups {
			assert.Contains(t, enum("BatchChange"), string(op))
		}
	}
	assert.NotContains(t, enum("BatchChange"), string(membership.OpExpireGroups), "the service's own")
	var forms []string
	for _, form := range schemas["Subgroup"].(map[string]any)["oneOf"].([]any) {
		forms = append(forms, resolve(t, doc, form)["type"].(string))
	}
	assert.ElementsMatch(t, []string{"string", "object"}, forms)
	assert.Contains(t, schemas["MemberRecord"].(map[string]any)["properties"], "via")

	paths := doc["paths"].(map[string]any)
	for _, path := range []string{"/group-user/{groupID}", "/group-user/{groupID}/{uid}", "/user-group/{uid}", "/group-group/{groupID}", "/group-parents/{groupID}"} {
		item := paths[path].(map[string]any)
		for _, m := range []string{"get", "head"} {
			assert.Contains(t, paramNames(t, doc, item, item[m].(map[string]any)), "transitive", "%s %s", m, path)
		}
	}
	assert.Contains(t, schemas["CheckRequest"].(map[string]any)["properties"], "transitive")
}

// TestOpenAPIDocumentsSCIM holds the document to the SCIM routes: their
// replies are application/scim+json, their errors SCIM's, their PUT,
// PATCH and DELETE take Idempotency-Key (409 and 422 as SCIM errors, the
// reply Idempotent-Replayed), their POST does not.
func TestOpenAPIDocumentsSCIM(t *testing.T) {
	doc := loadOpenAPI(t)
	paths := doc["paths"].(map[string]any)
	scimRoutes := 0
	for _, r := range routes(shared{svc: membership.NewService(memory.New(), membership.ServiceOptions{}), encodedLists: lists.NewEncodedLists(lists.NewCache(0), budget.New(1))}) {
		if !strings.HasPrefix(r.path, scim.Prefix+"/") {
			continue
		}
		scimRoutes++
		assert.True(t, r.personal, "%s %s needs a principal whenever the service has some", r.method, r.path)
		op := paths[r.path].(map[string]any)[strings.ToLower(r.method)].(map[string]any)
		responses := op["responses"].(map[string]any)
		for status, response := range responses {
			body := resolve(t, doc, response)
			if content, ok := body["content"].(map[string]any); ok && status != "401" {
				assert.Contains(t, content, "application/scim+json", "%s %s %s", r.method, r.path, status)
			}
		}
		schema := resolve(t, doc, responses["400"])["content"].(map[string]any)["application/scim+json"].(map[string]any)["schema"]
		assert.Equal(t, "#/components/schemas/ScimError", schema.(map[string]any)["$ref"], "%s %s", r.method, r.path)
		takesKey := r.method == http.MethodPut || r.method == "PATCH" || r.method == http.MethodDelete
		if takesKey {
			assert.Contains(t, paramNames(t, doc, paths[r.path].(map[string]any), op), "Idempotency-Key", "%s %s", r.method, r.path)
			for _, status := range []string{"409", "422"} {
				assert.Contains(t, responses, status, "%s %s", r.method, r.path)
			}
		} else {
			assert.NotContains(t, paramNames(t, doc, paths[r.path].(map[string]any), op), "Idempotency-Key", "%s %s", r.method, r.path)
		}
	}
	assert.Equal(t, len(scim.Routes(scim.Deps{})), scimRoutes)
}

// TestOpenAPIDocumentsForbidden holds every route that may need a
// credential to the bearer scheme and to both refusals: 401 without a
// principal's credential, 403 past its rights. Only the probes need none.
func TestOpenAPIDocumentsForbidden(t *testing.T) {
	doc := loadOpenAPI(t)
	for path, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			o, ok := op.(map[string]any)
			if !ok || o["responses"] == nil {
				continue
			}
			responses := o["responses"].(map[string]any)
			if path == "/healthz" || path == "/readyz" {
				assert.NotContains(t, responses, "403", "%s %s", method, path)
				continue
			}
			assert.Contains(t, responses, "401", "%s %s", method, path)
			forbidden := "#/components/responses/Forbidden"
			if strings.HasPrefix(path, scim.Prefix+"/") { // the SCIM routes answer SCIM's errors
				forbidden = "#/components/responses/ScimForbidden"
			}
			assert.Equal(t, map[string]any{"$ref": forbidden}, responses["403"], "%s %s", method, path)
			assert.Contains(t, fmt.Sprint(o["security"]), "bearer", "%s %s", method, path)
		}
	}
}
