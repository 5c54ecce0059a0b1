package middleware

import (
	"net/http"

	"example.com/groupmembership/membership"
)

// CanonicalPaths answers a path that is not in canonical form (an empty,
// "." or ".." segment, or a trailing slash) with a JSON 404, before the mux
// sees it: the mux would answer with a redirect to the cleaned path, in
// HTML, that a client following it re-sends a write to, on another group.
// Escaped, such ids are paths like any other: /group-user/%2E%2E.
func CanonicalPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The path as sent: escaping changes no "/" and no ".", so the
		// decoded path tells as well when the client escaped nothing.
		path := r.URL.RawPath
		if path == "" {
			path = r.URL.Path
		}
		if path != "/" && !canonicalPath(path) {
			WriteError(w, r, membership.Errorf(CodeNotFound,
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

// WithCacheControl sets the Cache-Control of h's replies to value.
func WithCacheControl(value string, h http.Handler) http.Handler {
	v := []string{value}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Cache-Control"] = v
		h.ServeHTTP(w, r)
	})
}

// HeaderValue returns the first value of the request's header field key,
// as Header.Get does, for a key in canonical form: the server stores every
// field under its canonical name, so the map is read without making it.
func HeaderValue(r *http.Request, key string) string {
	if v := r.Header[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
