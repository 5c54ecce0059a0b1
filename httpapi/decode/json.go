package decode

import (
	"encoding/json"
	"io"
	"slices"
	"strings"

	"example.com/groupmembership/membership"
)

// JSONObject returns the raw values of the JSON object text, whose keys
// must be among keys, each at most once, spelt exactly so (encoding/json
// would match "OP" too, the last repeat winning). what names the object
// in messages.
//
// Errors: CodeInvalidBody.
func JSONObject(text, what string, keys ...string) (map[string]json.RawMessage, error) {
	invalid := func(err error) error {
		return membership.Errorf(membership.CodeInvalidBody, "%s is not a JSON object: %v", what, err)
	}
	if trimmed := strings.TrimLeft(text, " \t\r\n"); trimmed == "" || trimmed[0] != '{' {
		return nil, membership.Errorf(membership.CodeInvalidBody, "%s is not a JSON object", what)
	}
	dec := json.NewDecoder(strings.NewReader(text))
	if _, err := dec.Token(); err != nil { // {
		return nil, invalid(err)
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalid(err)
		}
		key, _ := tok.(string)
		if !slices.Contains(keys, key) {
			return nil, membership.Errorf(membership.CodeInvalidBody, "%s has an unknown field %.40q: it takes only %s, spelt exactly so",
				what, key, strings.Join(keys, ", "))
		}
		if fields[key] != nil {
			return nil, membership.Errorf(membership.CodeInvalidBody, "%s gives the key %q twice: give it once", what, key)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, invalid(err)
		}
		if string(v) != "null" {
			fields[key] = v
		}
	}
	if _, err := dec.Token(); err != nil { // }
		return nil, invalid(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, membership.Errorf(membership.CodeInvalidBody, "%s is followed by more JSON", what)
	}
	return fields, nil
}

// JSONString decodes raw, the value of key, as a JSON string read as
// ParseUsers reads strings: invalid UTF-8 and lone surrogate escapes are
// errors.
//
// Errors: CodeInvalidChanges.
func JSONString(raw json.RawMessage, key string) (string, error) {
	if raw == nil {
		return "", membership.Errorf(membership.CodeInvalidChanges, "%s is missing", key)
	}
	p := usersParser{s: string(raw), array: key, code: membership.CodeInvalidChanges}
	if p.peek() != '"' {
		return "", membership.Errorf(membership.CodeInvalidChanges, "%s is not a JSON string", key)
	}
	s, err := p.string()
	if err != nil || p.pos != len(p.s) {
		return "", membership.Errorf(membership.CodeInvalidChanges, "%s is not a valid JSON string", key)
	}
	return s, nil
}
