package middleware

import (
	"context"

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
