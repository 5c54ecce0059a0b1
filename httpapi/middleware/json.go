package middleware

import "net/http"

// Header values every reply shares. Assigning them directly skips the key
// canonicalisation and the slice allocation of Header.Set on every reply; the
// slices are never changed, and Header.Add on them would copy.
var (
	jsonContentType = []string{"application/json"}
	noSniff         = []string{"nosniff"}
)

// WriteJSON writes body, which must be JSON, with the given status.
func WriteJSON(w http.ResponseWriter, status int, body []byte) {
	WriteJSONParts(w, status, nil, body)
}

// WriteJSONParts writes the JSON value that head and body make together,
// with the given status, without joining them in a new buffer.
func WriteJSONParts(w http.ResponseWriter, status int, head, body []byte) {
	WriteJSONOfLength(w, status, UintField(w, uint64(len(head)+len(body))), head, body)
}

// WriteJSONOfLength is WriteJSONParts with the Content-Length's value,
// the length of head and body, made by the caller: a cached list's is made
// once.
func WriteJSONOfLength(w http.ResponseWriter, status int, length []string, head, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["X-Content-Type-Options"] = noSniff
	h["Content-Length"] = length
	w.WriteHeader(status)
	// A failed write means the client went away: nothing to tell it.
	if len(head) > 0 {
		_, _ = w.Write(head)
	}
	_, _ = w.Write(body)
}
