package httpapi

import (
	"net/http"
	"strings"

	"example.com/groupmembership/membership"
)

// Safe retries. Every write (POST, PUT and DELETE of /group-user/{groupID},
// DELETE /groups/{groupID}, DELETE /user-group/{uid}, POST /batch) takes an
// Idempotency-Key header: the service applies the first request with a key,
// and answers a repeat of it (the same route, group, users with their
// nicknames, conditions and acting uid; see membership.Idempotency) with the
// first reply, status, body, X-Revision and every other header the write
// sets, plus Idempotent-Replayed: true, applying nothing. The store keeps
// the keys: the handlers only read the header and mark the replays. Reads
// ignore the header.

// idempotencyKeyHeader is the request header that names a write for safe
// retries, as net/http canonicalizes it.
const idempotencyKeyHeader = "Idempotency-Key"

// idempotentReplayed is the value of the Idempotent-Replayed header of a
// replay (the header Stripe's API sends).
var idempotentReplayed = []string{"true"}

// idempotencyKey returns the Idempotency-Key of the write r, "" when it has
// none. The service validates the key with the rest of the write, and
// fingerprints the request; only a key that is sent but empty is refused
// here, since the service would take "" for no key.
//
// Spaces and tabs around the key are not part of it: HTTP strips them from
// a field's value, so a key sent as " k" arrives as "k", and one of spaces
// only as an empty key; they are stripped here too, so that a handler
// called without net/http's parsing sees the same key.
//
// Errors: membership.CodeInvalidIdempotencyKey (more than one header line,
// or an empty key).
func idempotencyKey(r *http.Request) (string, error) {
	fields, ok := r.Header[idempotencyKeyHeader]
	if !ok {
		return "", nil
	}
	if len(fields) != 1 {
		return "", membership.Errorf(membership.CodeInvalidIdempotencyKey,
			"the request has %d Idempotency-Key header lines: send one key, on one line", len(fields))
	}
	key := strings.Trim(fields[0], " \t")
	if key == "" {
		// Sent, but empty: not the same as no key, which the service
		// could not tell from "".
		return "", membership.ValidateIdempotencyKey(key)
	}
	return key, nil
}

// writeWritten sets the headers of a write's reply: X-Revision, the
// revision that reflects it, and Idempotent-Replayed when the reply is a
// replay of the first reply to the request's Idempotency-Key.
func writeWritten(w http.ResponseWriter, rev membership.Revision, replayed bool) {
	writeRevision(w, rev)
	if replayed {
		w.Header()["Idempotent-Replayed"] = idempotentReplayed
	}
}
