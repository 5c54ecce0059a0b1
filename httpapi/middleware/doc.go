// Package middleware is what wraps every handler of the HTTP API: the
// ResponseWriter each handler gets (Observe), which records the status, the
// acting uid and an internal error for the access log (RequestLog) and
// the request metrics (RequestMetrics); request ids; the refusal of a path
// not in canonical form (CanonicalPaths); the principal a request's
// credential names, and the refusal of one without what its route needs
// (AuthenticateWith); and the one place that maps an error's code
// to its status and writes its JSON body (WriteError, StatusOf), with the
// JSON writers the handlers reply through (WriteJSON). It imports encode,
// and no other part of httpapi; the principals are internal/access's.
package middleware
