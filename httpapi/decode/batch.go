package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"unsafe"

	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/membership"
)

// BatchRequest is a decoded POST /batch.
type BatchRequest struct {
	Batch     membership.Batch
	ActingUID membership.UID
}

// ReadBatch reads and decodes the body of POST /batch. Its memory, and that
// of what it decodes to, are taken from bodies: the caller releases the
// lease, error or not.
//
// Errors: middleware.CodeUnsupportedMediaType, CodeBodyTooLarge, CodeInvalidBody,
// CodeInvalidChanges, CodeInvalidUsers, CodeTooManyUsers, CodeInvalidUID,
// middleware.CodeInvalidHeader (an if_match that is not * or entity tags),
// CodeUnavailable (bodies is spent).
func ReadBatch(r *http.Request, svc *membership.Service, maxBodyBytes int64, bodies *budget.Bytes) (BatchRequest, budget.Lease, error) {
	if err := requireJSON(r, "POST /batch"); err != nil {
		return BatchRequest{}, budget.Lease{}, err
	}
	body, lease, err := ReadBody(r, maxBodyBytes, bodies)
	if err != nil {
		return BatchRequest{}, lease, err
	}
	// What the body decodes to is about as large as the body, twice over
	// at most (raw values, then users): taken at once, so that a request
	// alone is served whatever its size.
	if !lease.Resize(3 * lease.Held()) {
		return BatchRequest{}, lease, BodiesBusy()
	}
	req, err := parseBatch(unsafe.String(unsafe.SliceData(body), len(body)), svc.MaxBatchWrites(), svc.MaxUsers(), svc.Epoch())
	if err != nil {
		return req, lease, err
	}
	// The decoded writes and their users take memory of their own too.
	decoded := int64(cap(req.Batch.Writes)) * int64(unsafe.Sizeof(membership.Write{}))
	for _, w := range req.Batch.Writes {
		decoded += int64(cap(w.Users))*int64(unsafe.Sizeof(membership.User{})) + int64(cap(w.UIDs))*int64(unsafe.Sizeof(membership.UID(0))) +
			SubgroupsBytes(w.Subgroups)
	}
	if !lease.Resize(lease.Held() + decoded) {
		return req, lease, BodiesBusy()
	}
	return req, lease, nil
}

// parseBatch parses a POST /batch body: one JSON object with "changes" (an
// array of objects with "op", "group", "users" or "groups", and "if_match",
// the last optional, "users" only for add, remove and replace, "groups"
// only for add_groups, remove_groups and replace_groups) and an optional
// "uid". Keys are matched byte for byte and each at most once; strings are
// read as ParseUsers reads them, so a group id that is not valid UTF-8, or
// holds a lone surrogate escape, is an error, never altered.
func parseBatch(body string, maxWrites, maxUsers int, epoch uint64) (BatchRequest, error) {
	var req BatchRequest
	fields, err := JSONObject(body, "the body", "changes", "uid")
	if err != nil {
		return req, err
	}
	if fields["changes"] == nil {
		return req, membership.Errorf(membership.CodeInvalidBody, `the body has no "changes": send {"changes":[{"op":"add","group":"g","users":[1]},...]}`)
	}
	uid, err := UIDText(fields["uid"])
	if err != nil {
		return req, err
	}
	if uid != "" {
		var ok bool
		if req.ActingUID, ok = ParseUID(uid); !ok {
			return req, membership.Errorf(membership.CodeInvalidUID, "the uid %.40q is not %s", uid, membership.UIDRange)
		}
		req.Batch.Actor = req.ActingUID
	}
	// The changes are read one at a time, and refused as soon as there are
	// more than maxWrites of them, or more than maxUsers users in all: what
	// is decoded never outgrows what a valid batch holds.
	dec := json.NewDecoder(bytes.NewReader(fields["changes"]))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return req, membership.Errorf(membership.CodeInvalidChanges, "changes is not a JSON array of objects")
	}
	users := 0
	for i := 0; dec.More(); i++ {
		if i == maxWrites {
			return req, membership.Errorf(membership.CodeTooManyChanges, "the batch has more than %d changes", maxWrites)
		}
		var c json.RawMessage
		if err := dec.Decode(&c); err != nil {
			return req, membership.Errorf(membership.CodeInvalidChanges, "changes is not a JSON array of objects: %v", err)
		}
		w, err := parseBatchChange(string(c), maxUsers-users, epoch)
		if err != nil {
			var e *membership.Error
			if errors.As(err, &e) {
				if e.Code == membership.CodeTooManyUsers || e.Code == membership.CodeTooManyGroups {
					return req, membership.Errorf(membership.CodeTooManyUsers, "the batch names more than %d users and groups in all", maxUsers)
				}
				return req, membership.Errorf(e.Code, "changes element %d: %s", i, e.Message)
			}
			return req, err
		}
		users += len(w.Users) + len(w.UIDs) + len(w.Subgroups)
		req.Batch.Writes = append(req.Batch.Writes, w)
	}
	if req.Batch.Writes == nil {
		req.Batch.Writes = []membership.Write{}
	}
	return req, nil
}

// parseBatchChange parses one element of changes.
func parseBatchChange(text string, maxUsers int, epoch uint64) (w membership.Write, err error) {
	fields, err := JSONObject(text, "a change", "op", "group", "users", "groups", "if_match")
	if err != nil {
		var e *membership.Error
		if errors.As(err, &e) && e.Code == membership.CodeInvalidBody {
			e.Code = membership.CodeInvalidChanges
		}
		return w, err
	}
	op, err := JSONString(fields["op"], "op")
	if err != nil {
		return w, err
	}
	if w.GroupID, err = JSONString(fields["group"], "group"); err != nil {
		return w, err
	}
	w.Op = membership.Op(op)
	userOps := []membership.Op{membership.OpAdd, membership.OpRemove, membership.OpReplace, membership.OpDeleteGroup}
	if fields["groups"] != nil && slices.Contains(userOps, w.Op) {
		return w, membership.Errorf(membership.CodeInvalidChanges, "%.40s takes no groups: groups go with add_groups, remove_groups and replace_groups", op)
	}
	switch w.Op {
	case membership.OpAddGroups, membership.OpRemoveGroups, membership.OpReplaceGroups:
		if fields["users"] != nil {
			return w, membership.Errorf(membership.CodeInvalidChanges, "%s takes no users: send \"groups\":[\"group id\", ...]", op)
		}
		if fields["groups"] == nil {
			return w, membership.Errorf(membership.CodeMissingGroups, "%s takes groups: send \"groups\":[\"group id\", ...]", op)
		}
		if w.Subgroups, err = ParseSubgroups(string(fields["groups"]), maxUsers); err != nil {
			return w, err
		}
	case membership.OpAdd, membership.OpRemove, membership.OpReplace:
		if fields["users"] == nil {
			return w, membership.Errorf(membership.CodeMissingUsers, "%s takes users: send \"users\":[uid, ...]", op)
		}
		users, err := ParseUsers(string(fields["users"]), maxUsers)
		if err != nil {
			return w, err
		}
		w = UsersWrite(w.Op, w.GroupID, users)
	case membership.OpDeleteGroup:
		if fields["users"] != nil {
			return w, membership.Errorf(membership.CodeInvalidChanges, "delete_group takes no users: it removes every member")
		}
	default:
		return w, membership.Errorf(membership.CodeInvalidChanges,
			"op %.40q is not add, remove, replace, delete_group, add_groups, remove_groups or replace_groups", op)
	}
	if fields["if_match"] != nil {
		tag, err := JSONString(fields["if_match"], "if_match")
		if err != nil {
			return w, err
		}
		r := &http.Request{Header: http.Header{"If-Match": {tag}}}
		if w.If, err = WriteCondition(r, epoch); err != nil {
			return w, err
		}
		w.Conditions = ConditionsText(r)
	}
	return w, nil
}

// UsersWrite returns the write of op with users to the group. A remove
// takes the users' uids: nicknames in a remove are validated (by
// ParseUsers) and otherwise ignored.
func UsersWrite(op membership.Op, groupID string, users []membership.User) membership.Write {
	w := membership.Write{Op: op, GroupID: groupID}
	if op != membership.OpRemove {
		w.Users = users
		return w
	}
	w.UIDs = make([]membership.UID, len(users))
	for i, u := range users {
		w.UIDs[i] = u.UID
	}
	return w
}
