package decode

import (
	"io"
	"mime"
	"net/http"
	"strings"
	"unsafe"

	"example.com/groupmembership/httpapi/middleware"
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
	List      string         // the users or groups parameter, still JSON text
	ActingUID membership.UID // 0 when the request named none
	// lease holds the body's memory, taken from the bodies budget: users
	// may point into it. The caller releases it when done.
	Lease budget.Lease
}

// ReadChangeRequest reads the body of a POST, PUT or DELETE: a form, or a JSON
// object, with list ("users" or "groups") and uid. It reads the body itself
// because Request.ParseForm ignores the body of a DELETE.
//
// Errors: middleware.CodeUnsupportedMediaType, CodeBodyTooLarge, CodeInvalidBody,
// CodeInvalidUID.
// The body's memory is taken from bodies: on success the caller releases
// req.Lease once done with req.
func ReadChangeRequest(w http.ResponseWriter, r *http.Request, list string, maxBodyBytes int64, bodies *budget.Bytes) (req changeRequest, err error) {
	parse := ParseChangeForm
	if ct := middleware.HeaderValue(r, "Content-Type"); ct != "" && ct != formMediaType {
		mediaType, _, err := mime.ParseMediaType(ct)
		switch {
		case err == nil && mediaType == formMediaType:
		case err == nil && mediaType == jsonMediaType:
			parse = ParseChangeJSON
		default:
			return changeRequest{}, membership.Errorf(middleware.CodeUnsupportedMediaType,
				"Content-Type %q is not supported: send %s or %s", ct, formMediaType, jsonMediaType)
		}
	}
	body, lease, err := ReadBody(r, maxBodyBytes, bodies)
	if err != nil {
		return changeRequest{}, err
	}
	req.Lease = lease
	defer func() {
		if err != nil {
			req.Lease.Release()
		}
	}()
	// The body is never written again: read it as a string without a copy
	// that the budget would not count.
	value, uid, err := parse(unsafe.String(unsafe.SliceData(body), len(body)), list)
	if err != nil {
		return req, err
	}
	req.List = value
	// Decoded into a copy (an escaped form value, a JSON body), it takes
	// memory of its own, taken with the body's at once, so that a request
	// alone is served whatever its size.
	if !within(body, value) && !req.Lease.Resize(req.Lease.Held()+int64(len(value))) {
		return req, BodiesBusy()
	}
	if uid != "" {
		var ok bool
		if req.ActingUID, ok = ParseUID(uid); !ok {
			return req, membership.Errorf(membership.CodeInvalidUID,
				"the uid parameter %.40q is not %s", uid, membership.UIDRange)
		}
		middleware.SetActingUID(w, req.ActingUID)
	}
	return req, nil
}

// firstBodyBuffer is the room a body gets before its bytes arrive.
const firstBodyBuffer = 512

// requireJSON refuses a Content-Type other than JSON on route, which takes
// only JSON.
//
// Errors: middleware.CodeUnsupportedMediaType.
func requireJSON(r *http.Request, route string) error {
	if ct := middleware.HeaderValue(r, "Content-Type"); ct != "" {
		if mediaType, _, err := mime.ParseMediaType(ct); err != nil || mediaType != jsonMediaType {
			return membership.Errorf(middleware.CodeUnsupportedMediaType,
				"Content-Type %q is not supported: %s takes %s", ct, route, jsonMediaType)
		}
	}
	return nil
}

// ReadBody reads the whole body of r, at most maxBodyBytes of it. Its
// memory follows the bytes that arrive, never what Content-Length
// announces: the buffer starts small and doubles as it fills, each size
// taken from bodies first. When bodies has no room, the body is refused
// with CodeUnavailable; otherwise the caller releases the lease of its
// memory once done with it.
//
// Errors: CodeBodyTooLarge, CodeUnavailable, CodeInvalidBody, and
// middleware.CodeUnsupportedMediaType (a Content-Encoding).
func ReadBody(r *http.Request, maxBodyBytes int64, bodies *budget.Bytes) (body []byte, lease budget.Lease, err error) {
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
		return nil, lease, BodiesBusy()
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
				return nil, lease, BodiesBusy()
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

// checkContentEncoding returns a middleware.CodeUnsupportedMediaType error unless the
// body is sent as it is (no Content-Encoding, or identity): a gzipped body
// read as plain text would be refused for what it seems to lack, or worse.
func checkContentEncoding(r *http.Request) error {
	for _, field := range r.Header["Content-Encoding"] {
		for coding := range strings.SplitSeq(field, ",") {
			if coding = strings.TrimSpace(coding); coding != "" && !strings.EqualFold(coding, "identity") {
				return membership.Errorf(middleware.CodeUnsupportedMediaType,
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

func BodiesBusy() error {
	return membership.Errorf(membership.CodeUnavailable,
		"too many request bodies are being received at once; nothing was changed: try again later")
}

func bodyTooLarge(max int64) error {
	return membership.Errorf(membership.CodeBodyTooLarge, "the body is larger than %d bytes", max)
}

// RefuseBody returns a CodeInvalidBody error, saying why, when r has a
// body. A body of unknown length is read for one byte, no more.
func RefuseBody(r *http.Request, why string) error {
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
