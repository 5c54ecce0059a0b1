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
	return ScopedETag(epoch, revision, "")
}

// ScopedETag is ETag of a list that shows only the groups a scope may
// read, whose digest is tag (scope.Scope.ReadTag; "" for every
// group): "<epoch>-<revision>-<tag>". The same state lists other groups
// for another scope, and for the same principal after a reload of its
// rules, so the ETag of one never matches the other.
func ScopedETag(epoch uint64, revision membership.Revision, tag string) []string {
	b := make([]byte, 0, 40+len(tag))
	b = append(b, '"')
	b = appendEpoch(b, epoch)
	b = append(b, '-')
	b = strconv.AppendUint(b, uint64(revision), 10)
	if tag != "" {
		b = append(append(b, '-'), tag...)
	}
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
	return noneMatchTag(r, ETag(epoch, revision)[0])
}

// noneMatchTag reports whether the request's If-None-Match names want, as
// NoneMatch says.
func noneMatchTag(r *http.Request, want string) bool {
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
	return AnswerNotModifiedScoped(w, r, epoch, revision, "")
}

// AnswerNotModifiedScoped is AnswerNotModified for the ScopedETag of tag.
func AnswerNotModifiedScoped(w http.ResponseWriter, r *http.Request, epoch uint64, revision membership.Revision, tag string) bool {
	if len(r.Header["If-None-Match"]) == 0 {
		return false
	}
	etag := ScopedETag(epoch, revision, tag)
	if !noneMatchTag(r, etag[0]) {
		return false
	}
	w.Header()["Etag"] = etag
	w.WriteHeader(http.StatusNotModified)
	return true
}

// WriteNotModified answers 304 with the ETag and no body.
func WriteNotModified(w http.ResponseWriter, epoch uint64, revision membership.Revision) {
	w.Header()["Etag"] = ETag(epoch, revision)
	w.WriteHeader(http.StatusNotModified)
}
