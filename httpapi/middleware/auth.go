package middleware

import (
	"net/http"
	"strings"

	"example.com/groupmembership/internal/access"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/scope"
)

// Need is what a route needs of a request's credential.
type Need uint8

// The needs of routes.
const (
	// NeedNothing serves every request. One with the credential of a
	// principal is named so (PrincipalName), for the access log; its
	// scope does not apply: what anyone may do, a principal may too.
	NeedNothing Need = iota
	// NeedPrincipal serves the requests of a principal, within its scope
	// (membership.WithScope), and answers the others 401.
	NeedPrincipal
	// NeedAdmin serves the requests of a principal with admin, and
	// answers another principal's 403.
	NeedAdmin
)

// ErrorWriter answers a request with an error, as WriteError does.
type ErrorWriter func(w http.ResponseWriter, r *http.Request, err error)

// AuthenticateWith serves next the requests that meet need, with the
// principal whose credential they carry in their context (its
// scope.Scope, which PrincipalName reads; for NeedNothing, Authenticated
// alone) and named in their line of the access log, as rules, read once
// per request, say: a request keeps the rules it started with to its end.
// A credential is the
// header Authorization: Bearer <token> (the scheme in any case, as RFC
// 9110 11.1 says), whose token is looked up in constant time; or, without
// that header, a client certificate the TLS listener verified whose
// subject common name is a principal's of mtls. A request without a
// credential the rules know gets 401 unauthorized with WWW-Authenticate,
// when need asks for one; a principal without admin gets 403 forbidden
// for NeedAdmin. writeError answers the refusals: the SCIM routes answer
// them with SCIM's error schema.
func AuthenticateWith(rules func() *access.Rules, need Need, writeError ErrorWriter, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := identify(rules(), r)
		switch {
		case p == nil && need == NeedNothing:
			next.ServeHTTP(w, r)
			return
		case need == NeedNothing:
			next.ServeHTTP(w, Authenticated(w, r, p.Name))
			return
		case p == nil:
			w.Header()["Www-Authenticate"] = bearerChallenge
			writeError(w, r, membership.Errorf(CodeUnauthorized,
				"this request needs the header Authorization: Bearer <token>, with the token of one of the service's principals"))
			return
		}
		notePrincipal(w, p.Name)
		if need == NeedAdmin && !p.Scope.AllowsAll(scope.Admin) {
			e := membership.Forbidden(p.Scope, scope.Admin, "")
			e.Message += ": " + r.URL.Path + " is the admins'"
			writeError(w, r, e)
			return
		}
		next.ServeHTTP(w, r.WithContext(scope.With(r.Context(), p.Scope)))
	})
}

var bearerChallenge = []string{`Bearer realm="membership"`}

// identify returns the principal of r's credential, nil when it has none
// that rules know.
func identify(rules *access.Rules, r *http.Request) *access.Principal {
	if v := r.Header["Authorization"]; len(v) > 0 {
		if len(v) > 1 {
			return nil // which one a proxy before the service read is unknown
		}
		scheme, token, _ := strings.Cut(v[0], " ")
		token = strings.TrimLeft(token, " ")
		if token == "" || !strings.EqualFold(scheme, "Bearer") {
			return nil
		}
		return rules.ByToken(token)
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		return rules.ByCertificate(r.TLS.PeerCertificates[0].Subject.CommonName)
	}
	return nil
}
