package decode

import (
	"net/http"
	"strings"

	"example.com/groupmembership/membership"
)

// idempotencyKeyHeader is the request header that names a write for safe
// retries, as net/http canonicalizes it.
const idempotencyKeyHeader = "Idempotency-Key"

// IdempotencyKey returns the Idempotency-Key of the write r, "" when it has
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
func IdempotencyKey(r *http.Request) (string, error) {
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
