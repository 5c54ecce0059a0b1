package scim

import (
	"encoding/json"
	"net/http"

	"example.com/groupmembership/httpapi/decode"
	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/membership"

	"example.com/groupmembership/httpapi/scim/wire"
)

// updateTries bounds how often a read-modify-write (a PUT or a PATCH
// without If-Match) reads again after another change overtook it, and
// how often a POST takes another id after another POST took its own.
const updateTries = 8

// idempotentReplayed is the value of Idempotent-Replayed, as the service's
// other routes send it.
var idempotentReplayed = []string{"true"}

// conditions returns the precondition the If-Match and If-None-Match of r
// set (see decode.WriteCondition), and whether r has any: a write without
// them is made against the state it read, and read again when another
// change comes first.
func conditions(r *http.Request, svc services) (membership.Precondition, bool, error) {
	cond, err := decode.WriteCondition(r, svc.Epoch())
	return cond, !cond.IsZero(), err
}

// principal returns the principal r authenticated as, which every change
// of r's names.
func principal(r *http.Request) string { return middleware.PrincipalName(r.Context()) }

// keyed gives w r's principal and its Idempotency-Key, if it has one, with
// the conditions r sent as the fingerprint's: a retry of a PUT, PATCH or
// DELETE is the same request whatever revision its write was made against.
func keyed(r *http.Request, w membership.Write) (membership.Write, error) {
	w.Principal = principal(r)
	key, err := decode.IdempotencyKey(r)
	if err != nil || key == "" {
		return w, err
	}
	w.Idem.Key = key
	w.Conditions = "scim\n" + decode.ConditionsText(r)
	return w, nil
}

// refuseKey refuses an Idempotency-Key on a POST, which creates a resource
// of an id chosen on each try: a retry is found by its userName (409
// uniqueness) or by a filter on its displayName.
func refuseKey(r *http.Request) error {
	if _, ok := r.Header["Idempotency-Key"]; ok {
		return wire.BadRequest(wire.InvalidValue, "a POST of a resource takes no Idempotency-Key: a User's retry is refused by its userName (409), "+
			"a Group's is found with filter=displayName eq \"…\"")
	}
	return nil
}

// isPreconditionFailed reports whether err is a precondition that did not
// hold.
func isPreconditionFailed(err error) bool {
	return membership.ErrorCode(err) == membership.CodePreconditionFailed
}

// preconditionFailed returns the 412 of a write of a resource of kind
// ("User", "Group") that its If-Match or If-None-Match refused.
func preconditionFailed(kind string) error {
	return wire.Errorf(http.StatusPreconditionFailed, "", "the %s is not in the state If-Match or If-None-Match requires: "+
		"nothing was changed; read it again for its current version", kind)
}

// markReplayed sets Idempotent-Replayed on the reply of a replay.
func markReplayed(w http.ResponseWriter, replayed bool) {
	if replayed {
		w.Header()["Idempotent-Replayed"] = idempotentReplayed
	}
}

// readDocument reads r's body, a SCIM document, within d's bounds.
func readDocument(r *http.Request, d Deps) (map[string]json.RawMessage, error) {
	return wire.ReadDocument(r, d.MaxBodyBytes, d.Bodies)
}

// serveDelete answers a DELETE of a resource by applying write, the
// deletion, with the request's If-Match and Idempotency-Key, only while the
// resource exists: 204, or unknown (its 404) when it does not and the
// client asked for no state of it, or the 412 of kind when it did.
func serveDelete(d Deps, w http.ResponseWriter, r *http.Request, write membership.Write, unknown error, kind string) {
	cond, given, err := conditions(r, d.services())
	if err == nil {
		cond.Exists = true
		write.If = cond
		write, err = keyed(r, write)
	}
	var res membership.Result
	if err == nil {
		res, err = d.Service.Write(r.Context(), write)
	}
	switch {
	case isPreconditionFailed(err) && !given:
		err = unknown
	case isPreconditionFailed(err):
		err = preconditionFailed(kind)
	}
	if err != nil {
		wire.WriteError(w, r, err)
		return
	}
	markReplayed(w, res.Replayed)
	w.WriteHeader(http.StatusNoContent)
}
