package decode

import (
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"strings"

	"example.com/groupmembership/membership"
)

// ParseChangeForm returns the list parameter ("users" or "groups") and the
// uid parameter of a form-encoded body. It checks the whole body as
// url.ParseQuery does, but keeps only the two values it needs instead of
// building a map of all of them.
func ParseChangeForm(body, list string) (value, uid string, err error) {
	var seenList, seenUID int
	for body != "" {
		var pair string
		pair, body, _ = strings.Cut(body, "&")
		if strings.Contains(pair, ";") {
			return "", "", membership.Errorf(membership.CodeInvalidBody, "the body is not form-encoded: it has a ; separator")
		}
		if pair == "" {
			continue
		}
		rawKey, rawValue, _ := strings.Cut(pair, "=")
		key, err1 := unescapeForm(rawKey)
		v, err2 := unescapeForm(rawValue)
		if err := errors.Join(err1, err2); err != nil {
			return "", "", membership.Errorf(membership.CodeInvalidBody, "the body is not form-encoded: %v", err)
		}
		switch key {
		case list:
			value = v
			seenList++
		case "uid":
			uid = v
			if uid == "" {
				uid = `""` // given empty, not absent: ParseUID refuses it, as it does in JSON
			}
			seenUID++
		default:
			// Refused as a JSON body's unknown field is: a key the
			// service drops (nickname=, uids=) is a change the client
			// thinks it made.
			return "", "", membership.Errorf(membership.CodeInvalidBody, "unknown parameter %.40q: %s", key, formTakes(list))
		}
	}
	for _, p := range []struct {
		name string
		seen int
	}{{list, seenList}, {"uid", seenUID}} {
		if p.seen > 1 {
			return "", "", membership.Errorf(membership.CodeInvalidBody, "the parameter %s is given %d times: give it once", p.name, p.seen)
		}
	}
	return value, uid, nil
}

// formTakes says what a form body takes, for the message about another
// parameter.
func formTakes(list string) string {
	if list == "users" {
		return `the body takes only users and uid (a nickname goes in a users element: users=[{"uid":9,"nickname":"Bob"}])`
	}
	return `the body takes only ` + list + ` and uid (an expiry goes in a ` + list + ` element: groups=[{"group":"backend","ttl":"4h"}])`
}

// ParseChangeJSON returns the list ("users" or "groups") and uid of a
// JSON body, {"users": [...], "uid": ...}, where uid, optional, is a number
// or a decimal string. The list comes back as JSON text, for decode.ParseUsers or
// decode.ParseSubgroups. Unknown fields, and anything after the object, are
// errors.
func ParseChangeJSON(body, list string) (value, uid string, err error) {
	var req struct {
		List json.RawMessage
		UID  json.RawMessage
	}
	if trimmed := strings.TrimLeft(body, " \t\r\n"); trimmed != "" && trimmed[0] != '{' {
		example := `{"users":[1,2]}`
		if list != "users" {
			example = `{"` + list + `":["backend"]}`
		}
		return "", "", membership.Errorf(membership.CodeInvalidBody,
			"the body is not a JSON object: send an object with %s, and uid if you like, such as %s", list, example)
	}
	invalid := func(err error) error {
		return membership.Errorf(membership.CodeInvalidBody, "the body is not a JSON object with %s and uid: %v", list, err)
	}
	// Keys are matched byte for byte and each at most once: encoding/json
	// would match "USERS" or "uſers" too, the last of a repeated key
	// winning, and a proxy that reads the JSON would see other users than
	// those applied.
	dec := json.NewDecoder(strings.NewReader(body))
	if _, err := dec.Token(); err != nil { // {
		return "", "", invalid(err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", "", invalid(err)
		}
		key, _ := tok.(string)
		var field *json.RawMessage
		switch key {
		case list:
			field = &req.List
		case "uid":
			field = &req.UID
		default:
			return "", "", membership.Errorf(membership.CodeInvalidBody,
				"unknown field %.40q: the body takes only %q and \"uid\", spelt exactly so", key, list)
		}
		if *field != nil {
			return "", "", membership.Errorf(membership.CodeInvalidBody, "the key %q is given twice: give it once", key)
		}
		if err := dec.Decode(field); err != nil {
			return "", "", invalid(err)
		}
	}
	if _, err := dec.Token(); err != nil { // }
		return "", "", invalid(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", "", membership.Errorf(membership.CodeInvalidBody, "the body has more than one JSON value")
	}
	if string(req.List) != "null" {
		value = string(req.List)
	}
	uid, err = UIDText(req.UID)
	return value, uid, err
}

// UIDText returns the text of the JSON value raw as a uid field's, for
// ParseUID: a string's contents, a number's digits, "" when absent or null.
func UIDText(raw json.RawMessage) (string, error) {
	switch u := string(raw); {
	case u == "" || u == "null":
		return "", nil
	case strings.HasPrefix(u, `"`):
		var uid string
		if err := json.Unmarshal(raw, &uid); err != nil {
			return "", membership.Errorf(membership.CodeInvalidBody, "the uid is not a valid JSON string")
		}
		if uid == "" {
			uid = `""` // an empty string is given, not absent: ParseUID rejects it
		}
		return uid, nil
	default:
		return u, nil
	}
}

// unescapeForm decodes one form-encoded key or value, without allocating
// when there is nothing to decode.
func unescapeForm(s string) (string, error) {
	if !strings.ContainsAny(s, "%+") {
		return s, nil
	}
	return url.QueryUnescape(s)
}
