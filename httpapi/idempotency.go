package httpapi

import (
	"net/http"

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

// idempotentReplayed is the value of the Idempotent-Replayed header of a
// replay (the header Stripe's API sends).
var idempotentReplayed = []string{"true"}

// writeWritten sets the headers of a write's reply: X-Revision, the
// revision that reflects it, and Idempotent-Replayed when the reply is a
// replay of the first reply to the request's Idempotency-Key.
func writeWritten(w http.ResponseWriter, rev membership.Revision, replayed bool) {
	writeRevision(w, rev)
	if replayed {
		w.Header()["Idempotent-Replayed"] = idempotentReplayed
	}
}
