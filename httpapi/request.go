package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unsafe"

	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/membership"
)

// The Content-Types a change request may declare. Without one, the body is
// read as a form.
const (
	formMediaType = "application/x-www-form-urlencoded"
	jsonMediaType = "application/json"
)

// changeRequest is the decoded body of a write to a group's users or
// subgroups.
type changeRequest struct {
	list      string         // the users or groups parameter, still JSON text
	actingUID membership.UID // 0 when the request named none
	// lease holds the body's memory, taken from the bodies budget: users
	// may point into it. The caller releases it when done.
	lease budget.Lease
}

// readChangeRequest reads the body of a POST, PUT or DELETE: a form, or a JSON
// object, with list ("users" or "groups") and uid. It reads the body itself
// because Request.ParseForm ignores the body of a DELETE.
//
// Errors: codeUnsupportedMediaType, CodeBodyTooLarge, CodeInvalidBody,
// CodeInvalidUID.
// The body's memory is taken from bodies: on success the caller releases
// req.lease once done with req.
func readChangeRequest(w http.ResponseWriter, r *http.Request, list string, maxBodyBytes int64, bodies *budget.Bytes) (req changeRequest, err error) {
	parse := parseChangeForm
	if ct := headerValue(r, "Content-Type"); ct != "" && ct != formMediaType {
		mediaType, _, err := mime.ParseMediaType(ct)
		switch {
		case err == nil && mediaType == formMediaType:
		case err == nil && mediaType == jsonMediaType:
			parse = parseChangeJSON
		default:
			return changeRequest{}, membership.Errorf(codeUnsupportedMediaType,
				"Content-Type %q is not supported: send %s or %s", ct, formMediaType, jsonMediaType)
		}
	}
	body, lease, err := readBody(r, maxBodyBytes, bodies)
	if err != nil {
		return changeRequest{}, err
	}
	req.lease = lease
	defer func() {
		if err != nil {
			req.lease.Release()
		}
	}()
	// The body is never written again: read it as a string without a copy
	// that the budget would not count.
	value, uid, err := parse(unsafe.String(unsafe.SliceData(body), len(body)), list)
	if err != nil {
		return req, err
	}
	req.list = value
	// Decoded into a copy (an escaped form value, a JSON body), it takes
	// memory of its own, taken with the body's at once, so that a request
	// alone is served whatever its size.
	if !within(body, value) && !req.lease.Resize(req.lease.Held()+int64(len(value))) {
		return req, bodiesBusy()
	}
	if uid != "" {
		var ok bool
		if req.actingUID, ok = membership.ParseUID(uid); !ok {
			return req, membership.Errorf(membership.CodeInvalidUID,
				"the uid parameter %.40q is not %s", uid, membership.UIDRange)
		}
		setActingUID(w, req.actingUID)
	}
	return req, nil
}

// headerValue returns the first value of the request's header field key,
// as Header.Get does, for a key in canonical form: the server stores every
// field under its canonical name, so the map is read without making it.
func headerValue(r *http.Request, key string) string {
	if v := r.Header[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// firstBodyBuffer is the room a body gets before its bytes arrive.
const firstBodyBuffer = 512

// readBody reads the whole body, at most maxBodyBytes of it. Its memory
// follows the bytes that arrive, never what Content-Length announces: the
// buffer starts small and doubles as it fills, each size taken from bodies
// first. When bodies has no room, the body is refused with CodeUnavailable;
// otherwise the caller releases the lease of its memory once done with it.
func readBody(r *http.Request, maxBodyBytes int64, bodies *budget.Bytes) (body []byte, lease budget.Lease, err error) {
	if err := checkContentEncoding(r); err != nil {
		return nil, lease, err
	}
	if r.ContentLength > maxBodyBytes {
		return nil, lease, bodyTooLarge(maxBodyBytes)
	}
	size := int64(firstBodyBuffer)
	if r.ContentLength >= 0 {
		size = min(size, r.ContentLength+1) // +1: to see the end without growing
	}
	lease, ok := bodies.Take(size)
	if !ok {
		return nil, lease, bodiesBusy()
	}
	defer func() {
		if err != nil {
			lease.Release()
		}
	}()
	body = make([]byte, 0, size)
	for {
		if len(body) == cap(body) {
			if int64(len(body)) > maxBodyBytes {
				return nil, lease, bodyTooLarge(maxBodyBytes)
			}
			grown := min(2*int64(cap(body)), maxBodyBytes+1)
			if r.ContentLength >= 0 {
				grown = min(grown, r.ContentLength+1)
			}
			if !lease.Grow(grown - int64(cap(body))) {
				return nil, lease, bodiesBusy()
			}
			body = append(make([]byte, 0, grown), body...)
		}
		n, err := r.Body.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if err == io.EOF && r.ContentLength >= 0 && int64(len(body)) != r.ContentLength {
			err = io.ErrUnexpectedEOF // net/http says so itself; a bare reader may not
		}
		if err == io.EOF {
			if int64(len(body)) > maxBodyBytes {
				return nil, lease, bodyTooLarge(maxBodyBytes)
			}
			return body, lease, nil
		}
		if err != nil {
			return nil, lease, membership.Errorf(membership.CodeInvalidBody, "reading the body: %v", err)
		}
	}
}

// checkContentEncoding returns a codeUnsupportedMediaType error unless the
// body is sent as it is (no Content-Encoding, or identity): a gzipped body
// read as plain text would be refused for what it seems to lack, or worse.
func checkContentEncoding(r *http.Request) error {
	for _, field := range r.Header["Content-Encoding"] {
		for coding := range strings.SplitSeq(field, ",") {
			if coding = strings.TrimSpace(coding); coding != "" && !strings.EqualFold(coding, "identity") {
				return membership.Errorf(codeUnsupportedMediaType,
					"Content-Encoding %.40q is not supported: send the body uncompressed, without Content-Encoding", coding)
			}
		}
	}
	return nil
}

// within reports whether s lies in the memory of b.
func within(b []byte, s string) bool {
	if len(s) == 0 || len(b) == 0 {
		return true
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	return start <= p && p+uintptr(len(s)) <= start+uintptr(len(b))
}

func bodiesBusy() error {
	return membership.Errorf(membership.CodeUnavailable,
		"too many request bodies are being received at once; nothing was changed: try again later")
}

// parseChangeForm returns the list parameter ("users" or "groups") and the
// uid parameter of a form-encoded body. It checks the whole body as
// url.ParseQuery does, but keeps only the two values it needs instead of
// building a map of all of them.
func parseChangeForm(body, list string) (value, uid string, err error) {
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

// parseChangeJSON returns the list ("users" or "groups") and uid of a
// JSON body, {"users": [...], "uid": ...}, where uid, optional, is a number
// or a decimal string. The list comes back as JSON text, for parseUsers or
// parseSubgroups. Unknown fields, and anything after the object, are
// errors.
func parseChangeJSON(body, list string) (value, uid string, err error) {
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
	uid, err = uidText(req.UID)
	return value, uid, err
}

// uidText returns the text of the JSON value raw as a uid field's, for
// ParseUID: a string's contents, a number's digits, "" when absent or null.
func uidText(raw json.RawMessage) (string, error) {
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

func bodyTooLarge(max int64) error {
	return membership.Errorf(membership.CodeBodyTooLarge, "the body is larger than %d bytes", max)
}

// refuseBody returns a CodeInvalidBody error, saying why, when r has a
// body. A body of unknown length is read for one byte, no more.
func refuseBody(r *http.Request, why string) error {
	if r.ContentLength == 0 {
		return nil
	}
	if r.ContentLength < 0 {
		var b [1]byte
		if n, _ := io.ReadFull(r.Body, b[:]); n == 0 {
			return nil
		}
	}
	return membership.Errorf(membership.CodeInvalidBody, "%s", why)
}
