package httpapi

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"

	"example.com/groupmembership/membership"
)

// changeRequest is the decoded body of an add or remove request.
type changeRequest struct {
	users     string         // the users parameter, still JSON text
	actingUID membership.UID // 0 when the request named none
}

// readChangeRequest reads the form-encoded body of a POST or DELETE. It reads
// the body itself because Request.ParseForm ignores the body of a DELETE.
//
// Errors: CodeUnsupportedMediaType, CodeBodyTooLarge, CodeInvalidBody,
// CodeInvalidUID.
func readChangeRequest(w http.ResponseWriter, r *http.Request, maxBodyBytes int64) (changeRequest, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mediaType, _, err := mime.ParseMediaType(ct)
		if err != nil || mediaType != "application/x-www-form-urlencoded" {
			return changeRequest{}, membership.Errorf(membership.CodeUnsupportedMediaType,
				"Content-Type %q is not supported: send application/x-www-form-urlencoded", ct)
		}
	}
	if r.ContentLength > maxBodyBytes {
		return changeRequest{}, bodyTooLarge(maxBodyBytes)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
			return changeRequest{}, bodyTooLarge(maxBodyBytes)
		}
		return changeRequest{}, membership.Errorf(membership.CodeInvalidBody, "reading the body: %v", err)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return changeRequest{}, membership.Errorf(membership.CodeInvalidBody, "the body is not form-encoded: %v", err)
	}
	for name, values := range form {
		if len(values) > 1 && (name == "users" || name == "uid") {
			return changeRequest{}, membership.Errorf(membership.CodeInvalidBody, "the parameter %s is given %d times: give it once", name, len(values))
		}
	}
	req := changeRequest{users: form.Get("users")}
	if uid := form.Get("uid"); uid != "" {
		var ok bool
		if req.actingUID, ok = membership.ParseUID(uid); !ok {
			return changeRequest{}, membership.Errorf(membership.CodeInvalidUID,
				"the uid parameter %.40q is not an integer from 1 to 9223372036854775807", uid)
		}
		setActingUID(r.Context(), req.actingUID)
	}
	return req, nil
}

func bodyTooLarge(max int64) error {
	return membership.Errorf(membership.CodeBodyTooLarge, "the body is larger than %d bytes", max)
}
