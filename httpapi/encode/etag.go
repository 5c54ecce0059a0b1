package encode

import (
	"net/http"
	"strconv"
	"strings"

	"example.com/groupmembership/membership"
)

// ETag returns the ETag header value of a group's list at revision, in the
// store's epoch: "<epoch, 16 hex digits>-<revision>". The epoch tells apart
// the histories a revision may count in (an in-memory store's restarts, a
// repaired data directory), so that an ETag never names two different lists.
func ETag(epoch uint64, revision membership.Revision) []string {
	b := make([]byte, 0, 40)
	b = append(b, '"')
	b = appendEpoch(b, epoch)
	b = append(b, '-')
	b = strconv.AppendUint(b, uint64(revision), 10)
	return []string{string(append(b, '"'))}
}

// appendEpoch appends epoch as 16 hex digits.
func appendEpoch(b []byte, epoch uint64) []byte {
	const hexDigits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, hexDigits[epoch>>shift&0xf])
	}
	return b
}

// EpochHex returns epoch as 16 hex digits, as X-Epoch and ETags carry it.
func EpochHex(epoch uint64) string { return string(appendEpoch(make([]byte, 0, 16), epoch)) }

// NoneMatch reports whether the request's If-None-Match names the list at
// revision in epoch: "*", or a list of entity tags one of which is the
// revision's, compared weakly (a W/ prefix is ignored), as RFC 9110 says for
// GET.
func NoneMatch(r *http.Request, epoch uint64, revision membership.Revision) bool {
	want := ETag(epoch, revision)[0]
	for _, field := range r.Header["If-None-Match"] {
		for tag := range strings.SplitSeq(field, ",") {
			tag = strings.TrimSpace(tag)
			if tag == "*" || strings.TrimPrefix(tag, "W/") == want {
				return true
			}
		}
	}
	return false
}

// AnswerNotModified answers 304 (WriteNotModified) and returns true when
// r's If-None-Match names the ETag of epoch and revision; a request
// without one costs no ETag.
func AnswerNotModified(w http.ResponseWriter, r *http.Request, epoch uint64, revision membership.Revision) bool {
	if len(r.Header["If-None-Match"]) == 0 || !NoneMatch(r, epoch, revision) {
		return false
	}
	WriteNotModified(w, epoch, revision)
	return true
}

// WriteNotModified answers 304 with the ETag and no body.
func WriteNotModified(w http.ResponseWriter, epoch uint64, revision membership.Revision) {
	w.Header()["Etag"] = ETag(epoch, revision)
	w.WriteHeader(http.StatusNotModified)
}
