package httpapi_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/internal/access"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/scope"
)

// testACL is the ACL of the access tests: the token of each principal is
// its name followed by -token.
const testACL = `# name     secret               rights  groups
reader     <reader>             read    team-a/* team-b
writer     <writer>             write   team-a/* team-b
reads-all  <reads-all>          read    *
writes-all <writes-all>         write   *
ops        <ops>                admin   *
billing    mtls                 write   billing/*
`

// rulesOf returns the rules of an ACL text whose secrets are written
// <name>: the hash of name-token.
func rulesOf(t *testing.T, acl string) *access.Rules {
	t.Helper()
	for {
		start := strings.Index(acl, "<")
		if start < 0 {
			break
		}
		end := strings.Index(acl[start:], ">") + start
		acl = acl[:start] + access.HashToken(acl[start+1:end]+"-token") + acl[end+1:]
	}
	principals, err := access.Parse("acl", []byte(acl))
	require.NoError(t, err)
	rules, err := access.NewRules(principals...)
	require.NoError(t, err)
	return rules
}

// accessHandler returns the API over a fresh memory store with the
// principals of testACL, holding: user 1 in team-a/x, team-a/sub, team-b,
// secret and secret/sub; team-a/sub nested in team-a/x, secret/sub in
// secret.
func accessHandler(t *testing.T, authReads bool) (http.Handler, *membership.Service) {
	t.Helper()
	store := memory.New()
	svc := membership.NewService(store, membership.ServiceOptions{})
	ctx := context.Background()
	for _, g := range []string{"team-a/x", "team-a/sub", "team-b", "secret", "secret/sub"} {
		_, err := svc.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: g, Users: []membership.User{{UID: 1}}})
		require.NoError(t, err)
	}
	for parent, child := range map[string]string{"team-a/x": "team-a/sub", "secret": "secret/sub"} {
		_, err := svc.Write(ctx, membership.Write{Op: membership.OpAddGroups, GroupID: parent, Subgroups: []membership.Subgroup{{GroupID: child}}})
		require.NoError(t, err)
	}
	rules := rulesOf(t, testACL)
	return httpapi.NewDirectoryHandler(svc, store, httpapi.Options{Access: func() *access.Rules { return rules }, AuthReads: authReads}), svc
}

// sendAsPrincipal sends one request to h with the token of principal ("" for
// none, "wrong" for a token no principal has).
func sendAsPrincipal(h http.Handler, principal, method, path, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	switch {
	case strings.HasPrefix(body, "{"):
		r.Header.Set("Content-Type", jsonType)
	case body != "":
		r.Header.Set("Content-Type", formType)
	}
	if principal != "" {
		r.Header.Set("Authorization", "Bearer "+principal+"-token")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// accessRoute is a request of the access matrix: every route, on a group
// (%s in path and body).
type accessRoute struct {
	method, path, body string
	// need is what a principal needs for it: "read" or "write" of the
	// group, "read *" or "write *" of every group, "admin", "any"
	// (a principal, whatever its rights), "open" (nothing, ever).
	need string
	// served is the status when it is served.
	served int
}

var accessRoutes = []accessRoute{
	{"GET", "/group-user/%s", "", "read", 200},
	{"GET", "/group-user/%s?transitive=true", "", "read", 200},
	{"POST", "/group-user/%s", "users=[2]", "write", 200},
	{"PUT", "/group-user/%s", "users=[1]", "write", 200},
	{"DELETE", "/group-user/%s", "users=[1]", "write", 200},
	{"GET", "/group-user/%s/1", "", "read", 200},
	{"GET", "/group-user/%s/1?transitive=true", "", "read", 200},
	{"GET", "/group-group/%s", "", "read", 200},
	{"GET", "/group-group/%s?transitive=true", "", "read", 200},
	{"POST", "/group-group/%s", `groups=["team-a/new"]`, "write", 200},
	{"PUT", "/group-group/%s", `groups=["team-a/new"]`, "write", 200},
	{"DELETE", "/group-group/%s", `groups=["team-a/new"]`, "write", 200},
	{"GET", "/group-parents/%s", "", "read", 200},
	{"POST", "/batch", `{"changes":[{"op":"add","group":"%s","users":[2]}]}`, "write", 200},
	{"POST", "/check", `{"checks":[{"group":"%s","uid":1}]}`, "read", 200},
	{"POST", "/check", `{"checks":[{"group":"%s","uid":1}],"transitive":true}`, "read", 200},
	{"DELETE", "/groups/%s", "", "write", 200},
	{"GET", "/groups", "", "any", 200},
	{"GET", "/user-group/1", "", "any", 200},
	{"DELETE", "/user-group/1", "", "write *", 200},
	{"GET", "/changes", "", "read *", 200},
	{"GET", "/backup", "", "admin", 503}, // the test's store has no backups
	{"GET", "/metrics", "", "any", 200},
	{"GET", "/openapi.json", "", "any", 200},
	{"GET", "/healthz", "", "open", 200},
	{"GET", "/readyz", "", "open", 200},
}

// principalRights are the principals of testACL, and what each may do
// to a group of the matrix: team-a/x in the scopes of reader and writer,
// secret outside.
var principalRights = map[string]struct {
	right scope.Right
	all   bool // on every group
}{
	"reader": {scope.Read, false}, "writer": {scope.Write, false},
	"reads-all": {scope.Read, true}, "writes-all": {scope.Write, true}, "ops": {scope.Admin, true},
}

// wantAccess returns the status rt gets from principal ("" none, "wrong"
// a token no principal has) on group, with authReads.
func wantAccess(rt accessRoute, principal, group string, authReads bool) int {
	if rt.need == "open" {
		return rt.served
	}
	isRead := rt.method == "GET" || rt.path == "/check"
	if isRead && !authReads && rt.need != "admin" {
		return rt.served // reads are anyone's
	}
	p, known := principalRights[principal]
	if !known {
		return http.StatusUnauthorized
	}
	inScope := p.all || group == "team-a/x"
	allowed := false
	switch rt.need {
	case "any":
		allowed = true
	case "read":
		allowed = inScope
	case "write":
		allowed = inScope && p.right >= scope.Write
	case "read *":
		allowed = p.all
	case "write *":
		allowed = p.all && p.right >= scope.Write
	case "admin":
		allowed = p.right == scope.Admin
	}
	if !allowed {
		return http.StatusForbidden
	}
	return rt.served
}

// TestAccessMatrix sends every route as every principal (and none, and a
// wrong token), on a group within the scoped principals' groups and one
// outside, with -auth-reads and without, each to a fresh service, and
// checks each status against what the principal's rights say: a 401 with
// its challenge, a 403 naming the principal, or the route's answer.
func TestAccessMatrix(t *testing.T) {
	principals := []string{"", "wrong", "reader", "writer", "reads-all", "writes-all", "ops"}
	for _, authReads := range []bool{false, true} {
		for _, rt := range accessRoutes {
			for _, group := range []string{"team-a/x", "secret"} {
				if !strings.Contains(rt.path+rt.body, "%s") && group != "team-a/x" {
					continue // the route names no group
				}
				path, body := rt.path, rt.body
				if strings.Contains(path, "%s") {
					path = fmt.Sprintf(path, url.PathEscape(group))
				}
				if strings.Contains(body, "%s") {
					body = fmt.Sprintf(body, group)
				}
				for _, principal := range principals {
					h, _ := accessHandler(t, authReads)
					w := sendAsPrincipal(h, principal, rt.method, path, body)
					want := wantAccess(rt, principal, group, authReads)
					name := fmt.Sprintf("auth-reads=%v %s %s as %q", authReads, rt.method, path, principal)
					if !assert.Equal(t, want, w.Code, "%s: %s", name, w.Body.String()) {
						continue
					}
					switch want {
					case http.StatusUnauthorized:
						assert.Equal(t, `Bearer realm="membership"`, w.Header().Get("WWW-Authenticate"), name)
						assert.Equal(t, "unauthorized", errorCode(t, w), name)
					case http.StatusForbidden:
						code, message := errorOf(w)
						assert.Equal(t, "forbidden", code, name)
						assert.Contains(t, message, fmt.Sprintf("principal %q lacks ", principal), name)
					}
				}
			}
		}
	}
}

func TestForbiddenNamesThePrincipalTheRightAndTheGroup(t *testing.T) {
	h, svc := accessHandler(t, true)
	_, before, err := svc.Changes(context.Background(), membership.ChangeOptions{})
	require.NoError(t, err)
	tests := []struct {
		name, principal, method, path, body, message string
	}{
		{"a write", "reader", "POST", "/group-user/team-a%2Fx", "users=[2]", `principal "reader" lacks write on group "team-a/x"`},
		{"a write outside", "writer", "DELETE", "/groups/secret", "", `principal "writer" lacks write on group "secret"`},
		{"a batch crossing its scope", "writer", "POST", "/batch",
			`{"changes":[{"op":"add","group":"team-a/x","users":[2]},{"op":"remove","group":"team-b","users":[1]},{"op":"add","group":"secret","users":[2]}]}`,
			`changes element 2 (group "secret"): principal "writer" lacks write on group "secret"`},
		{"a nesting of a group it cannot read", "writer", "POST", "/group-group/team-b", `groups=["team-a/x","secret"]`,
			`groups element 1: principal "writer" lacks read on group "secret": nesting a group needs read on it`},
		{"a check crossing its scope", "reader", "POST", "/check", `{"checks":[{"group":"team-b","uid":1},{"group":"secret","uid":1}]}`,
			`checks element 1 (group "secret"): principal "reader" lacks read on group "secret"`},
		{"the feed", "reader", "GET", "/changes", "", `principal "reader" lacks read on every group (*): the change feed holds the changes of every group`},
		{"a backup", "writes-all", "GET", "/backup", "", `principal "writes-all" lacks admin: /backup is the admins'`},
		{"a user out of every group", "writer", "DELETE", "/user-group/1", "",
			`principal "writer" lacks write on every group (*): removing a user from every group writes to every group`},
	}
	for _, tt := range tests {
		w := sendAsPrincipal(h, tt.principal, tt.method, tt.path, tt.body)
		require.Equal(t, http.StatusForbidden, w.Code, "%s: %s", tt.name, w.Body.String())
		assert.JSONEq(t, fmt.Sprintf(`{"error":{"code":"forbidden","message":%q}}`, tt.message), w.Body.String(), tt.name)
	}
	_, after, err := svc.Changes(context.Background(), membership.ChangeOptions{})
	require.NoError(t, err)
	assert.Equal(t, before, after, "nothing was changed")

	// team-a/x reaches secret once secret is nested in it, by an admin.
	w := sendAsPrincipal(h, "ops", "POST", "/group-group/team-a%2Fsub", `groups=["secret"]`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	const reaching = `principal "reader" lacks read on group "secret", which group "team-a/x" holds through nesting: a transitive read needs read on every group below`
	for _, path := range []string{"/group-user/team-a%2Fx?transitive=true", "/group-user/team-a%2Fx/1?transitive=true"} {
		w = sendAsPrincipal(h, "reader", "GET", path, "")
		assert.Equal(t, http.StatusForbidden, w.Code, path)
		assert.JSONEq(t, fmt.Sprintf(`{"error":{"code":"forbidden","message":%q}}`, reaching), w.Body.String(), path)
	}
	w = sendAsPrincipal(h, "reader", "POST", "/check", `{"checks":[{"group":"team-b","uid":1},{"group":"team-a/x","uid":1}],"transitive":true}`)
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.JSONEq(t, fmt.Sprintf(`{"error":{"code":"forbidden","message":%q}}`, `checks element 1 (group "team-a/x"): `+reaching), w.Body.String())
	w = sendAsPrincipal(h, "reader", "GET", "/group-user/team-a%2Fx", "")
	assert.Equal(t, http.StatusOK, w.Code, "the direct list does not reach secret")
	w = sendAsPrincipal(h, "reader", "GET", "/group-group/team-a%2Fsub", "")
	assert.Equal(t, http.StatusForbidden, w.Code, "the list of subgroups names secret")
}

func TestListingsShowOnlyTheGroupsOfTheScope(t *testing.T) {
	h, _ := accessHandler(t, true)
	w := sendAsPrincipal(h, "reader", "GET", "/groups", "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.JSONEq(t, `[{"group":"team-a/sub","members":1},{"group":"team-a/x","members":1,"subgroups":1},{"group":"team-b","members":1}]`, w.Body.String())
	assert.Equal(t, "3", w.Header().Get("X-Total-Count"), "secret and secret/sub are not counted")
	scoped := w.Header().Get("ETag")

	w = sendAsPrincipal(h, "reader", "GET", "/groups?limit=1&after=team-a%2Fsub", "")
	assert.JSONEq(t, `[{"group":"team-a/x","members":1,"subgroups":1}]`, w.Body.String())
	assert.Equal(t, "3", w.Header().Get("X-Total-Count"))
	assert.Equal(t, `</groups?limit=1&after=team-a%2Fx>; rel="next"`, w.Header().Get("Link"))
	w = sendAsPrincipal(h, "reader", "GET", "/groups?limit=1&after=team-a%2Fx", "")
	assert.JSONEq(t, `[{"group":"team-b","members":1}]`, w.Body.String())
	assert.Empty(t, w.Header().Get("Link"), "the last page of the scope: secret follows, unseen")
	w = sendAsPrincipal(h, "reader", "GET", "/groups?prefix=secret", "")
	assert.JSONEq(t, `[]`, w.Body.String())
	assert.Equal(t, "0", w.Header().Get("X-Total-Count"))

	w = sendAsPrincipal(h, "ops", "GET", "/groups", "")
	assert.Equal(t, "5", w.Header().Get("X-Total-Count"))
	whole := w.Header().Get("ETag")
	assert.NotEqual(t, whole, scoped, "the same state lists other groups for another scope")
	assert.Regexp(t, `^"[0-9a-f]{16}-\d+"$`, whole, "every group: the ETag of a store's state, as ever")
	assert.Regexp(t, `^"[0-9a-f]{16}-\d+-[0-9a-f]{16}"$`, scoped)
	assert.Equal(t, scoped, sendAsPrincipal(h, "writer", "GET", "/groups", "").Header().Get("ETag"), "the same groups, the same ETag")

	r := httptest.NewRequest("GET", "/groups", nil)
	r.Header.Set("Authorization", "Bearer reader-token")
	r.Header.Set("If-None-Match", scoped)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	assert.Equal(t, http.StatusNotModified, w.Code)
	r.Header.Set("Authorization", "Bearer ops-token")
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	assert.Equal(t, http.StatusOK, w.Code, "another scope's ETag does not match")

	w = sendAsPrincipal(h, "reader", "GET", "/user-group/1", "")
	assert.JSONEq(t, `["team-a/sub","team-a/x","team-b"]`, w.Body.String())
	assert.Equal(t, "3", w.Header().Get("X-Total-Count"))
	w = sendAsPrincipal(h, "reader", "GET", "/user-group/1?limit=2", "")
	assert.JSONEq(t, `["team-a/sub","team-a/x"]`, w.Body.String())
	assert.Equal(t, "3", w.Header().Get("X-Total-Count"))
	assert.Equal(t, `</user-group/1?limit=2&after=team-a%2Fx>; rel="next"`, w.Header().Get("Link"))
	w = sendAsPrincipal(h, "reader", "GET", "/user-group/1?transitive=true", "")
	assert.Equal(t, http.StatusForbidden, w.Code, "listed in part, the groups through nesting would tell of those outside")
	assert.Contains(t, w.Body.String(), `lacks read on every group (*)`)
	assert.NotContains(t, w.Body.String(), "secret")
	w2 := sendAsPrincipal(h, "reader", "GET", "/user-group/99?transitive=true", "")
	assert.Equal(t, w.Code, w2.Code, "a user in no group is refused alike")
	assert.Equal(t, w.Body.String(), w2.Body.String(), "a user in no group is refused alike")
	w = sendAsPrincipal(h, "ops", "GET", "/user-group/1", "")
	assert.Equal(t, "5", w.Header().Get("X-Total-Count"))

	h, _ = accessHandler(t, false)
	w = sendAsPrincipal(h, "reader", "GET", "/groups", "")
	assert.Equal(t, "5", w.Header().Get("X-Total-Count"), "without -auth-reads, reads are anyone's, whole")
}

// blockingStore is a memory store whose first write says it started, and
// waits for release; the others, once it is closed, do not wait.
type blockingStore struct {
	*memory.Store
	started chan struct{}
	release chan struct{}
}

func (s *blockingStore) Write(ctx context.Context, w membership.Write) (membership.Result, error) {
	select {
	case s.started <- struct{}{}:
		<-s.release
	case <-s.release:
	}
	return s.Store.Write(ctx, w)
}

// A request keeps the rules it started with: new rules in force while it
// runs neither cut it nor change what it may do; the next request has
// them.
func TestARequestKeepsTheRulesItStartedWith(t *testing.T) {
	st := &blockingStore{Store: memory.New(), started: make(chan struct{}), release: make(chan struct{})}
	var rules atomic.Pointer[access.Rules]
	rules.Store(rulesOf(t, testACL))
	h := httpapi.NewHandler(membership.NewService(st, membership.ServiceOptions{}),
		httpapi.Options{Access: rules.Load})
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- sendAsPrincipal(h, "writer", "POST", "/group-user/team-b", "users=[1]") }()
	<-st.started
	rules.Store(rulesOf(t, "writer <writer-2> read team-b\n")) // writer's token rotated, and its write taken away

	close(st.release)
	w := <-done
	assert.Equal(t, http.StatusOK, w.Code, "the request in flight was not cut: %s", w.Body.String())
	w = sendAsPrincipal(h, "writer", "POST", "/group-user/team-b", "users=[2]")
	assert.Equal(t, http.StatusUnauthorized, w.Code, "the old token stopped at once")
	w = sendAsPrincipal(h, "writer-2", "POST", "/group-user/team-b", "users=[2]")
	assert.Equal(t, http.StatusForbidden, w.Code, "the new rules hold from the next request")
}

// A client certificate the listener verified names an mtls principal by
// its subject's common name; one it did not verify names nobody, and a
// bearer token, when sent, decides alone.
func TestAClientCertificateNamesItsPrincipal(t *testing.T) {
	h, _ := accessHandler(t, true)
	send := func(cn string, verified bool, token string) int {
		r := httptest.NewRequest("POST", "/group-user/billing%2Feu", strings.NewReader("users=[1]"))
		r.Header.Set("Content-Type", formType)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		cert := &x509.Certificate{Subject: pkix.Name{CommonName: cn}}
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
		if verified {
			r.TLS.VerifiedChains = [][]*x509.Certificate{{cert}}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	assert.Equal(t, http.StatusOK, send("billing", true, ""))
	assert.Equal(t, http.StatusUnauthorized, send("billing", false, ""), "not verified")
	assert.Equal(t, http.StatusUnauthorized, send("reader", true, ""), "reader is a principal of a token, not of a certificate")
	assert.Equal(t, http.StatusUnauthorized, send("billing", true, "wrong-token"), "a token sent decides")
	assert.Equal(t, http.StatusForbidden, send("billing", true, "reader-token"))
}

// A principal of the ACL file is named as the token's is: in the change
// it makes and on its request's line of the access log, a 403's
// included; a 401's names none.
func TestAnACLPrincipalIsNamedInTheFeedAndTheLog(t *testing.T) {
	logs := &syncBuffer{}
	rules := rulesOf(t, testACL)
	h := httpapi.NewHandler(membership.NewService(memory.New(), membership.ServiceOptions{}), httpapi.Options{
		Access: func() *access.Rules { return rules }, AccessLog: true, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	require.Equal(t, http.StatusOK, sendAsPrincipal(h, "writer", "POST", "/group-user/team-b", "users=[1]").Code)
	require.Equal(t, http.StatusForbidden, sendAsPrincipal(h, "writer", "POST", "/group-user/secret", "users=[1]").Code)
	require.Equal(t, http.StatusForbidden, sendAsPrincipal(h, "reader", "GET", "/backup", "").Code)
	require.Equal(t, http.StatusUnauthorized, sendAsPrincipal(h, "wrong", "POST", "/group-user/team-b", "users=[2]").Code)
	require.Equal(t, http.StatusOK, sendAsPrincipal(h, "reader", "GET", "/group-user/team-b", "").Code)

	w := sendAsPrincipal(h, "ops", "GET", "/changes", "")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Body.String(), `"principal":"writer","group":"team-b"`)
	var named []any
	for _, line := range logs.Lines()[:5] {
		var entry map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &entry))
		named = append(named, entry["principal"])
		assert.NotContains(t, line, "-token", "never a token in the log")
	}
	assert.Equal(t, []any{"writer", "writer", "reader", nil, "reader"}, named, "a read without -auth-reads names the principal it presented")
}

// TestAScopedPrincipalWaitsForARevision: X-Min-Revision waits on the
// latest revision, which reads no change of the feed, so a principal that
// may not read the feed may send it.
func TestAScopedPrincipalWaitsForARevision(t *testing.T) {
	h, svc := accessHandler(t, true)
	_, latest, err := svc.Changes(context.Background(), membership.ChangeOptions{Limit: 1})
	require.NoError(t, err)
	for _, principal := range []string{"reader", "writer", "reads-all"} {
		r := httptest.NewRequest("GET", "/group-user/team-b", nil)
		r.Header.Set("Authorization", "Bearer "+principal+"-token")
		r.Header.Set("X-Min-Revision", strconv.FormatUint(uint64(latest), 10))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Equal(t, http.StatusOK, w.Code, "%s: %s", principal, w.Body.String())
	}
	w := sendAsPrincipal(h, "reader", "GET", "/changes", "")
	assert.Equal(t, http.StatusForbidden, w.Code, "the feed itself stays refused")
}

// TestTwoAuthorizationHeadersAreNoCredential: which of two a proxy before
// the service read is unknown, so neither is taken, in either order.
func TestTwoAuthorizationHeadersAreNoCredential(t *testing.T) {
	h, _ := accessHandler(t, true)
	for _, tokens := range [][]string{{"ops-token", "reader-token"}, {"reader-token", "ops-token"}} {
		r := httptest.NewRequest("GET", "/group-user/secret", nil)
		for _, token := range tokens {
			r.Header.Add("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Equal(t, http.StatusUnauthorized, w.Code, "%v: %s", tokens, w.Body.String())
		assert.NotContains(t, w.Body.String(), `"uid"`)
	}
}

// TestARevalidationOfAListOfGroupsIsCheckedAsTheList: a list of groups
// below or above a group that the principal may not read whole is 403,
// with or without If-None-Match, never 304: a client that cached it
// before its scope narrowed must not keep it.
func TestARevalidationOfAListOfGroupsIsCheckedAsTheList(t *testing.T) {
	h, svc := accessHandler(t, true)
	_, err := svc.Write(context.Background(), membership.Write{Op: membership.OpAddGroups, GroupID: "team-a/x",
		Subgroups: []membership.Subgroup{{GroupID: "secret"}}})
	require.NoError(t, err)
	for _, tt := range []struct {
		path   string
		scoped int // the answer to reader and writer, of team-a/* and team-b
	}{
		{"/group-group/team-a%2Fx", http.StatusForbidden}, // secret is below
		{"/group-parents/secret", http.StatusForbidden},
		{"/group-group/secret", http.StatusForbidden},
		{"/group-parents/team-a%2Fsub", http.StatusNotModified}, // team-a/x is above
	} {
		w := sendAsPrincipal(h, "ops", "GET", tt.path, "")
		require.Equal(t, http.StatusOK, w.Code, "%s: %s", tt.path, w.Body.String())
		etag := w.Header().Get("ETag")
		require.NotEmpty(t, etag)
		for principal, want := range map[string]int{"ops": http.StatusNotModified, "reads-all": http.StatusNotModified,
			"reader": tt.scoped, "writer": tt.scoped} {
			r := httptest.NewRequest("GET", tt.path, nil)
			r.Header.Set("Authorization", "Bearer "+principal+"-token")
			r.Header.Set("If-None-Match", etag)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			assert.Equal(t, want, w.Code, "%s as %s: %s", tt.path, principal, w.Body.String())
		}
	}
}
