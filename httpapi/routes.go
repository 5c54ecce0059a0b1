package httpapi

import (
	"crypto/subtle"
	_ "embed"
	"net/http"
	"net/url"
	"strings"

	"example.com/groupmembership/membership"
)

// route is one method on one path of the API.
type route struct {
	method  string
	path    string
	handler http.Handler
	// open routes never need the token: probes must work without it.
	open bool
	// query says that the handler reads its query itself, through
	// parseQuery; the other routes take no parameters, and addRoutes has
	// any refused.
	query bool
	// data routes need the service: while loading, they answer 503
	// starting.
	data bool
	// private routes need the token whenever the service has one, GET
	// included.
	private bool
	// read routes are reads though their method is not GET (POST /check
	// takes its checks in a body): they need the token only when GETs do.
	read bool
	// cache is the Cache-Control of the route's replies, if any: a shared
	// cache in front must not serve a list without asking (no-cache: it
	// revalidates with the ETag), nor keep what has no validator (no-store).
	cache string
}

// routes is the whole API surface. openapi.json documents exactly these; a
// test holds the two together. GET routes serve HEAD too. While d is
// loading, the handlers of data routes are built but never called.
func routes(d shared) []route {
	svc, opts := d.svc, d.opts
	// read serves a read from a state at least as new as X-Min-Revision.
	read := func(h http.Handler) http.Handler { return withMinRevision(svc, opts.MinRevisionWait, h) }
	return []route{
		{method: "GET", path: "/group-user/{groupID}", handler: read(handleListMembers(svc, d.encodedLists)), query: true, data: true, cache: "no-cache"},
		{method: "POST", path: "/group-user/{groupID}", handler: handleChangeMembers(svc, membership.OpAdd, opts.MaxBodyBytes, d.bodies), data: true},
		{method: "PUT", path: "/group-user/{groupID}", handler: handleChangeMembers(svc, membership.OpReplace, opts.MaxBodyBytes, d.bodies), data: true},
		{method: "DELETE", path: "/group-user/{groupID}", handler: handleChangeMembers(svc, membership.OpRemove, opts.MaxBodyBytes, d.bodies), data: true},
		{method: "GET", path: "/group-user/{groupID}/{uid}", handler: read(handleMember(svc)), query: true, data: true, cache: "no-store"},
		{method: "GET", path: "/group-group/{groupID}", handler: read(handleNested(svc, false, d.replies)), query: true, data: true, cache: "no-cache"},
		{method: "POST", path: "/group-group/{groupID}", handler: handleChangeSubgroups(svc, membership.OpAddGroups, opts.MaxBodyBytes, d.bodies), data: true},
		{method: "PUT", path: "/group-group/{groupID}", handler: handleChangeSubgroups(svc, membership.OpReplaceGroups, opts.MaxBodyBytes, d.bodies), data: true},
		{method: "DELETE", path: "/group-group/{groupID}", handler: handleChangeSubgroups(svc, membership.OpRemoveGroups, opts.MaxBodyBytes, d.bodies), data: true},
		{method: "GET", path: "/group-parents/{groupID}", handler: read(handleNested(svc, true, d.replies)), query: true, data: true, cache: "no-cache"},
		{method: "POST", path: "/batch", handler: handleBatch(svc, opts.MaxBodyBytes, d.bodies), data: true, cache: "no-store"},
		{method: "POST", path: "/check", handler: read(handleCheck(svc, opts.MaxBodyBytes, d.bodies)), data: true, read: true, cache: "no-store"},
		{method: "GET", path: "/groups", handler: read(handleGroups(svc, d.replies)), query: true, data: true, cache: "no-cache"},
		{method: "DELETE", path: "/groups/{groupID}", handler: handleDeleteGroup(svc), data: true, query: true},
		{method: "GET", path: "/user-group/{uid}", handler: read(handleUserGroups(svc, d.replies)), query: true, data: true, cache: "no-store"},
		{method: "DELETE", path: "/user-group/{uid}", handler: handleRemoveUser(svc), data: true, query: true},
		{method: "GET", path: "/changes", handler: handleChanges(svc, opts.Stopping, opts.ChangesReplyBytes, d.replies, d.waiters), query: true, data: true, cache: "no-store"},
		{method: "GET", path: "/backup", handler: handleBackup(svc, d.store.Backup, d.backups), data: true, private: true, cache: "no-store"},
		{method: "GET", path: "/healthz", handler: handleHealthz(), open: true},
		{method: "GET", path: "/readyz", handler: handleReadyz(d), open: true},
		{method: "GET", path: "/openapi.json", handler: handleOpenAPI()},
		{method: "GET", path: "/metrics", handler: handleMetrics(d)},
	}
}

// addRoutes registers rs on mux. With a token, every write (POST, PUT,
// DELETE) and private routes need it, and so does every read (GET, and
// the read routes) that is not open when authReads is set. Each path also
// gets a method-less pattern that answers the methods it does not serve with
// a JSON 405 and its Allow header, and "/" answers every unknown path with a
// JSON 404: the mux's own answers are plain text. Every pattern is
// registered with m too, unless m is nil.
func addRoutes(mux *http.ServeMux, rs []route, loading bool, token string, authReads bool, m *requestMetrics) {
	handle := func(pattern string, h http.Handler) {
		mux.Handle(pattern, h)
		if m != nil {
			m.addPattern(pattern)
		}
	}
	allowed := map[string][]string{}
	var paths []string
	for _, r := range rs {
		h := r.handler
		if loading && r.data {
			h = handleStarting()
		}
		if !r.query {
			h = noQuery(h)
		}
		if r.cache != "" {
			h = withCacheControl(r.cache, h)
		}
		isRead := r.method == http.MethodGet || r.read
		if token != "" && !r.open && (!isRead || authReads || r.private) {
			h = requireToken(token, h)
		}
		handle(r.method+" "+r.path, h)
		if allowed[r.path] == nil {
			paths = append(paths, r.path)
		}
		allowed[r.path] = append(allowed[r.path], r.method)
		if r.method == http.MethodGet {
			allowed[r.path] = append(allowed[r.path], http.MethodHead)
		}
	}
	for _, p := range paths {
		handle(p, handleMethodNotAllowed(strings.Join(allowed[p], ", ")))
	}
	handle("/", handleNotFound())
}

// canonicalPaths answers a path that is not in canonical form (an empty,
// "." or ".." segment, or a trailing slash) with a JSON 404, before the mux
// sees it: the mux would answer with a redirect to the cleaned path, in
// HTML, that a client following it re-sends a write to, on another group.
// Escaped, such ids are paths like any other: /group-user/%2E%2E.
func canonicalPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The path as sent: escaping changes no "/" and no ".", so the
		// decoded path tells as well when the client escaped nothing.
		path := r.URL.RawPath
		if path == "" {
			path = r.URL.Path
		}
		if path != "/" && !canonicalPath(path) {
			writeError(w, r, membership.Errorf(codeNotFound,
				"%s is not a canonical path (it has an empty, \".\" or \"..\" segment, or ends in /): no route serves it; "+
					"escape a group id that is . or .. as %%2E or %%2E%%2E", path))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// canonicalPath reports whether path, escaped, starts with / and has no
// empty, "." or ".." segment (a trailing slash makes an empty one).
func canonicalPath(path string) bool {
	if path == "" || path[0] != '/' {
		return false
	}
	start := 1 // of the segment being read
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		switch path[start:i] {
		case "", ".", "..":
			return false
		}
		start = i + 1
	}
	return true
}

// escapeGroupID escapes a group id for a path segment, so that a URL built
// with it names the same group: PathEscape leaves "." and ".." alone, which
// a client or a mux would resolve away.
func escapeGroupID(id string) string {
	if id == "." || id == ".." {
		return strings.Repeat("%2E", len(id))
	}
	return url.PathEscape(id)
}

// withCacheControl sets the Cache-Control of h's replies to value.
func withCacheControl(value string, h http.Handler) http.Handler {
	v := []string{value}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Cache-Control"] = v
		h.ServeHTTP(w, r)
	})
}

// noQuery refuses, as parseQuery does, any query sent to h, whose route
// takes no parameters.
func noQuery(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			if _, err := parseQuery(r); err != nil {
				writeError(w, r, err)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// requireToken lets through only requests with Authorization: Bearer token.
// The scheme is matched case-insensitively (RFC 9110 11.1), the token in
// constant time, so that the time taken tells nothing about it.
func requireToken(token string, next http.Handler) http.Handler {
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, _ := strings.Cut(headerValue(r, "Authorization"), " ")
		got = strings.TrimLeft(got, " ")
		if subtle.ConstantTimeCompare([]byte(got), want) != 1 || !strings.EqualFold(scheme, "Bearer") {
			w.Header().Set("WWW-Authenticate", `Bearer realm="membership"`)
			writeError(w, r, membership.Errorf(codeUnauthorized,
				"this request needs the header Authorization: Bearer <token>, with the service's token"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

//go:embed openapi.json
var openAPIDocument []byte

// handleOpenAPI serves the OpenAPI 3.1 document of the API.
func handleOpenAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, openAPIDocument)
	})
}
