package middleware

import (
	"context"
	"net/http"

	"example.com/groupmembership/membership/scope"
)

// principalKey is the context key under which the authenticated
// principal's name travels from the credential check to the handlers.
type principalKey struct{}

// WithPrincipal returns ctx carrying name, the principal whose credential
// the request presented.
func WithPrincipal(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, principalKey{}, name)
}

// PrincipalName returns the name of the principal the request was
// authenticated as, or "" when the request carried no credential (a read
// with -auth-reads off, or a service with no credential configured). A
// request held to its principal's scope carries the name in its
// scope.Scope alone (one context value, not two).
func PrincipalName(ctx context.Context) string {
	if name, ok := ctx.Value(principalKey{}).(string); ok {
		return name
	}
	return scope.Of(ctx).Principal()
}

// Authenticated returns r carrying name, the principal whose credential r
// presented (WithPrincipal), and records name for r's line of the access
// log, which Observe writes from outside the request's context: a
// credential check calls it for each request it lets through, so that
// the handlers stamp the request's changes with the principal, and its
// line names it. The name is never the credential.
func Authenticated(w http.ResponseWriter, r *http.Request, name string) *http.Request {
	notePrincipal(w, name)
	return r.WithContext(WithPrincipal(r.Context(), name))
}

// notePrincipal records name for the request's line of the access log.
func notePrincipal(w http.ResponseWriter, name string) {
	if o, ok := w.(*observedWriter); ok {
		o.principal = name
	}
}
