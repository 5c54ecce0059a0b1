// Package access is who may use the service: the principals of the ACL
// file (-acl-file) and of the token (-token-file, MEMBERSHIP_TOKEN), each
// with its credential (a token, kept as its SHA-256, or a client
// certificate) and its scope.Scope; the look-up of a request's
// credential among them; and the rules in force, which a reload replaces
// whole (Live). It knows nothing of HTTP: httpapi/middleware reads the
// request's credential and asks here.
package access

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"example.com/groupmembership/membership/groupids"
	"example.com/groupmembership/membership/scope"
)

// TokenPrincipalName is the name of the principal of -token-file and
// MEMBERSHIP_TOKEN, an admin on every group. An ACL file cannot name
// another so.
const TokenPrincipalName = "token"

// SecretPrefix starts an ACL file's secret: the hex SHA-256 of the token
// follows it.
const SecretPrefix = "sha256:"

// Principal is one principal: its name, its credential and its scope.
type Principal struct {
	Name  string
	Scope *scope.Scope
	// hash is the SHA-256 of its token; the zero value for a principal of
	// a client certificate (mtls).
	hash [sha256.Size]byte
	mtls bool
	// where says where it was given, for the errors that name two
	// principals: "acl:3", or "-token-file".
	where string
}

// HashToken returns the secret field of an ACL file's line for token:
// SecretPrefix and the hex SHA-256 of token.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return SecretPrefix + hex.EncodeToString(sum[:])
}

// CheckToken returns an error unless a client can send token in an
// Authorization header: one line of printable characters without a space.
// The error does not show the token.
func CheckToken(token string) error {
	if token == "" {
		return fmt.Errorf("is empty")
	}
	for i := 0; i < len(token); i++ {
		if c := token[i]; c <= ' ' || c == 0x7f {
			return fmt.Errorf("has a character no HTTP header can carry after \"Bearer \" (%q at byte %d): a token is one line of printable characters", c, i)
		}
	}
	return nil
}

// TokenPrincipal returns the principal of the service's token, named
// TokenPrincipalName, an admin on every group; where says where the token
// came from, for errors.
func TokenPrincipal(token, where string) *Principal {
	return &Principal{Name: TokenPrincipalName, Scope: scope.New(TokenPrincipalName, scope.Admin, groupids.All()),
		hash: sha256.Sum256([]byte(token)), where: where}
}

// Rules are the principals in force, looked up by credential. They never
// change: a reload makes new Rules.
type Rules struct {
	// byToken are the principals of a token, by the SHA-256 of the token.
	byToken map[[sha256.Size]byte]*Principal
	// byCertificate are the principals of a client certificate, by the
	// certificate's subject common name.
	byCertificate map[string]*Principal
}

// NewRules returns the rules of principals.
//
// Errors: a name given twice, or the same token for two principals, each
// naming where both were given.
func NewRules(principals ...*Principal) (*Rules, error) {
	r := &Rules{byToken: map[[sha256.Size]byte]*Principal{}, byCertificate: map[string]*Principal{}}
	names := map[string]*Principal{}
	for _, p := range principals {
		if first, ok := names[p.Name]; ok {
			return nil, fmt.Errorf("%s: principal %q is given at %s too: give each principal once", p.where, p.Name, first.where)
		}
		names[p.Name] = p
		if p.mtls {
			r.byCertificate[p.Name] = p
			continue
		}
		if q, ok := r.byToken[p.hash]; ok {
			return nil, fmt.Errorf("%s: principal %q has the same secret as principal %q (%s): give each principal a token of its own", p.where, p.Name, q.Name, q.where)
		}
		r.byToken[p.hash] = p
	}
	return r, nil
}

// Len returns how many principals the rules have.
func (r *Rules) Len() int { return len(r.byToken) + len(r.byCertificate) }

// ByToken returns the principal whose token is token, nil when none is.
// The token is looked up by its SHA-256, so that the time taken, which
// depends on the hash alone, tells nothing of the tokens: a client cannot
// choose a token whose hash comes closer to a principal's.
func (r *Rules) ByToken(token string) *Principal {
	return r.byToken[sha256.Sum256([]byte(token))]
}

// ByCertificate returns the principal of a client certificate whose
// subject common name is name (a principal given mtls in the ACL file),
// nil when none is. The caller has verified the certificate.
func (r *Rules) ByCertificate(name string) *Principal { return r.byCertificate[name] }
