package decode

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"example.com/groupmembership/membership"
)

// Query is a request's query string, parsed strictly, in one place for every
// route: each pair well formed (url.ParseQuery's error is not dropped, as
// r.URL.Query drops it), each name one the route takes, each at most once,
// and none empty. A value absent is "".
type Query map[string]string

// ParseQuery parses the Query of r, whose route takes the parameters named.
//
// Errors: CodeInvalidQuery.
func ParseQuery(r *http.Request, takes ...string) (Query, error) {
	if r.URL.RawQuery == "" { // the common case, at no cost
		return nil, nil
	}
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, membership.Errorf(membership.CodeInvalidQuery, "the query string is malformed: %v", err)
	}
	q := make(Query, len(values))
	for _, name := range slices.Sorted(maps.Keys(values)) {
		vs := values[name]
		switch {
		case !slices.Contains(takes, name):
			return nil, membership.Errorf(membership.CodeInvalidQuery, "unknown parameter %.40q: %s", name, takesWhat(name, takes))
		case len(vs) > 1:
			return nil, membership.Errorf(membership.CodeInvalidQuery, "%s is given %d times: give it once", name, len(vs))
		case vs[0] == "":
			return nil, membership.Errorf(membership.CodeInvalidQuery, "%s is empty: give it a value, or leave it out", name)
		}
		q[name] = vs[0]
	}
	return q, nil
}

// takesWhat says what to do instead of sending the parameter name.
func takesWhat(name string, takes []string) string {
	switch {
	case name == "users":
		return "it belongs in the body of a POST, PUT or DELETE of /group-user/{groupID}, not in the query string: send users=[uid, ...] as the body"
	case name == "groups":
		return "it belongs in the body of a POST, PUT or DELETE of /group-group/{groupID}, not in the query string: send groups=[\"group id\", ...] as the body"
	case len(takes) == 0:
		return "this route takes no parameters"
	default:
		return "this route takes " + strings.Join(takes, ", ")
	}
}

// CanonicalUint parses s as a decimal integer written canonically: digits
// only, no sign, no leading zero but for 0 itself.
func CanonicalUint(s string) (uint64, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// limit returns the limit parameter, 1 to membership.MaxPageSize, or 0 when
// absent.
//
// Errors: CodeInvalidQuery.
func (q Query) Limit() (int, error) {
	v, ok := q["limit"]
	if !ok {
		return 0, nil
	}
	n, ok := CanonicalUint(v)
	if !ok || n < 1 || n > membership.MaxPageSize {
		// The same words as membership.CheckLimit, about the text sent.
		return 0, membership.Errorf(membership.CodeInvalidQuery, "limit %.40q is not an integer from 1 to %d", v, membership.MaxPageSize)
	}
	return int(n), nil
}
