package httpapi_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
)

// newNestingHandler returns the API over a fresh memory store whose
// chains of nestings are at most maxDepth deep.
func newNestingHandler(t *testing.T, maxDepth int) http.Handler {
	t.Helper()
	return newNestingHandlerWith(t, membership.ServiceOptions{MaxDepth: maxDepth})
}

// newNestingHandlerWith returns a handler over an empty memory store and
// a Service of opts, with the tests' bound on users.
func newNestingHandlerWith(t *testing.T, opts membership.ServiceOptions) http.Handler {
	t.Helper()
	opts.MaxUsers = testMaxUsers
	svc := membership.NewService(memory.New(), opts)
	return httpapi.NewHandler(svc, httpapi.Options{Logger: slog.New(slog.DiscardHandler), MaxBodyBytes: testMaxBody, ListCacheBytes: 1 << 20})
}

// mustDo sends a request, a form body unless header sets a Content-Type,
// and requires wantStatus.
func mustDo(t *testing.T, h http.Handler, wantStatus int, method, path, body string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	if header == nil {
		header = map[string]string{}
	}
	if _, ok := header["Content-Type"]; !ok && body != "" {
		header["Content-Type"] = formType
	}
	w := sendTo(h, method, path, body, header)
	require.Equal(t, wantStatus, w.Code, "%s %s: %s", method, path, w.Body.String())
	return w
}

func bodyOf(w *httptest.ResponseRecorder) string { return w.Body.String() }

// staffHandler returns the API over the nesting of the examples:
// all-staff holds engineering, which holds backend (users 1 and 2) and
// frontend (users 2 and 3, 3 named Tao).
func staffHandler(t *testing.T) http.Handler {
	t.Helper()
	h := newNestingHandler(t, 0)
	mustDo(t, h, 200, "POST", "/group-user/backend", "users=[1,2]", nil)
	mustDo(t, h, 200, "POST", "/group-user/frontend", `users=[2,[3,"Tao"]]`, nil)
	mustDo(t, h, 200, "POST", "/group-group/engineering", `groups=["backend","frontend"]`, nil)
	mustDo(t, h, 200, "POST", "/group-group/all-staff", `groups=["engineering"]`, nil)
	return h
}

func TestNestingWritesAndLists(t *testing.T) {
	h := newNestingHandler(t, 0)
	resp := mustDo(t, h, 200, "POST", "/group-group/eng", `groups=["backend",{"group":"frontend"}]&uid=42`, nil)
	assert.Equal(t, "2", bodyOf(resp))
	assert.Equal(t, "1", resp.Header().Get("X-Revision"))

	resp = mustDo(t, h, 200, "POST", "/group-group/eng", `{"groups":["backend","frontend"]}`, map[string]string{"Content-Type": jsonType})
	assert.Equal(t, "0", bodyOf(resp), "groups already nested count 0")
	assert.Equal(t, "1", resp.Header().Get("X-Revision"), "a write that changes nothing takes no revision")

	resp = mustDo(t, h, 200, "GET", "/group-group/eng", "", nil)
	assert.JSONEq(t, `[{"group":"backend"},{"group":"frontend"}]`, bodyOf(resp))
	assert.Equal(t, "2", resp.Header().Get("X-Total-Count"))
	assert.Equal(t, "no-cache", resp.Header().Get("Cache-Control"))
	etag := resp.Header().Get("ETag")
	assert.Regexp(t, `^"[0-9a-f]{16}-1"$`, etag)
	direct := mustDo(t, h, 200, "GET", "/group-user/eng", "", nil)
	assert.Equal(t, etag, direct.Header().Get("ETag"), "a group's ETag covers its members and its subgroups")

	resp = mustDo(t, h, 200, "GET", "/group-parents/backend", "", nil)
	assert.JSONEq(t, `[{"group":"eng"}]`, bodyOf(resp))
	assert.Equal(t, "1", resp.Header().Get("X-Total-Count"))

	resp = mustDo(t, h, 200, "PUT", "/group-group/eng", `groups=["frontend","ops"]`, nil)
	assert.Equal(t, `{"added":1,"removed":1}`, bodyOf(resp))
	assert.Equal(t, "2", resp.Header().Get("X-Revision"))
	resp = mustDo(t, h, 200, "DELETE", "/group-group/eng", `groups=["ops","nobody"]`, nil)
	assert.Equal(t, "1", bodyOf(resp))
	resp = mustDo(t, h, 200, "GET", "/group-group/eng", "", nil)
	assert.JSONEq(t, `[{"group":"frontend"}]`, bodyOf(resp))
	resp = mustDo(t, h, 200, "GET", "/group-parents/backend", "", nil)
	assert.Equal(t, "[]", bodyOf(resp))
	resp = mustDo(t, h, 200, "GET", "/group-group/nobody", "", nil)
	assert.Equal(t, "[]", bodyOf(resp), "a group without subgroups lists none, not an error")
	assert.Equal(t, "0", resp.Header().Get("X-Total-Count"))

	resp = mustDo(t, h, 200, "PUT", "/group-group/eng", `{"groups":[]}`, map[string]string{"Content-Type": jsonType})
	assert.Equal(t, `{"added":0,"removed":1}`, bodyOf(resp))
}

func TestNestingExpiries(t *testing.T) {
	h := newNestingHandler(t, 0)
	at := time.Now().UTC().Add(time.Hour).Truncate(time.Millisecond)
	mustDo(t, h, 200, "POST", "/group-group/eng", `{"groups":["a",{"group":"b","ttl":"4h"},{"group":"c","expires":"`+at.Format(time.RFC3339Nano)+`"}]}`,
		map[string]string{"Content-Type": jsonType})
	resp := mustDo(t, h, 200, "GET", "/group-group/eng", "", nil)
	body := bodyOf(resp)
	assert.Contains(t, body, `{"group":"a"},{"group":"b","expires":"`)
	assert.Contains(t, body, `{"group":"c","expires":"`+at.Format("2006-01-02T15:04:05.000Z")+`"}`)
	resp = mustDo(t, h, 200, "GET", "/group-parents/c", "", nil)
	assert.Equal(t, `[{"group":"eng","expires":"`+at.Format("2006-01-02T15:04:05.000Z")+`"}]`, bodyOf(resp))
	resp = mustDo(t, h, 200, "GET", "/group-group/eng?transitive=true", "", nil)
	assert.Equal(t, `[{"group":"a"},{"group":"b"},{"group":"c"}]`, bodyOf(resp), "transitive lists give no expiry")

	mustDo(t, h, 200, "POST", "/group-user/c", `{"users":[{"uid":7,"expires":"`+at.Add(time.Hour).Format(time.RFC3339Nano)+`"}]}`, map[string]string{"Content-Type": jsonType})
	resp = mustDo(t, h, 200, "GET", "/group-user/eng?transitive=true", "", nil)
	assert.Equal(t, `[{"uid":7,"nickname":"","expires":"`+at.Format("2006-01-02T15:04:05.000Z")+`"}]`, bodyOf(resp),
		"a path ends at the earliest expiry on it: the nesting's, before the membership's")
	resp = mustDo(t, h, 200, "GET", "/group-user/eng/7?transitive=true", "", nil)
	assert.Equal(t, `{"uid":7,"nickname":"","expires":"`+at.Format("2006-01-02T15:04:05.000Z")+`","via":["eng","c"]}`, bodyOf(resp))

	mustDo(t, h, 200, "POST", "/group-group/eng", `{"groups":[{"group":"c","expires":null},"b"]}`, map[string]string{"Content-Type": jsonType})
	resp = mustDo(t, h, 200, "GET", "/group-user/eng?transitive=true", "", nil)
	assert.Equal(t, `[{"uid":7,"nickname":"","expires":"`+at.Add(time.Hour).Format("2006-01-02T15:04:05.000Z")+`"}]`, bodyOf(resp),
		"with the nesting permanent, the membership's expiry ends the path")
	resp = mustDo(t, h, 200, "GET", "/group-group/eng", "", nil)
	assert.Contains(t, bodyOf(resp), `{"group":"b","expires":"`, "a group named without an expiry keeps the one it has")
	assert.Contains(t, bodyOf(resp), `{"group":"c"}]`, "expires null makes the nesting permanent")
}

func TestNestingPaging(t *testing.T) {
	h := newNestingHandler(t, 0)
	mustDo(t, h, 200, "POST", "/group-group/top", `groups=["a/1","b","c"]`, nil)
	mustDo(t, h, 200, "POST", "/group-group/c", `groups=["d"]`, nil)
	tests := []struct {
		path, wantBody, wantTotal, wantLink string
	}{
		{"/group-group/top?limit=2", `[{"group":"a/1"},{"group":"b"}]`, "3", "/group-group/top?limit=2&after=b"},
		{"/group-group/top?limit=2&after=b", `[{"group":"c"}]`, "3", ""},
		{"/group-group/top?after=a%2F1", `[{"group":"b"},{"group":"c"}]`, "3", ""},
		{"/group-group/top?limit=3&transitive=true", `[{"group":"a/1"},{"group":"b"},{"group":"c"}]`, "4", "/group-group/top?limit=3&after=c&transitive=true"},
		{"/group-group/top?limit=3&after=c&transitive=true", `[{"group":"d"}]`, "4", ""},
		{"/group-parents/d?transitive=true&limit=1", `[{"group":"c"}]`, "2", "/group-parents/d?limit=1&after=c&transitive=true"},
		{"/group-parents/d?transitive=false", `[{"group":"c"}]`, "1", ""},
		{"/group-parents/a%2F1?limit=1", `[{"group":"top"}]`, "1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp := mustDo(t, h, 200, "GET", tt.path, "", nil)
			assert.Equal(t, tt.wantBody, bodyOf(resp))
			assert.Equal(t, tt.wantTotal, resp.Header().Get("X-Total-Count"))
			link := ""
			if l := resp.Header().Get("Link"); l != "" {
				link = strings.TrimSuffix(strings.TrimPrefix(l, "<"), `>; rel="next"`)
			}
			assert.Equal(t, tt.wantLink, link)
		})
	}
	head := sendTo(h, "HEAD", "/group-group/top?transitive=true", "", nil)
	assert.Equal(t, 200, head.Code)
	assert.Equal(t, "4", head.Header().Get("X-Total-Count"))
}

func TestTransitiveReadsOfUsers(t *testing.T) {
	h := staffHandler(t)

	resp := mustDo(t, h, 200, "GET", "/group-user/all-staff?transitive=true", "", nil)
	assert.Equal(t, `[{"uid":1,"nickname":""},{"uid":2,"nickname":""},{"uid":3,"nickname":"Tao"}]`, bodyOf(resp))
	assert.Equal(t, "3", resp.Header().Get("X-Total-Count"))
	resp = mustDo(t, h, 200, "GET", "/group-user/all-staff?transitive=true&limit=2", "", nil)
	assert.Equal(t, `[{"uid":1,"nickname":""},{"uid":2,"nickname":""}]`, bodyOf(resp))
	assert.Equal(t, "3", resp.Header().Get("X-Total-Count"), "the exact number of distinct users")
	assert.Equal(t, `</group-user/all-staff?limit=2&after=2&transitive=true>; rel="next"`, resp.Header().Get("Link"))
	resp = mustDo(t, h, 200, "GET", "/group-user/all-staff?limit=2&after=2&transitive=true", "", nil)
	assert.Equal(t, `[{"uid":3,"nickname":"Tao"}]`, bodyOf(resp))
	assert.Empty(t, resp.Header().Get("Link"))
	resp = mustDo(t, h, 200, "GET", "/group-user/all-staff", "", nil)
	assert.Equal(t, "[]", bodyOf(resp), "the direct list is what it was")

	resp = mustDo(t, h, 200, "GET", "/group-user/all-staff/2?transitive=true", "", nil)
	assert.Equal(t, `{"uid":2,"nickname":"","via":["all-staff","engineering","backend"]}`, bodyOf(resp), "of two shortest paths, the first in byte order")
	resp = mustDo(t, h, 200, "GET", "/group-user/backend/1?transitive=true", "", nil)
	assert.Equal(t, `{"uid":1,"nickname":"","via":["backend"]}`, bodyOf(resp))
	resp = mustDo(t, h, 404, "GET", "/group-user/backend/3?transitive=true", "", nil)
	assert.Contains(t, bodyOf(resp), `"not_member"`)
	mustDo(t, h, 404, "GET", "/group-user/all-staff/3", "", nil)

	resp = mustDo(t, h, 200, "GET", "/user-group/2?transitive=true", "", nil)
	assert.Equal(t, `["all-staff","backend","engineering","frontend"]`, bodyOf(resp))
	assert.Equal(t, "4", resp.Header().Get("X-Total-Count"))
	resp = mustDo(t, h, 200, "GET", "/user-group/2?transitive=true&limit=2&after=backend", "", nil)
	assert.Equal(t, `["engineering","frontend"]`, bodyOf(resp))
	assert.Empty(t, resp.Header().Get("Link"))
	resp = mustDo(t, h, 200, "GET", "/user-group/2?transitive=true&limit=1", "", nil)
	assert.Equal(t, `</user-group/2?limit=1&after=all-staff&transitive=true>; rel="next"`, resp.Header().Get("Link"))
	resp = mustDo(t, h, 200, "GET", "/user-group/2", "", nil)
	assert.Equal(t, `["backend","frontend"]`, bodyOf(resp))

	checks := `{"checks":[{"group":"all-staff","uid":1},{"group":"engineering","uid":3},{"group":"backend","uid":3}],"transitive":true}`
	resp = mustDo(t, h, 200, "POST", "/check", checks, map[string]string{"Content-Type": jsonType})
	assert.Equal(t, `{"results":[true,true,false]}`, bodyOf(resp))
	resp = mustDo(t, h, 200, "POST", "/check", strings.Replace(checks, "true}", "false}", 1), map[string]string{"Content-Type": jsonType})
	assert.Equal(t, `{"results":[false,false,false]}`, bodyOf(resp))
}

// TestNestingReadsETagsMoveWithWhatTheyRead follows the ETag of every read
// of groups in groups through writes: one of anything the read does not
// read leaves it (If-None-Match answers 304), one of what it reads moves
// it (200, with another ETag).
func TestNestingReadsETagsMoveWithWhatTheyRead(t *testing.T) {
	h := staffHandler(t)
	// all-staff > engineering > backend (1, 2) and frontend (2, 3 "Tao").
	const (
		members  = "/group-user/all-staff?transitive=true"
		page     = "/group-user/all-staff?transitive=true&limit=1"
		record   = "/group-user/all-staff/3?transitive=true"
		below    = "/group-group/all-staff?transitive=true"
		parents  = "/group-parents/backend"
		above    = "/group-parents/backend?transitive=true"
		usersOf2 = "/user-group/2?transitive=true"
	)
	reads := []string{members, page, record, below, parents, above, usersOf2}
	etags := map[string]string{}
	for _, path := range reads {
		resp := mustDo(t, h, 200, "GET", path, "", nil)
		etags[path] = resp.Header().Get("ETag")
		require.NotEmpty(t, etags[path], path)
		notModified := sendTo(h, "GET", path, "", map[string]string{"If-None-Match": etags[path]})
		assert.Equal(t, 304, notModified.Code, path)
		assert.Empty(t, notModified.Body.String())
		assert.Equal(t, etags[path], notModified.Header().Get("ETag"), path)
	}
	for _, step := range []struct {
		name, method, path, body string
		moves                    []string
	}{
		{"a member outside", "POST", "/group-user/unrelated", "users=[9]", nil},
		{"a group outside deleted", "DELETE", "/groups/unrelated", "", nil},
		{"a nesting outside", "POST", "/group-group/other", `groups=["unrelated2"]`, nil},
		{"another user two levels below", "POST", "/group-user/frontend", "users=[4]", []string{members, page}},
		{"3's nickname", "POST", "/group-user/frontend", `users=[[3,"Tau"]]`, []string{members, page, record}},
		{"2 in a group outside", "POST", "/group-user/unrelated3", "users=[2]", []string{usersOf2}},
		{"a nesting below", "POST", "/group-group/frontend", `groups=["design"]`, []string{members, page, record, below}},
		{"a group above all-staff", "POST", "/group-group/everyone", `groups=["all-staff"]`, []string{above, usersOf2}},
		{"another parent of backend", "POST", "/group-group/platform", `groups=["backend"]`, []string{parents, above, usersOf2}},
	} {
		w := sendTo(h, step.method, step.path, step.body, nil)
		require.Equal(t, 200, w.Code, "%s: %s", step.name, w.Body.String())
		for _, path := range reads {
			w := sendTo(h, "GET", path, "", map[string]string{"If-None-Match": etags[path]})
			if slices.Contains(step.moves, path) {
				assert.Equal(t, 200, w.Code, "%s moves the ETag of %s", step.name, path)
				assert.NotEqual(t, etags[path], w.Header().Get("ETag"), "%s: %s", step.name, path)
				etags[path] = w.Header().Get("ETag")
			} else {
				assert.Equal(t, 304, w.Code, "%s leaves the ETag of %s", step.name, path)
			}
		}
	}
	assert.Empty(t, mustDo(t, h, 200, "GET", "/user-group/2", "", map[string]string{"If-None-Match": etags[usersOf2]}).Header().Get("ETag"),
		"the direct list has no ETag, and answers whatever If-None-Match says")
}

// TestTransitiveNotMemberCarriesETag follows a transitive record from a
// member (200) to none (404 not_member): the 404 carries the ETag of the
// revision it answers at, which If-None-Match answers with 304 while the
// user is still no member, a write below that cannot make the user a
// member leaves, and one that makes the user a member moves.
func TestTransitiveNotMemberCarriesETag(t *testing.T) {
	h := staffHandler(t)
	// all-staff > engineering > backend (1, 2) and frontend (2, 3 "Tao");
	// design, in no nesting, holds 3.
	mustDo(t, h, 200, "POST", "/group-user/design", "users=[3]", nil)
	const record = "/group-user/all-staff/3?transitive=true"
	member := mustDo(t, h, 200, "GET", record, "", nil).Header().Get("ETag")
	require.NotEmpty(t, member)

	removed := mustDo(t, h, 200, "DELETE", "/group-user/frontend", "users=[3]", nil)
	resp := mustDo(t, h, 404, "GET", record, "", nil)
	assert.Equal(t, "not_member", errorCode(t, resp))
	etag := resp.Header().Get("ETag")
	require.NotEmpty(t, etag, "a 404 not_member carries its ETag")
	assert.NotEqual(t, member, etag)
	assert.True(t, strings.HasSuffix(etag, "-"+removed.Header().Get("X-Revision")+`"`),
		"%s is the ETag of the revision of the write that made 3 no member (%s)", etag, removed.Header().Get("X-Revision"))
	// RFC 9110 has a server ignore If-None-Match when it would answer
	// other than 2xx: the 404 is answered whole, whatever it names.
	for _, tags := range []string{etag, member, "*", `"nope", W/` + member} {
		for _, method := range []string{"GET", "HEAD"} {
			w := sendTo(h, method, record, "", map[string]string{"If-None-Match": tags})
			assert.Equal(t, 404, w.Code, "%s with If-None-Match: %s", method, tags)
			assert.Equal(t, etag, w.Header().Get("ETag"), "%s with If-None-Match: %s", method, tags)
		}
	}
	w := mustDo(t, h, 404, "GET", record, "", map[string]string{"X-Min-Revision": latestRevision(t, h)})
	assert.Equal(t, etag, w.Header().Get("ETag"), "X-Min-Revision reached")

	for _, step := range []struct {
		name, method, path, body string
		member, moves            bool
	}{
		{"another user of a group below", "POST", "/group-user/backend", "users=[4]", false, false},
		{"another user's nickname below", "POST", "/group-user/backend", `users=[[1,"One"]]`, false, false},
		{"a member outside", "POST", "/group-user/unrelated", "users=[9]", false, false},
		{"a nesting outside", "POST", "/group-group/other", `groups=["unrelated"]`, false, false},
		{"3's group nested below", "POST", "/group-group/frontend", `groups=["design"]`, true, true},
		{"that nesting removed", "DELETE", "/group-group/frontend", `groups=["design"]`, false, true},
		{"another user of a group below, again", "POST", "/group-user/engineering", "users=[5]", false, false},
		{"3 added below", "POST", "/group-user/backend", "users=[3]", true, true},
	} {
		mustDo(t, h, 200, step.method, step.path, step.body, nil)
		w := sendTo(h, "GET", record, "", nil)
		switch {
		case !step.moves:
			assert.Equal(t, 404, w.Code, step.name)
			assert.Equal(t, etag, w.Header().Get("ETag"), "%s leaves the ETag of 3's absence", step.name)
			continue
		case step.member:
			assert.Equal(t, 200, w.Code, "%s makes 3 a member: %s", step.name, w.Body.String())
		default:
			assert.Equal(t, "not_member", errorCode(t, w), step.name)
		}
		assert.NotEmpty(t, w.Header().Get("ETag"), step.name)
		assert.NotEqual(t, etag, w.Header().Get("ETag"), "%s moves the ETag", step.name)
		etag = w.Header().Get("ETag")
	}
}

func TestTransitiveReadsWithMinRevision(t *testing.T) {
	h := staffHandler(t)
	rev := latestRevision(t, h)
	for _, path := range []string{"/group-user/all-staff?transitive=true", "/group-user/all-staff/1?transitive=true",
		"/user-group/1?transitive=true", "/group-group/all-staff?transitive=true", "/group-parents/backend?transitive=true"} {
		assert.Equal(t, 200, sendTo(h, "GET", path, "", map[string]string{"X-Min-Revision": rev}).Code, path)
		assert.Equal(t, "invalid_header", errorCode(t, sendTo(h, "GET", path, "", map[string]string{"X-Min-Revision": "0"})), path)
	}
}

// A nesting that would put a group below more groups than -max-ancestors
// is 409 too_many_ancestors naming the group, alone and in a batch, and
// changes nothing.
func TestNestingRefusesTooManyAncestors(t *testing.T) {
	h := newNestingHandlerWith(t, membership.ServiceOptions{MaxAncestors: 2})
	mustDo(t, h, 200, "POST", "/group-group/engineering", `groups=["backend"]`, nil)
	mustDo(t, h, 200, "POST", "/group-group/backend", `groups=["db"]`, nil)
	rev := latestRevision(t, h)

	resp := mustDo(t, h, 409, "POST", "/group-group/all-staff", `groups=["engineering"]`, nil)
	code, message := errorOf(resp)
	assert.Equal(t, "too_many_ancestors", code)
	assert.Equal(t, "adding engineering to all-staff puts db below 3 groups, more than 2 (-max-ancestors)", message)

	resp = mustDo(t, h, 409, "POST", "/batch", `{"changes":[{"op":"add_groups","group":"x","groups":["y"]},{"op":"replace_groups","group":"all-staff","groups":["engineering"]}]}`,
		map[string]string{"Content-Type": jsonType})
	code, message = errorOf(resp)
	assert.Equal(t, "too_many_ancestors", code)
	assert.Equal(t, `changes element 1 (group "all-staff"): adding engineering to all-staff puts db below 3 groups, more than 2 (-max-ancestors)`, message)
	assert.Equal(t, rev, latestRevision(t, h), "nothing of a refused write was applied")

	resp = mustDo(t, h, 200, "GET", "/group-parents/engineering", "", nil)
	assert.JSONEq(t, `[]`, resp.Body.String())
}

func TestNestingRefusesCyclesAndDepth(t *testing.T) {
	h := newNestingHandler(t, 2)
	mustDo(t, h, 200, "POST", "/group-group/all-staff", `groups=["engineering"]`, nil)
	mustDo(t, h, 200, "POST", "/group-group/engineering", `groups=["backend"]`, nil)
	rev := latestRevision(t, h)

	resp := mustDo(t, h, 409, "POST", "/group-group/backend", `groups=["all-staff"]`, nil)
	code, message := errorOf(resp)
	assert.Equal(t, "cycle", code)
	assert.Equal(t, "adding all-staff to backend makes a cycle: all-staff > engineering > backend > all-staff", message)

	resp = mustDo(t, h, 409, "POST", "/group-group/backend", `groups=["deeper","all-staff"]`, nil)
	code, message = errorOf(resp)
	assert.Equal(t, "too_deep", code, "the first offending element is the one named")
	assert.Equal(t, "adding deeper to backend makes a chain of nestings 3 deep, deeper than 2 (-max-depth)", message)

	resp = mustDo(t, h, 409, "POST", "/batch", `{"changes":[{"op":"add_groups","group":"x","groups":["y"]},{"op":"add_groups","group":"y","groups":["x"]}]}`,
		map[string]string{"Content-Type": jsonType})
	code, _ = errorOf(resp)
	assert.Equal(t, "cycle", code, "changes that together make a cycle are refused whole")

	assert.Equal(t, rev, latestRevision(t, h), "nothing of a refused write was applied")
	resp = mustDo(t, h, 200, "GET", "/group-group/backend", "", nil)
	assert.Equal(t, "[]", bodyOf(resp))
	resp = mustDo(t, h, 200, "GET", "/group-group/x", "", nil)
	assert.Equal(t, "[]", bodyOf(resp))
}

func TestNestingConditionalWritesAndIdempotency(t *testing.T) {
	h := newNestingHandler(t, 0)
	mustDo(t, h, 200, "PUT", "/group-group/eng", `groups=["a"]`, map[string]string{"If-None-Match": "*"})
	resp := mustDo(t, h, 412, "PUT", "/group-group/eng", `groups=["b"]`, map[string]string{"If-None-Match": "*"})
	current := resp.Header().Get("ETag")
	assert.NotEmpty(t, current, "a 412 carries the group's current ETag")
	mustDo(t, h, 412, "POST", "/group-user/eng", `users=[1]`, map[string]string{"If-None-Match": "*"})
	mustDo(t, h, 200, "POST", "/group-group/eng", `groups=["b"]`, map[string]string{"If-Match": current})
	mustDo(t, h, 412, "POST", "/group-group/eng", `groups=["c"]`, map[string]string{"If-Match": current})
	mustDo(t, h, 200, "DELETE", "/group-group/eng", `groups=["a"]`, map[string]string{"If-Match": "*"})
	mustDo(t, h, 412, "DELETE", "/group-group/nobody", `groups=["a"]`, map[string]string{"If-Match": "*"})

	key := map[string]string{"Idempotency-Key": "k-nest"}
	first := mustDo(t, h, 200, "POST", "/group-group/ops", `groups=["x","y"]`, key)
	assert.Equal(t, "2", bodyOf(first))
	again := mustDo(t, h, 200, "POST", "/group-group/ops", `groups=["x","y"]`, map[string]string{"Idempotency-Key": "k-nest"})
	assert.Equal(t, "2", bodyOf(again))
	assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, first.Header().Get("X-Revision"), again.Header().Get("X-Revision"))
	mustDo(t, h, 422, "POST", "/group-group/ops", `groups=["x"]`, map[string]string{"Idempotency-Key": "k-nest"})
	mustDo(t, h, 422, "DELETE", "/group-group/ops", `groups=["x","y"]`, map[string]string{"Idempotency-Key": "k-nest"})
}

func TestNestingNeedsTheToken(t *testing.T) {
	svc := membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: testMaxUsers})
	h := httpapi.NewHandler(svc, httpapi.Options{Logger: slog.New(slog.DiscardHandler), MaxBodyBytes: testMaxBody, Access: httpapi.TokenOnly("s3cret")})
	for _, method := range []string{"POST", "PUT", "DELETE"} {
		assert.Equal(t, 401, sendTo(h, method, "/group-group/eng", `groups=["a"]`, map[string]string{"Content-Type": formType}).Code, method)
	}
	auth := map[string]string{"Content-Type": formType, "Authorization": "Bearer s3cret"}
	assert.Equal(t, 200, sendTo(h, "POST", "/group-group/eng", `groups=["a"]`, auth).Code)
	assert.Equal(t, 200, sendTo(h, "GET", "/group-group/eng", "", nil).Code, "reads need the token only with auth-reads")
	assert.Equal(t, 200, sendTo(h, "GET", "/group-parents/a?transitive=true", "", nil).Code)
}

func TestNestingBatch(t *testing.T) {
	h := newNestingHandler(t, 0)
	resp := mustDo(t, h, 200, "POST", "/batch", `{"changes":[`+
		`{"op":"add","group":"backend","users":[1]},`+
		`{"op":"add_groups","group":"eng","groups":["backend",{"group":"frontend","ttl":"1h"}]},`+
		`{"op":"replace_groups","group":"all","groups":["eng"]},`+
		`{"op":"remove_groups","group":"eng","groups":["frontend"]}],"uid":7}`, map[string]string{"Content-Type": jsonType})
	assert.Equal(t, `{"results":[{"added":1},{"added":2},{"added":1,"removed":0},{"removed":1}]}`, bodyOf(resp))
	resp = mustDo(t, h, 200, "GET", "/group-user/all/1?transitive=true", "", nil)
	assert.Equal(t, `{"uid":1,"nickname":"","via":["all","eng","backend"]}`, bodyOf(resp))

	w := sendTo(h, "GET", "/group-user/eng", "", nil)
	resp = mustDo(t, h, 412, "POST", "/batch", `{"changes":[{"op":"remove_groups","group":"eng","groups":["backend"],"if_match":"\"0000000000000000-1\""}]}`,
		map[string]string{"Content-Type": jsonType})
	assert.Equal(t, w.Header().Get("ETag"), resp.Header().Get("ETag"))
}

func TestNestingInTheFeedAndInGroups(t *testing.T) {
	h := newNestingHandler(t, 0)
	at := time.Now().UTC().Add(time.Hour).Truncate(time.Millisecond)
	atText := at.Format("2006-01-02T15:04:05.000Z")
	mustDo(t, h, 200, "POST", "/group-group/eng", `{"groups":["b",{"group":"a","expires":"`+atText+`"}],"uid":7}`, map[string]string{"Content-Type": jsonType})
	mustDo(t, h, 200, "PUT", "/group-group/eng", `groups=["c",{"group":"a","expires":"`+atText+`"}]`, nil)
	mustDo(t, h, 200, "DELETE", "/group-group/eng", `groups=["a"]`, nil)
	mustDo(t, h, 200, "POST", "/group-user/eng", `users=[1]`, nil)
	mustDo(t, h, 200, "POST", "/batch", `{"changes":[{"op":"add_groups","group":"top","groups":["eng"]}]}`, map[string]string{"Content-Type": jsonType})

	resp := mustDo(t, h, 200, "GET", "/groups", "", nil)
	assert.Equal(t, `[{"group":"eng","members":1,"subgroups":1},{"group":"top","members":0,"subgroups":1}]`, bodyOf(resp))

	resp = mustDo(t, h, 200, "DELETE", "/groups/eng", "", nil)
	assert.Equal(t, "1", bodyOf(resp), "the members removed")
	resp = mustDo(t, h, 200, "GET", "/group-group/top", "", nil)
	assert.Equal(t, "[]", bodyOf(resp), "a deleted group leaves its parents")
	resp = mustDo(t, h, 200, "GET", "/group-parents/c", "", nil)
	assert.Equal(t, "[]", bodyOf(resp), "and its subgroups leave it")

	resp = mustDo(t, h, 200, "GET", "/changes?limit=5", "", nil)
	assert.Equal(t, `[`+
		`{"rev":1,"op":"add_groups","actor":7,"group":"eng","groups":[{"group":"a","expires":"`+atText+`"},{"group":"b"}]},`+
		`{"rev":2,"op":"replace_groups","group":"eng","groups":[{"group":"a","expires":"`+atText+`"},{"group":"c"}]},`+
		`{"rev":3,"op":"remove_groups","group":"eng","groups":[{"group":"a"}]},`+
		`{"rev":4,"op":"add","group":"eng","uids":[1]},`+
		`{"rev":5,"op":"batch","changes":[{"op":"add_groups","group":"top","groups":[{"group":"eng"}]}]}]`,
		untimed(t, bodyOf(resp)))
}

// TestTransitiveReadsUnderConcurrentWrites reads transitive answers while
// writers nest and un-nest groups: every answer is whole and well formed,
// whatever the writers do meanwhile (the race detector checks the rest).
func TestTransitiveReadsUnderConcurrentWrites(t *testing.T) {
	h := staffHandler(t)
	var wg sync.WaitGroup
	codes := make(chan int, 400)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := "team" + strconv.Itoa(w)
			for range 50 {
				codes <- sendTo(h, "POST", "/group-group/"+g, `groups=["engineering"]`, map[string]string{"Content-Type": formType}).Code
				codes <- sendTo(h, "DELETE", "/group-group/"+g, `groups=["engineering"]`, map[string]string{"Content-Type": formType}).Code
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 100 {
			w := sendTo(h, "GET", "/group-user/all-staff?transitive=true", "", nil)
			codes <- w.Code
			if w.Body.String() != `[{"uid":1,"nickname":""},{"uid":2,"nickname":""},{"uid":3,"nickname":"Tao"}]` {
				codes <- -1 // an answer other than the closure's, which the writers never change
			}
		}
	}()
	wg.Wait()
	close(codes)
	for code := range codes {
		assert.Equal(t, 200, code)
	}
}

// TestACycleRaceHasOneWinner sends a into b and b into a at once, many
// times: exactly one of each pair is applied, and the other is a cycle.
func TestACycleRaceHasOneWinner(t *testing.T) {
	for range 20 {
		h := newNestingHandler(t, 0)
		codes := make(chan int, 2)
		var wg sync.WaitGroup
		for _, pair := range [][2]string{{"a", "b"}, {"b", "a"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes <- sendTo(h, "POST", "/group-group/"+pair[0], `groups=["`+pair[1]+`"]`, map[string]string{"Content-Type": formType}).Code
			}()
		}
		wg.Wait()
		close(codes)
		var got []int
		for code := range codes {
			got = append(got, code)
		}
		assert.ElementsMatch(t, []int{200, 409}, got)
		a := mustDo(t, h, 200, "GET", "/group-group/a", "", nil)
		b := mustDo(t, h, 200, "GET", "/group-group/b", "", nil)
		assert.Len(t, strings.Split(bodyOf(a)+bodyOf(b), "group"), 2, "one nesting in all: %s %s", bodyOf(a), bodyOf(b))
	}
}
