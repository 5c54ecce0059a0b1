package decode

import (
	"errors"
	"net/http"
	"strings"

	"example.com/groupmembership/httpapi/encode"
	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/membership"
)

// Conditional writes (RFC 9110 13.1). A write to one group may carry
// If-Match and If-None-Match; they become the write's
// membership.Precondition, which the store checks in the same step that
// applies the write, so that two writers racing with one ETag cannot both
// win:
//
//   - If-Match: * holds while the group exists, and a group exists while
//     it has members.
//   - If-Match with entity tags holds when one of them is the group's
//     current ETag. Tags are compared strongly, as RFC 9110 says for
//     If-Match: a weak tag (W/"…") never matches. A tag of another epoch,
//     or one that is not of the form the service gives, is well formed but
//     names no state of this store: it matches nothing.
//   - If-None-Match: * holds while the group is empty: a PUT with it
//     creates the group, and fails when someone else already did.
//     If-None-Match with entity tags is refused with 400 invalid_header:
//     on a write, only * is taken.
//
// A precondition that does not hold is 412 precondition_failed with the
// group's current ETag, and nothing was changed. A header that is not
// the RFC's syntax (an unterminated quote, * beside tags, an empty value)
// is 400 invalid_header.

// WriteCondition returns the precondition that the If-Match and
// If-None-Match headers of r set for a write to one group of the store
// whose epoch is epoch. When If-Match names only tags that cannot match
// (of another epoch, or not of the form the service gives), the write
// fails whatever the group's state: its precondition is one no state
// meets (membership.NeverHolds).
//
// Errors: middleware.CodeInvalidHeader.
func WriteCondition(r *http.Request, epoch uint64) (cond membership.Precondition, err error) {
	if fields, ok := r.Header["If-Match"]; ok {
		star, tags, err := parseEntityTags("If-Match", fields)
		if err != nil {
			return cond, err
		}
		if len(tags) > membership.MaxPreconditionRevisions {
			return cond, membership.Errorf(middleware.CodeInvalidHeader,
				"If-Match has %d entity tags, more than %d: send the ETag you read", len(tags), membership.MaxPreconditionRevisions)
		}
		cond.Exists = star
		for _, t := range tags {
			if rev, ok := ourRevision(t, epoch); ok {
				cond.Revisions = append(cond.Revisions, rev)
			}
		}
		if !star && len(cond.Revisions) == 0 {
			cond = membership.NeverHolds(cond)
		}
	}
	if fields, ok := r.Header["If-None-Match"]; ok {
		star, _, err := parseEntityTags("If-None-Match", fields)
		if err != nil {
			return cond, err
		}
		if !star {
			return cond, membership.Errorf(middleware.CodeInvalidHeader,
				"on a write, If-None-Match takes only * (apply the write only while the group is empty); "+
					"to apply it only while the group is unchanged, send its ETag in If-Match")
		}
		cond.Empty = true
	}
	return cond, nil
}

// RefuseConditions refuses If-Match and If-None-Match on a write that
// takes neither, saying why: removing a user from every group has no one
// group whose state they could name; a batch's changes carry their own.
//
// Errors: middleware.CodeInvalidHeader.
func RefuseConditions(r *http.Request, why string) error {
	for _, name := range []string{"If-Match", "If-None-Match"} {
		if _, ok := r.Header[name]; ok {
			return membership.Errorf(middleware.CodeInvalidHeader, "%s is not taken here: %s", name, why)
		}
	}
	return nil
}

// ConditionsText returns the conditions of r as it sent them, for the
// fingerprint of a keyed write (membership.Write.Conditions): its If-Match
// and If-None-Match lines, "" for none.
func ConditionsText(r *http.Request) string {
	var b strings.Builder
	for _, name := range []string{"If-Match", "If-None-Match"} {
		for _, v := range r.Header[name] {
			b.WriteString(name)
			b.WriteByte(':')
			b.WriteString(v)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// entityTag is one entity tag of an If-Match or If-None-Match header.
type entityTag struct {
	weak   bool
	opaque string // between the quotes
}

// parseEntityTags parses the fields of the header name as RFC 9110 13.1.1
// writes them: "*" alone, or a comma-separated list of one or more entity
// tags (W/"…" or "…"; the quoted part of visible ASCII but '"', and bytes
// 0x80 to 0xFF), fields of one header being one list.
//
// Errors: middleware.CodeInvalidHeader.
func parseEntityTags(name string, fields []string) (star bool, tags []entityTag, err error) {
	elements := 0
	for _, field := range fields {
		for pos := 0; ; {
			pos = skipListSeparators(field, pos)
			if pos == len(field) {
				break
			}
			elements++
			if field[pos] == '*' {
				star = true
				pos++
			} else {
				var t entityTag
				if t, pos, err = parseEntityTag(field, pos); err != nil {
					return false, nil, membership.Errorf(middleware.CodeInvalidHeader,
						"%s %.60q is not * or a list of entity tags (\"…\" or W/\"…\"): %v", name, field, err)
				}
				tags = append(tags, t)
			}
			pos = skipSpace(field, pos)
			if pos < len(field) && field[pos] != ',' {
				return false, nil, membership.Errorf(middleware.CodeInvalidHeader,
					"%s %.60q is not * or a list of entity tags: want a comma at byte %d", name, field, pos)
			}
		}
	}
	switch {
	case elements == 0:
		return false, nil, membership.Errorf(middleware.CodeInvalidHeader, "%s is empty: send * or entity tags, or leave it out", name)
	case star && elements > 1:
		return false, nil, membership.Errorf(middleware.CodeInvalidHeader, "%s has * among other values: send * alone", name)
	}
	return star, tags, nil
}

// parseEntityTag parses the entity tag at pos of field, and returns it
// and the position after it.
func parseEntityTag(field string, pos int) (entityTag, int, error) {
	var t entityTag
	if len(field)-pos >= 2 && field[pos:pos+2] == "W/" {
		t.weak = true
		pos += 2
	}
	if pos == len(field) || field[pos] != '"' {
		return t, pos, errors.New("an entity tag starts with a quote")
	}
	start := pos + 1
	for pos = start; pos < len(field); pos++ {
		switch c := field[pos]; {
		case c == '"':
			t.opaque = field[start:pos]
			return t, pos + 1, nil
		case c < 0x21 || c == 0x7f:
			return t, pos, errors.New("a space or a control character inside the quotes")
		}
	}
	return t, pos, errors.New("the quote is not closed")
}

// skipListSeparators skips the spaces and empty elements of a list (RFC
// 9110 5.6.1) from pos.
func skipListSeparators(s string, pos int) int {
	for pos < len(s) && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == ',') {
		pos++
	}
	return pos
}

func skipSpace(s string, pos int) int {
	for pos < len(s) && (s[pos] == ' ' || s[pos] == '\t') {
		pos++
	}
	return pos
}

// ourRevision returns the revision t names when it is a strong tag of the
// form encode.ETag gives, in epoch: "<epoch, 16 hex digits>-<revision>".
func ourRevision(t entityTag, epoch uint64) (membership.Revision, bool) {
	const epochLen = 16
	o := t.opaque
	if t.weak || len(o) < epochLen+2 || o[epochLen] != '-' || o[:epochLen] != encode.EpochHex(epoch) {
		return 0, false
	}
	rev, ok := CanonicalUint(o[epochLen+1:])
	return membership.Revision(rev), ok
}
