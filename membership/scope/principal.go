package scope

import "fmt"

// MaxPrincipalBytes is the longest principal name: that of an X.509
// subject common name, which may name one.
const MaxPrincipalBytes = 64

// ValidatePrincipal returns an error unless name is a principal's name: 1
// to MaxPrincipalBytes ASCII letters, digits and the characters . _ - @ :,
// which a log line, a header and a file of one principal a line carry as
// they are. The name comes from the service's configuration, not from a
// request: a membership.Write or Batch with a bad one is the service's
// fault (membership.CodeInternal).
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
