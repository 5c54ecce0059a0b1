package middleware

import "context"

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
// with -auth-reads off, or a service with no credential configured).
func PrincipalName(ctx context.Context) string {
	name, _ := ctx.Value(principalKey{}).(string)
	return name
}
