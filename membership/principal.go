package membership

import "example.com/groupmembership/membership/scope"

// Principals. A principal is who a request authenticated as: the name of
// the credential it presented (a line of the ACL file, or "token" for the
// service's single token), never the secret itself. The HTTP layer sets
// it on every write and batch, and every change carries it, beside the
// actor the client chose to name: the actor is what the client says, the
// principal what the service checked. A write made with no credential (a
// service with none configured), and the service's own changes (expiries),
// carry none.
//
// An Idempotency-Key is the principal's own: a store remembers each key
// per principal, so that a request of another principal with the same key
// is a request of its own, neither a repeat of the first (whose reply it
// must not see) nor a CodeIdempotencyKeyReused (which would tell it the
// key was taken).

// validatePrincipal returns scope.ValidatePrincipal's error of name, nil
// when there is no principal.
func validatePrincipal(name string) error {
	if name == "" {
		return nil
	}
	return scope.ValidatePrincipal(name)
}
