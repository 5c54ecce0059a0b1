package httpapi

import (
	_ "embed"
	"net/http"
	"net/url"
	"strings"

	"example.com/groupmembership/httpapi/decode"
	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/httpapi/scim"
	"example.com/groupmembership/httpapi/scim/wire"
	"example.com/groupmembership/internal/access"
	"example.com/groupmembership/membership"
)

// route is one method on one path of the API.
type route struct {
	method  string
	path    string
	handler http.Handler
	// open routes never need a credential: probes must work without one.
	open bool
	// query says that the handler reads its query itself, through
	// decode.ParseQuery; the other routes take no parameters, and addRoutes has
	// any refused.
	query bool
	// data routes need the service: while loading, they answer 503
	// starting.
	data bool
	// private routes need an admin whenever the service has principals,
	// GET included.
	private bool
	// personal routes need a principal whenever the service has some, GET
	// included, within its scope: they show users' names and addresses.
	personal bool
	// read routes are reads though their method is not GET (POST /check
	// takes its checks in a body): they need a credential only when GETs
	// do.
	read bool
	// writeError answers the errors addRoutes makes for the route (503
	// starting, 401, 403): nil for middleware.WriteError's JSON; the SCIM
	// routes', SCIM's error schema.
	writeError middleware.ErrorWriter
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
	rs := []route{
		{method: "GET", path: "/group-user/{groupID}", handler: read(handleListMembers(svc, d.nest, d.encodedLists)), query: true, data: true, cache: "no-cache"},
		{method: "POST", path: "/group-user/{groupID}", handler: handleChangeMembers(svc, membership.OpAdd, opts.MaxBodyBytes, d.bodies), data: true},
		{method: "PUT", path: "/group-user/{groupID}", handler: handleChangeMembers(svc, membership.OpReplace, opts.MaxBodyBytes, d.bodies), data: true},
		{method: "DELETE", path: "/group-user/{groupID}", handler: handleChangeMembers(svc, membership.OpRemove, opts.MaxBodyBytes, d.bodies), data: true},
		{method: "GET", path: "/group-user/{groupID}/{uid}", handler: read(handleMember(svc, d.nest)), query: true, data: true, cache: "no-store"},
		{method: "GET", path: "/group-group/{groupID}", handler: read(handleNested(svc, d.nest, false, d.replies)), query: true, data: true, cache: "no-cache"},
		{method: "POST", path: "/group-group/{groupID}", handler: handleChangeSubgroups(svc, membership.OpAddGroups, opts.MaxBodyBytes, d.bodies), data: true},
		{method: "PUT", path: "/group-group/{groupID}", handler: handleChangeSubgroups(svc, membership.OpReplaceGroups, opts.MaxBodyBytes, d.bodies), data: true},
		{method: "DELETE", path: "/group-group/{groupID}", handler: handleChangeSubgroups(svc, membership.OpRemoveGroups, opts.MaxBodyBytes, d.bodies), data: true},
		{method: "GET", path: "/group-parents/{groupID}", handler: read(handleNested(svc, d.nest, true, d.replies)), query: true, data: true, cache: "no-cache"},
		{method: "POST", path: "/batch", handler: handleBatch(svc, opts.MaxBodyBytes, d.bodies), data: true, cache: "no-store"},
		{method: "POST", path: "/check", handler: read(handleCheck(svc, d.nest, opts.MaxBodyBytes, d.bodies)), data: true, read: true, cache: "no-store"},
		{method: "GET", path: "/groups", handler: read(handleGroups(svc, d.replies)), query: true, data: true, cache: "no-cache"},
		{method: "DELETE", path: "/groups/{groupID}", handler: handleDeleteGroup(svc), data: true, query: true},
		{method: "GET", path: "/user-group/{uid}", handler: read(handleUserGroups(svc, d.nest, d.replies)), query: true, data: true, cache: "no-store"},
		{method: "DELETE", path: "/user-group/{uid}", handler: handleRemoveUser(svc), data: true, query: true},
		{method: "GET", path: "/changes", handler: handleChanges(svc, opts.Stopping, opts.ChangesReplyBytes, d.replies, d.waiters), query: true, data: true, cache: "no-store"},
		{method: "GET", path: "/backup", handler: handleBackup(svc, d.store.Backup, d.backups), data: true, private: true, cache: "no-store"},
		{method: "GET", path: "/healthz", handler: handleHealthz(), open: true},
		{method: "GET", path: "/readyz", handler: handleReadyz(d), open: true},
		{method: "GET", path: "/openapi.json", handler: handleOpenAPI()},
		{method: "GET", path: "/metrics", handler: handleMetrics(d)},
	}
	// SCIM: identity providers send a credential on every request; the
	// services hold it to its scope (an account is of no group: writing
	// one needs write on every group, reading one read on every group).
	for _, sr := range scim.Routes(scim.Deps{Service: svc, Directory: d.dir, MaxBodyBytes: opts.MaxBodyBytes, Bodies: d.bodies, Replies: d.replies}) {
		rs = append(rs, route{method: sr.Method, path: sr.Path, handler: sr.Handler, query: true, data: true, personal: true, cache: "no-store", writeError: wire.WriteError})
	}
	return rs
}

// addRoutes registers rs on mux. With principals, every write
// (POST, PUT, DELETE) needs one, within its scope, and private routes an
// admin; so does every read (GET, and the read routes) that is not open
// when authReads is set, or personal, and otherwise a read is anyone's.
// Each path also gets a method-less pattern that answers the methods it
// does not serve with a JSON 405 and its Allow header, and "/" answers
// every unknown path with a JSON 404: the mux's own answers are plain text.
// Every pattern is registered with m too, unless m is nil.
func addRoutes(mux *http.ServeMux, rs []route, loading bool, principals func() *access.Rules, authReads bool, m *middleware.RequestMetrics) {
	handle := func(pattern string, h http.Handler) {
		mux.Handle(pattern, h)
		if m != nil {
			m.AddPattern(pattern)
		}
	}
	allowed := map[string][]string{}
	var paths []string
	for _, r := range rs {
		h := r.handler
		writeError := r.writeError
		if writeError == nil {
			writeError = middleware.WriteError
		}
		if loading && r.data {
			h = handleStarting(writeError)
		}
		if !r.query {
			h = noQuery(h)
		}
		if r.cache != "" {
			h = middleware.WithCacheControl(r.cache, h)
		}
		if principals != nil && !r.open {
			h = middleware.AuthenticateWith(principals, r.need(authReads), writeError, h)
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
		if strings.HasPrefix(p, scim.Prefix+"/") {
			handle(p, scim.MethodNotAllowed(strings.Join(allowed[p], ", ")))
			continue
		}
		handle(p, handleMethodNotAllowed(strings.Join(allowed[p], ", ")))
	}
	handle(scim.Prefix+"/", scim.NotFound())
	handle("/", handleNotFound())
}

// need returns what r needs of a request's credential, with authReads
// as -auth-reads says.
func (r route) need(authReads bool) middleware.Need {
	switch {
	case r.private:
		return middleware.NeedAdmin
	case r.personal, r.method != http.MethodGet && !r.read, authReads:
		return middleware.NeedPrincipal
	}
	return middleware.NeedNothing
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

// noQuery refuses, as decode.ParseQuery does, any query sent to h, whose route
// takes no parameters.
func noQuery(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			if _, err := decode.ParseQuery(r); err != nil {
				middleware.WriteError(w, r, err)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

//go:embed openapi.json
var openAPIDocument []byte

// handleOpenAPI serves the OpenAPI 3.1 document of the API.
func handleOpenAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		middleware.WriteJSON(w, http.StatusOK, openAPIDocument)
	})
}
