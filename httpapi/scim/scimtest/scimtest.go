// Package scimtest is the SCIM routes' tests, for any store: Run runs
// every route, filter, PATCH form and error, the recorded sequences of
// Okta and Entra ID, and PATCHes racing other writes, on stores a
// function makes. The memory store's tests run it (package scim), so do
// the durable store's and the PostgreSQL store's, on one instance and on
// two.
package scimtest

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi/scim"
	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/directory"
)

// Store is a store with a directory: every store of this service.
type Store interface {
	membership.Store
	directory.Reader
}

// NewStore makes a store for one test; it closes it when the test ends.
type NewStore func(t *testing.T) Store

// Run runs the SCIM tests on stores newStore makes.
func Run(t *testing.T, newStore NewStore) {
	t.Run("discovery", func(t *testing.T) { testDiscovery(t, newServer(t, newStore)) })
	t.Run("users", func(t *testing.T) { testUsers(t, newServer(t, newStore)) })
	t.Run("user PATCH forms", func(t *testing.T) { testUserPatches(t, newServer(t, newStore)) })
	t.Run("user lists and filters", func(t *testing.T) { testUserLists(t, newServer(t, newStore)) })
	t.Run("groups", func(t *testing.T) { testGroups(t, newServer(t, newStore)) })
	t.Run("group PATCH forms", func(t *testing.T) { testGroupPatches(t, newServer(t, newStore)) })
	t.Run("group lists and filters", func(t *testing.T) { testGroupLists(t, newServer(t, newStore)) })
	t.Run("active false", func(t *testing.T) { testDeactivation(t, newServer(t, newStore)) })
	t.Run("versions and If-Match", func(t *testing.T) { testVersions(t, newServer(t, newStore)) })
	t.Run("errors and bounds", func(t *testing.T) { testErrors(t, newServer(t, newStore)) })
	t.Run("recorded sequences", func(t *testing.T) { testSequences(t, newStore) })
	t.Run("PATCHes beside other writes", func(t *testing.T) { testConcurrentPatches(t, newServer(t, newStore)) })
}

// server is the SCIM routes over one store, called in the test's process.
type server struct {
	t   *testing.T
	svc *membership.Service
	dir *directory.Service
	mux *http.ServeMux
}

// newServer returns the SCIM routes over a store newStore makes.
func newServer(t *testing.T, newStore NewStore) *server {
	t.Helper()
	store := newStore(t)
	svc, dir := membership.NewService(store, membership.ServiceOptions{}), directory.NewService(store)
	mux := http.NewServeMux()
	for _, r := range scim.Routes(scim.Deps{Service: svc, Directory: dir, MaxBodyBytes: 1 << 20, Bodies: budget.New(64 << 20), Replies: budget.New(64 << 20)}) {
		mux.Handle(r.Method+" "+r.Path, r.Handler)
	}
	return &server{t: t, svc: svc, dir: dir, mux: mux}
}

// reply is what a request got: its status, headers and body, the body
// decoded when it is JSON.
type reply struct {
	status int
	header http.Header
	body   []byte
	json   map[string]any
}

// do sends a request with body (JSON text, "" for none) and headers, as
// name: value pairs.
func (s *server) do(method, path, body string, headers ...string) reply {
	s.t.Helper()
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, path, nil)
	} else {
		r = httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/scim+json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	s.mux.ServeHTTP(w, r)
	rep := reply{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
	if len(rep.body) > 0 {
		require.NoError(s.t, json.Unmarshal(rep.body, &rep.json), "%s %s: %s", method, path, rep.body)
		assert.Equal(s.t, "application/scim+json", w.Header().Get("Content-Type"), "%s %s", method, path)
	}
	return rep
}

// must sends a request and requires the status want.
func (s *server) must(want int, method, path, body string, headers ...string) reply {
	s.t.Helper()
	rep := s.do(method, path, body, headers...)
	require.Equal(s.t, want, rep.status, "%s %s: %s", method, path, rep.body)
	return rep
}

// scimError checks that rep is a SCIM error of status and scimType ("" for
// none).
func scimError(t *testing.T, rep reply, status int, scimType string) {
	t.Helper()
	require.Equal(t, status, rep.status, "%s", rep.body)
	assert.Equal(t, []any{"urn:ietf:params:scim:api:messages:2.0:Error"}, rep.json["schemas"])
	assert.Equal(t, fmt.Sprint(status), rep.json["status"], "the status, a string")
	if scimType == "" {
		assert.NotContains(t, rep.json, "scimType")
	} else {
		assert.Equal(t, scimType, rep.json["scimType"])
	}
	assert.NotEmpty(t, rep.json["detail"])
}

// members returns the direct members of group as the service's own reads
// list them (GET /group-user/{groupID}): uid and nickname.
func (s *server) members(group string) []membership.Member {
	s.t.Helper()
	var got []membership.Member
	_, err := s.svc.ListMembers(context.Background(), group, membership.ListOptions{}, func(_ int, ms iter.Seq[membership.Member]) {
		got = slices.Collect(ms)
	})
	require.NoError(s.t, err)
	return got
}

// uids returns the uids of members.
func uids(members []membership.Member) []membership.UID {
	out := []membership.UID{}
	for _, m := range members {
		out = append(out, m.UID)
	}
	return out
}

// groupsOf returns the groups uid is in, as GET /user-group/{uid} lists
// them.
func (s *server) groupsOf(uid membership.UID) []string {
	s.t.Helper()
	var got []string
	_, err := s.svc.UserGroups(context.Background(), uid, membership.GroupListOptions{}, func(_ int, ids iter.Seq[string]) {
		got = slices.Collect(ids)
	})
	require.NoError(s.t, err)
	return got
}

// feedSince returns the changes after rev.
func (s *server) feedSince(rev membership.Revision) []membership.Change {
	s.t.Helper()
	changes, _, err := s.svc.Changes(context.Background(), membership.ChangeOptions{After: rev})
	require.NoError(s.t, err)
	return changes
}

// latest returns the latest revision of the feed.
func (s *server) latest() membership.Revision {
	s.t.Helper()
	_, rev, err := s.svc.Changes(context.Background(), membership.ChangeOptions{Limit: 1})
	require.NoError(s.t, err)
	return rev
}

// str returns the string at the path of keys in v.
func str(v any, keys ...string) string {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	s, _ := v.(string)
	return s
}

// createUser creates a user of userName (and displayName, when not "")
// and returns its id.
func (s *server) createUser(userName, displayName string) string {
	s.t.Helper()
	body := map[string]any{"schemas": []string{"urn:ietf:params:scim:schemas:core:2.0:User"}, "userName": userName, "active": true}
	if displayName != "" {
		body["displayName"] = displayName
	}
	b, _ := json.Marshal(body)
	rep := s.must(http.StatusCreated, "POST", "/scim/v2/Users", string(b))
	return str(rep.json, "id")
}

// patchOps returns a PatchOp message of the operations given as JSON.
func patchOps(ops ...string) string {
	return `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],"Operations":[` + strings.Join(ops, ",") + `]}`
}
