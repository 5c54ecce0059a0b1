package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
)

// asPrincipal returns h serving every request as the principal name, as
// a credential check that let it through would.
func asPrincipal(h http.Handler, name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(middleware.WithPrincipal(r.Context(), name)))
	})
}

// feedOf returns the changes of h's feed, as JSON objects.
func feedOf(t *testing.T, h http.Handler, header map[string]string) []map[string]any {
	t.Helper()
	w := sendTo(h, "GET", "/changes", "", header)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var changes []map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &changes))
	return changes
}

// Every kind of write, made with the service's token, is a change of the
// principal "token", beside the actor the client named; its line of the
// access log names the principal, never the token, and so does a read's
// when reads need the token. A request refused for its credential names
// none.
func TestChangesAndTheAccessLogNameThePrincipal(t *testing.T) {
	const token = "s3cret-t0ken-4d1f"
	logs := &syncBuffer{}
	svc := membership.NewService(memory.New(), membership.ServiceOptions{})
	h := httpapi.NewHandler(svc, httpapi.Options{Access: httpapi.TokenOnly(token), AuthReads: true, AccessLog: true,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	auth := map[string]string{"Authorization": "Bearer " + token}
	writes := []struct{ method, path, body string }{
		{"POST", "/group-user/g", "users=[1,2]&uid=42"},
		{"PUT", "/group-user/g", "users=[1,3]"},
		{"DELETE", "/group-user/g", "users=[3]"},
		{"POST", "/group-group/all", `groups=["g"]`},
		{"POST", "/batch", `{"changes":[{"op":"add","group":"h","users":[5]}],"uid":7}`},
		{"DELETE", "/user-group/5?uid=8", ""},
		{"DELETE", "/groups/g", ""},
	}
	for _, wr := range writes {
		w := sendTo(h, wr.method, wr.path, wr.body, auth)
		require.Equal(t, http.StatusOK, w.Code, "%s %s: %s", wr.method, wr.path, w.Body.String())
	}
	changes := feedOf(t, h, auth)
	require.Len(t, changes, len(writes))
	for i, c := range changes {
		assert.Equal(t, "token", c["principal"], "change %d (%s)", i+1, c["op"])
	}
	assert.Equal(t, float64(42), changes[0]["actor"], "the actor beside it")
	assert.Equal(t, float64(7), changes[4]["actor"])
	assert.NotContains(t, changes[4]["changes"].([]any)[0], "principal", "a batch's changes share its principal")

	require.Equal(t, http.StatusUnauthorized, sendTo(h, "POST", "/group-user/g", "users=[9]",
		map[string]string{"Authorization": "Bearer " + token + "x"}).Code)
	lines := logs.Lines()
	require.Len(t, lines, len(writes)+2)
	for i, line := range lines {
		assert.NotContains(t, line, token, "line %d", i+1)
		var entry map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &entry))
		if i < len(lines)-1 {
			assert.Equal(t, "token", entry["principal"], "line %d: %s", i+1, line)
			continue
		}
		assert.Equal(t, float64(http.StatusUnauthorized), entry["status"])
		assert.NotContains(t, entry, "principal", "a request refused for its credential has none")
	}
	assert.Equal(t, float64(42), mustJSON(t, lines[0])["uid"], "the acting uid beside it")
}

// mustJSON returns line, a JSON object, decoded.
func mustJSON(t *testing.T, line string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &m))
	return m
}

// Without a credential configured, a write names no principal, in the
// feed or in the access log.
func TestAChangeWithoutACredentialNamesNoPrincipal(t *testing.T) {
	h, logs := newTestHandler(t)
	require.Equal(t, http.StatusOK, sendTo(h, "POST", "/group-user/g", "users=[1]", nil).Code)
	changes := feedOf(t, h, nil)
	require.Len(t, changes, 1)
	assert.NotContains(t, changes[0], "principal")
	for _, line := range logs.Lines() {
		assert.NotContains(t, line, "principal")
	}
}

// An Idempotency-Key is its principal's: the same key and request from
// another principal is applied as a request of its own, and each
// principal's retry gets its own first reply.
func TestAnIdempotencyKeyIsItsPrincipals(t *testing.T) {
	svc := membership.NewService(memory.New(), membership.ServiceOptions{})
	h := httpapi.NewHandler(svc, httpapi.Options{})
	syncJob, dashboard := asPrincipal(h, "sync-job"), asPrincipal(h, "dashboard")
	key := map[string]string{"Idempotency-Key": "k-1"}

	first := sendTo(syncJob, "POST", "/group-user/g", "users=[1,2]", key)
	require.Equal(t, http.StatusOK, first.Code, first.Body.String())
	assert.Equal(t, "2", first.Body.String())
	other := sendTo(dashboard, "POST", "/group-user/g", "users=[1,2,3]", key)
	require.Equal(t, http.StatusOK, other.Code, "another principal's key, though another request: %s", other.Body.String())
	assert.Equal(t, "1", other.Body.String(), "applied: user 3 is new")
	assert.Empty(t, other.Header().Get("Idempotent-Replayed"))

	again := sendTo(syncJob, "POST", "/group-user/g", "users=[1,2]", key)
	require.Equal(t, http.StatusOK, again.Code)
	assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, first.Body.String(), again.Body.String(), "sync-job's own first reply")
	assert.Equal(t, first.Header().Get("X-Revision"), again.Header().Get("X-Revision"))
	reused := sendTo(dashboard, "POST", "/group-user/g", "users=[1,2]", key)
	assert.Equal(t, http.StatusUnprocessableEntity, reused.Code, "dashboard's key names its own request: %s", reused.Body.String())

	anonymous := sendTo(h, "POST", "/group-user/g", "users=[4]", key)
	assert.Equal(t, http.StatusOK, anonymous.Code, "a request with no principal has keys of its own too")
	assert.Empty(t, anonymous.Header().Get("Idempotent-Replayed"))

	changes := feedOf(t, h, nil)
	require.Len(t, changes, 3)
	var principals []string
	for _, c := range changes {
		p, _ := c["principal"].(string)
		principals = append(principals, p)
	}
	assert.Equal(t, []string{"sync-job", "dashboard", ""}, principals)
	assert.True(t, strings.HasPrefix(reused.Body.String(), `{"error":{"code":"idempotency_key_reused"`))
}
