package membership

import "fmt"

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

// MaxPrincipalBytes is the longest principal name: that of an X.509
// subject common name, which may name one.
const MaxPrincipalBytes = 64

// ValidatePrincipal returns an error unless name is a principal's name: 1
// to MaxPrincipalBytes ASCII letters, digits and the characters . _ - @ :,
// which a log line, a header and a file of one principal a line carry as
// they are. The name comes from the service's configuration, not from a
// request: a Write or Batch with a bad one is the service's fault
// (CodeInternal).
func ValidatePrincipal(name string) error {
	if name == "" || len(name) > MaxPrincipalBytes {
		return fmt.Errorf("principal name of %d bytes: it must be 1 to %d", len(name), MaxPrincipalBytes)
	}
	for i := 0; i < len(name); i++ {
		if !principalByte(name[i]) {
			return fmt.Errorf("principal name %q has byte 0x%02x at %d: it may hold ASCII letters, digits and . _ - @ : only", name, name[i], i)
		}
	}
	return nil
}

// principalByte reports whether c may be part of a principal's name.
func principalByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '.', '_', '-', '@', ':':
		return true
	}
	return false
}

// validatePrincipal returns ValidatePrincipal's error of name, nil when
// there is no principal.
func validatePrincipal(name string) error {
	if name == "" {
		return nil
	}
	return ValidatePrincipal(name)
}
