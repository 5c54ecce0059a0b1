// Package wire is SCIM's format on the wire (RFC 7643, RFC 7644), as the
// SCIM routes (package scim) read and write it: JSON objects written in
// order and read with names folded to lower case (json.go), the error
// schema and its scimTypes (errors.go), the query of a list, its page
// and the attributes it returns (query.go), filters (filter.go), and the
// URNs of the schemas (schemas.go). It holds no route and no state.
package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"example.com/groupmembership/httpapi/decode"
	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/membership"
)

// Object is a JSON object written with its members in order, as SCIM's
// examples show them (encoding/json sorts a map's).
type Object []Member

// Member is one member of an object.
type Member struct {
	Name  string
	Value any
}

// MarshalJSON writes o's members in order.
func (o Object) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, m := range o {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, m.Name) // names are ASCII: its quoting is JSON's
		b = append(b, ':')
		v, err := json.Marshal(m.Value)
		if err != nil {
			return nil, err
		}
		b = append(b, v...)
	}
	return append(b, '}'), nil
}

// Get returns the value of o's member name, and false when it has none.
func (o Object) Get(name string) (any, bool) {
	for _, m := range o {
		if m.Name == name {
			return m.Value, true
		}
	}
	return nil, false
}

// ContentType is the media type of SCIM's requests and replies.
const ContentType = "application/scim+json"

var scimContentTypeField = []string{ContentType}

// WriteJSON writes body as SCIM's JSON with status.
func WriteJSON(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil { // only values the package builds: strings, numbers, objects
		b, status = []byte(`{"schemas":["`+ErrorSchema+`"],"status":"500","detail":"internal error"}`), http.StatusInternalServerError
		middleware.RecordInternalError(w, err)
	}
	h := w.Header()
	h["Content-Type"] = scimContentTypeField
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	_, _ = w.Write(b) // a failed write means the client went away
}

// ReadDocument reads r's body, a JSON object of SCIM's, at most
// maxBodyBytes taken from the bodies budget, and returns its members by
// attribute name folded to lower case: SCIM's attribute names are
// case-insensitive (RFC 7643 2.1). A name given twice, in any case, is
// refused rather than one of them picked.
func ReadDocument(r *http.Request, maxBodyBytes int64, bodies *budget.Bytes) (map[string]json.RawMessage, error) {
	if err := checkContentType(r); err != nil {
		return nil, err
	}
	body, lease, err := decode.ReadBody(r, maxBodyBytes, bodies)
	if err != nil {
		return nil, err
	}
	defer lease.Release()
	if !utf8.Valid(body) { // encoding/json would put U+FFFD in its place
		return nil, BadRequest(InvalidSyntax, "the body is not valid UTF-8")
	}
	return ObjectOf(body, "the body")
}

// checkContentType refuses a body that is not JSON: SCIM's media type,
// application/json, or none said.
func checkContentType(r *http.Request) error {
	ct := middleware.HeaderValue(r, "Content-Type")
	if ct == "" {
		return nil
	}
	mediaType, _, err := mime.ParseMediaType(ct)
	if err == nil && (mediaType == ContentType || mediaType == "application/json") {
		return nil
	}
	return membership.Errorf(middleware.CodeUnsupportedMediaType, "Content-Type %.60q is not supported: send %s or application/json", ct, ContentType)
}

// ObjectOf parses raw as a JSON object whose member names are folded to
// lower case, and refuses one that names a member twice. what names raw in
// errors.
func ObjectOf(raw []byte, what string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, BadRequest(InvalidSyntax, "%s is not a JSON object", what)
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, BadRequest(InvalidSyntax, "%s is not valid JSON: %v", what, err)
		}
		name := strings.ToLower(t.(string)) // inside an object, a token is a name
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, BadRequest(InvalidSyntax, "%s is not valid JSON: %v", what, err)
		}
		if _, dup := out[name]; dup {
			return nil, BadRequest(InvalidSyntax, "%s names the attribute %q twice", what, t)
		}
		out[name] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, BadRequest(InvalidSyntax, "%s is not valid JSON: %v", what, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, BadRequest(InvalidSyntax, "%s has more after its object", what)
	}
	return out, nil
}

// IsNull reports whether raw is JSON's null, or absent (nil).
func IsNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// StringOf returns raw as a string attribute: a JSON string, or null for
// "" (an attribute unassigned).
func StringOf(raw json.RawMessage, name string) (string, error) {
	if IsNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", BadRequest(InvalidValue, "%s is not a string", name)
	}
	return s, nil
}

// BoolOf returns raw as a boolean attribute: true or false, or the
// strings "true" and "false" in any case, which Entra ID sends.
func BoolOf(raw json.RawMessage, name string) (bool, error) {
	var b bool
	if err := json.Unmarshal(raw, &b); err == nil {
		return b, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		switch strings.ToLower(s) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
	}
	return false, BadRequest(InvalidValue, "%s is not a boolean", name)
}

// ArrayOf returns raw as an array: null is none.
func ArrayOf(raw json.RawMessage, name string) ([]json.RawMessage, error) {
	if IsNull(raw) {
		return nil, nil
	}
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, BadRequest(InvalidValue, "%s is not an array", name)
	}
	return a, nil
}

// IsObject reports whether raw, a JSON value, is an object.
func IsObject(raw json.RawMessage) bool {
	b := bytes.TrimLeft(raw, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

// ObjectValue parses raw, the value of what, as ObjectOf does; a value
// that is no object is invalidValue, an object that names a member twice
// invalidSyntax.
func ObjectValue(raw json.RawMessage, what string) (map[string]json.RawMessage, error) {
	if !IsObject(raw) {
		return nil, BadRequest(InvalidValue, "%s is not an object", what)
	}
	return ObjectOf(raw, what)
}

// EachOf calls each with the elements of raw, a JSON array (null is an
// empty one), in order, and stops at the first error each returns: an
// array of many elements is read no further than a bound each keeps.
func EachOf(raw json.RawMessage, name string, each func(json.RawMessage) error) error {
	if IsNull(raw) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return BadRequest(InvalidValue, "%s is not an array", name)
	}
	for dec.More() {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return BadRequest(InvalidSyntax, "%s is not valid JSON: %v", name, err)
		}
		if err := each(v); err != nil {
			return err
		}
	}
	return nil
}

// Obj returns the object of the members given as pairs: a name, then its
// value.
func Obj(pairs ...any) Object {
	o := make(Object, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		o = append(o, Member{Name: pairs[i].(string), Value: pairs[i+1]})
	}
	return o
}

// With returns o with the members given as pairs appended.
func (o Object) With(pairs ...any) Object { return append(o, Obj(pairs...)...) }
