package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"example.com/groupmembership/membership"
)

// The Content-Types a change request may declare. Without one, the body is
// read as a form.
const (
	formMediaType = "application/x-www-form-urlencoded"
	jsonMediaType = "application/json"
)

// changeRequest is the decoded body of an add or remove request.
type changeRequest struct {
	users     string         // the users parameter, still JSON text
	actingUID membership.UID // 0 when the request named none
}

// readChangeRequest reads the body of a POST or DELETE: a form, or a JSON
// object. It reads the body itself because Request.ParseForm ignores the body
// of a DELETE.
//
// Errors: CodeUnsupportedMediaType, CodeBodyTooLarge, CodeInvalidBody,
// CodeInvalidUID.
func readChangeRequest(w http.ResponseWriter, r *http.Request, maxBodyBytes int64) (changeRequest, error) {
	parse := parseChangeForm
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != formMediaType {
		mediaType, _, err := mime.ParseMediaType(ct)
		switch {
		case err == nil && mediaType == formMediaType:
		case err == nil && mediaType == jsonMediaType:
			parse = parseChangeJSON
		default:
			return changeRequest{}, membership.Errorf(membership.CodeUnsupportedMediaType,
				"Content-Type %q is not supported: send %s or %s", ct, formMediaType, jsonMediaType)
		}
	}
	body, err := readBody(w, r, maxBodyBytes)
	if err != nil {
		return changeRequest{}, err
	}
	users, uid, err := parse(body)
	if err != nil {
		return changeRequest{}, err
	}
	req := changeRequest{users: users}
	if uid != "" {
		var ok bool
		if req.actingUID, ok = membership.ParseUID(uid); !ok {
			return changeRequest{}, membership.Errorf(membership.CodeInvalidUID,
				"the uid parameter %.40q is not an integer from 1 to 9223372036854775807", uid)
		}
		setActingUID(w, req.actingUID)
	}
	return req, nil
}

// readBody reads the whole body, at most maxBodyBytes of it.
func readBody(w http.ResponseWriter, r *http.Request, maxBodyBytes int64) (string, error) {
	if r.ContentLength > maxBodyBytes {
		return "", bodyTooLarge(maxBodyBytes)
	}
	limited := http.MaxBytesReader(w, r.Body, maxBodyBytes)
	var body []byte
	var err error
	if r.ContentLength > 0 {
		// The length is known (and net/http ends the body there): read it
		// into one buffer of that size.
		body = make([]byte, r.ContentLength)
		_, err = io.ReadFull(limited, body)
	} else {
		body, err = io.ReadAll(limited)
	}
	if err != nil {
		if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
			return "", bodyTooLarge(maxBodyBytes)
		}
		return "", membership.Errorf(membership.CodeInvalidBody, "reading the body: %v", err)
	}
	return string(body), nil
}

// parseChangeForm returns the users and uid parameters of a form-encoded
// body. It checks the whole body as url.ParseQuery does, but keeps only the
// two values it needs instead of building a map of all of them.
func parseChangeForm(body string) (users, uid string, err error) {
	var seenUsers, seenUID int
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
		value, err2 := unescapeForm(rawValue)
		if err := errors.Join(err1, err2); err != nil {
			return "", "", membership.Errorf(membership.CodeInvalidBody, "the body is not form-encoded: %v", err)
		}
		switch key {
		case "users":
			users = value
			seenUsers++
		case "uid":
			uid = value
			seenUID++
		}
	}
	for _, p := range []struct {
		name string
		seen int
	}{{"users", seenUsers}, {"uid", seenUID}} {
		if p.seen > 1 {
			return "", "", membership.Errorf(membership.CodeInvalidBody, "the parameter %s is given %d times: give it once", p.name, p.seen)
		}
	}
	return users, uid, nil
}

// parseChangeJSON returns the users and uid of a JSON body,
// {"users": [...], "uid": ...}, where uid, optional, is a number or a decimal
// string. users comes back as JSON text, for membership.ParseUsers. Unknown
// fields, and anything after the object, are errors.
func parseChangeJSON(body string) (users, uid string, err error) {
	var req struct {
		Users json.RawMessage `json:"users"`
		UID   json.RawMessage `json:"uid"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return "", "", membership.Errorf(membership.CodeInvalidBody, "the body is not a JSON object with users and uid: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", "", membership.Errorf(membership.CodeInvalidBody, "the body has more than one JSON value")
	}
	if string(req.Users) != "null" {
		users = string(req.Users)
	}
	switch u := string(req.UID); {
	case u == "" || u == "null":
	case strings.HasPrefix(u, `"`):
		if err := json.Unmarshal(req.UID, &uid); err != nil {
			return "", "", membership.Errorf(membership.CodeInvalidBody, "the uid is not a valid JSON string")
		}
		if uid == "" {
			uid = `""` // an empty string is given, not absent: ParseUID rejects it
		}
	default:
		uid = u
	}
	return users, uid, nil
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
