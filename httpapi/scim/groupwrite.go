package scim

import (
	"encoding/json"
	"net/http"
	"strconv"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
	"example.com/groupmembership/membership/directory"

	"example.com/groupmembership/httpapi/scim/wire"
)

// groupOf reads a Group's attributes and members from doc, a POST's or a
// PUT's body, into the change of a group whose id is groupID ("" for a
// new one): displayName is required; members, when given, are the whole
// new set, and when left out the members stay as they are.
func groupOf(doc map[string]json.RawMessage, groupID string, maxUsers int) (*groupChange, error) {
	c := newGroupChange(account.GroupAttributes{}, maxUsers)
	c.attrsTouched = true
	for name, raw := range doc {
		path := wire.AttributePath(name, wire.GroupResource)
		if path == "id" && groupID == "" {
			continue // read-only: a POST's is ignored
		}
		if err := c.set(groupID, "replace", path, raw); err != nil {
			return nil, err
		}
	}
	if c.attrs.DisplayName == "" {
		return nil, wire.BadRequest(wire.InvalidValue, "displayName is required")
	}
	// Checked here, before a POST makes the group's id of its displayName.
	if err := account.CheckGroup(c.attrs); err != nil {
		return nil, wire.BadRequest(wire.InvalidValue, "%s", err)
	}
	return c, nil
}

// handleCreateGroup answers POST /Groups: a new group whose id is its
// displayName, or, when a group has that id already, its displayName
// and -2, -3, … up to -8, the first free; with its members.
func handleCreateGroup(d Deps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sel, err := wire.ParseResource(r, wire.GroupResource)
		if err == nil {
			err = refuseKey(r)
		}
		var doc map[string]json.RawMessage
		if err == nil {
			doc, err = readDocument(r, d)
		}
		var c *groupChange
		if err == nil {
			c, err = groupOf(doc, "", d.Service.MaxUsers())
		}
		var id string
		if err == nil {
			id, err = createGroup(r, d.services(), c)
		}
		if err != nil {
			wire.WriteError(w, r, err)
			return
		}
		writeGroup(w, r, d, http.StatusCreated, id, sel)
	})
}

// createGroup writes c as a new group, and returns its id.
func createGroup(r *http.Request, svc services, c *groupChange) (string, error) {
	for i := range updateTries {
		id := c.attrs.DisplayName
		if i > 0 {
			id += "-" + strconv.Itoa(i+1)
		}
		if membership.ValidateGroupID(id) != nil {
			break // too long for a suffix
		}
		_, err := svc.Batch(r.Context(), membership.Batch{Writes: c.writes(id, membership.Precondition{Empty: true}), Principal: principal(r)})
		if isPreconditionFailed(err) {
			continue // a group has the id: try the next
		}
		return id, err
	}
	return "", wire.Errorf(http.StatusConflict, wire.Uniqueness, "groups have the ids %q to %q that a group of this displayName takes", c.attrs.DisplayName, c.attrs.DisplayName+"-"+strconv.Itoa(updateTries))
}

// handleReplaceGroup answers PUT /Groups/{id}: the group's attributes as
// the body gives them, and its members too when it names them.
func handleReplaceGroup(d Deps) http.Handler {
	return updateGroup(d, func(r *http.Request, id string) (func(account.GroupAttributes) (*groupChange, error), error) {
		doc, err := readDocument(r, d)
		if err != nil {
			return nil, err
		}
		c, err := groupOf(doc, id, d.Service.MaxUsers())
		if err != nil {
			return nil, err
		}
		return func(account.GroupAttributes) (*groupChange, error) { return c, nil }, nil
	}, true)
}

// handlePatchGroup answers PATCH /Groups/{id}: its operations, all or
// none, in one change. It answers 204, or the group when the query asks
// for attributes.
func handlePatchGroup(d Deps) http.Handler {
	return updateGroup(d, func(r *http.Request, id string) (func(account.GroupAttributes) (*groupChange, error), error) {
		ops, err := readPatch(r, d)
		if err != nil {
			return nil, err
		}
		return func(cur account.GroupAttributes) (*groupChange, error) {
			c := newGroupChange(cur, d.Service.MaxUsers())
			return c, c.applyOps(id, ops)
		}, nil
	}, false)
}

// updateGroup answers a PUT or a PATCH of a group, as updateUser does a
// user's: its writes (groupChange.writes) in one batch, which requires
// the group as read when the change names its attributes (else that it
// exists), or r's If-Match when it has one.
func updateGroup(d Deps, read func(*http.Request, string) (func(account.GroupAttributes) (*groupChange, error), error), answer bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sel, err := wire.ParseResource(r, wire.GroupResource)
		var id string
		if err == nil {
			id, err = groupID(r)
		}
		var change func(account.GroupAttributes) (*groupChange, error)
		if err == nil {
			change, err = read(r, id)
		}
		var replayed bool
		if err == nil {
			replayed, err = writeGroupUpdate(r, d.services(), id, change)
		}
		if err != nil {
			wire.WriteError(w, r, err)
			return
		}
		markReplayed(w, replayed)
		if !answer && sel.IsZero() {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		writeGroup(w, r, d, http.StatusOK, id, sel)
	})
}

// writeGroupUpdate reads the group, makes its change and writes it, again
// from a new read when another change overtook it and r has no If-Match.
func writeGroupUpdate(r *http.Request, svc services, id string, change func(account.GroupAttributes) (*groupChange, error)) (bool, error) {
	ctx := r.Context()
	cond, given, err := conditions(r, svc)
	if err != nil {
		return false, err
	}
	key, err := keyed(r, membership.Write{})
	if err != nil {
		return false, err
	}
	for range updateTries {
		g, err := svc.dir.Group(ctx, id, nil)
		if err != nil {
			return false, err
		}
		c, err := change(g.Attributes)
		if err != nil {
			return false, err
		}
		cond := cond
		switch {
		case given:
			cond.Exists = cond.Exists || !cond.Empty
		case c.attrsTouched:
			cond = membership.Precondition{Revisions: []membership.Revision{g.Revision}}
		default:
			cond = membership.Precondition{Exists: true}
		}
		ws := c.writes(id, cond)
		if key.Idem.Key != "" {
			for i := range ws {
				ws[i].Conditions = key.Conditions
			}
		}
		res, err := svc.Batch(ctx, membership.Batch{Writes: ws, Idem: key.Idem, Principal: key.Principal})
		switch {
		case isPreconditionFailed(err) && !given:
			continue
		case isPreconditionFailed(err):
			return false, preconditionFailed(wire.GroupResource)
		}
		return res.Replayed, err
	}
	return false, membership.Errorf(membership.CodeUnavailable, "the group kept changing while it was written: try again")
}

// handleDeleteGroup answers DELETE /Groups/{id}: the group is deleted,
// with its members, its nestings and its attributes.
func handleDeleteGroup(d Deps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := groupID(r)
		if err != nil {
			wire.WriteError(w, r, err)
			return
		}
		serveDelete(d, w, r, membership.Write{Op: membership.OpDeleteGroup, GroupID: id}, directory.UnknownGroup(id), wire.GroupResource)
	})
}
