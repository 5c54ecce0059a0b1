package scim

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"example.com/groupmembership/httpapi/decode"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"

	"example.com/groupmembership/httpapi/scim/wire"
)

// groupChange is what a PATCH or a PUT of a group asks, folded from its
// operations in order: its attributes as they end, and its members as a
// whole new set (replace) or as users to add and remove.
type groupChange struct {
	attrs        account.GroupAttributes
	attrsTouched bool
	// replace, when not nil, is the whole new set of members; adds and
	// removes apply to it.
	replace map[membership.UID]bool
	// delta says of each uid an operation named whether it ends added
	// (true) or removed (false).
	delta map[membership.UID]bool
	// maxUsers bounds the members one change names (-max-users): a
	// members value is read no further than its first member past it.
	maxUsers int
}

// newGroupChange returns the change of nothing to a group of attributes
// attrs, naming at most maxUsers members.
func newGroupChange(attrs account.GroupAttributes, maxUsers int) *groupChange {
	return &groupChange{attrs: attrs, delta: map[membership.UID]bool{}, maxUsers: maxUsers}
}

// applyOps folds ops, a PATCH's, into c, in order: add and replace of
// displayName and externalId (with or without a path), of members (an add
// adds the users of its value; a replace makes them the whole set), and
// removes: of members with a value (those users only), of members with no
// value (every member), of members[value eq "uid"] (that user), of
// externalId. id, schemas and meta are read-only; attributes the service
// does not keep are ignored.
func (c *groupChange) applyOps(groupID string, ops []patchOp) error {
	for i, op := range ops {
		path := wire.AttributePath(op.path, wire.GroupResource)
		var err error
		switch {
		case op.op == "remove":
			err = c.remove(path, op.value)
		case path == "":
			err = c.setAll(groupID, op.op, op.value)
		default:
			err = c.set(groupID, op.op, path, op.value)
		}
		if err == nil && len(c.delta) > c.maxUsers {
			err = tooManyMembers(c.maxUsers)
		}
		if err != nil {
			e := wire.ErrorOf(err)
			return wire.Errorf(e.Status, e.ScimType, "operation %d: %s", i, e.Detail)
		}
	}
	return nil
}

// setAll applies an add or a replace without a path: each attribute of
// its value, an object.
func (c *groupChange) setAll(groupID, op string, value json.RawMessage) error {
	o, err := wire.ObjectValue(value, "the value of an operation without a path")
	if err != nil {
		return err
	}
	for name, raw := range o {
		if err := c.set(groupID, op, wire.AttributePath(name, wire.GroupResource), raw); err != nil {
			return err
		}
	}
	return nil
}

// set applies an add or a replace of the attribute path.
func (c *groupChange) set(groupID, op, path string, raw json.RawMessage) error {
	var err error
	switch {
	case path == "displayname":
		c.attrsTouched = true
		c.attrs.DisplayName, err = wire.StringOf(raw, "displayName")
	case path == "externalid":
		c.attrsTouched = true
		c.attrs.ExternalID, err = wire.StringOf(raw, "externalId")
	case path == "id":
		var id string
		if id, err = wire.StringOf(raw, "id"); err == nil && id != groupID {
			err = wire.BadRequest(wire.Mutability, "id is read-only: the group's is %q", groupID)
		}
	case path == "members":
		var uids []membership.UID
		if uids, err = memberUIDs(raw, c.maxUsers); err == nil {
			c.setMembers(op == "replace", uids)
		}
	case strings.HasPrefix(path, "members["):
		err = wire.BadRequest(wire.InvalidPath, "a filtered path of members is taken by remove only")
	}
	return err
}

// setMembers adds uids or, with replace, makes them the whole set.
func (c *groupChange) setMembers(replace bool, uids []membership.UID) {
	if replace {
		c.replace, c.delta = map[membership.UID]bool{}, map[membership.UID]bool{}
	}
	for _, uid := range uids {
		c.delta[uid] = true
	}
}

// remove applies a remove of the attribute path.
func (c *groupChange) remove(path string, value json.RawMessage) error {
	switch {
	case path == "displayname":
		return wire.BadRequest(wire.Mutability, "displayName is required: it cannot be removed")
	case path == "externalid":
		c.attrsTouched = true
		c.attrs.ExternalID = ""
	case path == "members" && value == nil:
		c.setMembers(true, nil) // every member: the RFC's remove of a whole attribute
	case path == "members":
		uids, err := memberUIDs(value, c.maxUsers)
		if err != nil {
			return err
		}
		for _, uid := range uids {
			c.delta[uid] = false
		}
	case strings.HasPrefix(path, "members["):
		uid, err := memberFilter(path)
		if err != nil {
			return err
		}
		c.delta[uid] = false
	}
	return nil
}

// memberFilter returns the uid of a path members[value eq "uid"] (folded:
// the value is a uid, digits).
func memberFilter(path string) (membership.UID, error) {
	inner, ok := strings.CutPrefix(path, "members[")
	if inner, ok = strings.CutSuffix(inner, "]"); !ok {
		return 0, wire.BadRequest(wire.InvalidPath, "the path %.60q is not members[value eq \"uid\"]", path)
	}
	f, err := wire.ParseFilter(inner, "member")
	if err != nil || len(f) != 1 || f[0].Attr != "value" {
		return 0, wire.BadRequest(wire.InvalidPath, "the path %.60q is not members[value eq \"uid\"]", path)
	}
	uid, ok := decode.ParseUID(f[0].Value)
	if !ok {
		return 0, wire.BadRequest(wire.InvalidValue, "members[value eq %q]: a member's value is a uid, %s", f[0].Value, membership.UIDRange)
	}
	return uid, nil
}

// memberUIDs reads the uids of a members value: an array of objects
// whose value is a uid in decimal (a single object is taken as one), of
// at most limit elements: it stops at the first past it.
func memberUIDs(raw json.RawMessage, limit int) ([]membership.UID, error) {
	var uids []membership.UID
	read := func(m json.RawMessage) error {
		if len(uids) == limit {
			return tooManyMembers(limit)
		}
		uid, err := memberUID(len(uids), m)
		uids = append(uids, uid)
		return err
	}
	if wire.IsObject(raw) {
		return uids, read(raw)
	}
	return uids, wire.EachOf(raw, "members", read)
}

// memberUID reads the uid of m, the element i of a members value.
func memberUID(i int, m json.RawMessage) (membership.UID, error) {
	o, err := wire.ObjectValue(m, "members element "+strconv.Itoa(i))
	if err != nil {
		return 0, err
	}
	v, err := wire.StringOf(o["value"], "value")
	if err != nil {
		return 0, wire.BadRequest(wire.InvalidValue, "members element %d: its value is not a string", i)
	}
	uid, ok := decode.ParseUID(v)
	if !ok {
		return 0, wire.BadRequest(wire.InvalidValue, "members element %d: the value %.40q is not a uid, %s", i, v, membership.UIDRange)
	}
	return uid, nil
}

// tooManyMembers is the error of a change that names more than limit
// members: 413, as a request of more users than -max-users on the
// service's other routes.
func tooManyMembers(limit int) error {
	return membership.Errorf(membership.CodeTooManyUsers, "members has more than %d elements", limit)
}

// writes returns the writes of c to groupID: set_group when its
// attributes were named, then a replace of its members, or an add and a
// remove; cond goes with the first. They make one batch.
func (c *groupChange) writes(groupID string, cond membership.Precondition) []membership.Write {
	var ws []membership.Write
	if c.attrsTouched {
		attrs := c.attrs
		ws = append(ws, membership.Write{Op: membership.OpSetGroup, GroupID: groupID, Group: &attrs})
	}
	var adds, removes []membership.UID
	for uid, in := range c.delta {
		if in {
			adds = append(adds, uid)
		} else {
			removes = append(removes, uid)
		}
	}
	slices.Sort(adds) // in one order, so that a retry's writes are its first's
	slices.Sort(removes)
	switch {
	case c.replace != nil:
		ws = append(ws, membership.Write{Op: membership.OpReplace, GroupID: groupID, Users: usersOf(adds)})
	default:
		if len(adds) > 0 {
			ws = append(ws, membership.Write{Op: membership.OpAdd, GroupID: groupID, Users: usersOf(adds)})
		}
		if len(removes) > 0 {
			ws = append(ws, membership.Write{Op: membership.OpRemove, GroupID: groupID, UIDs: removes})
		}
	}
	if len(ws) > 0 {
		ws[0].If = cond
	}
	return ws
}

// usersOf returns uids as the users of an add, without nicknames.
func usersOf(uids []membership.UID) []membership.User {
	users := make([]membership.User, len(uids))
	for i, uid := range uids {
		users[i] = membership.User{UID: uid}
	}
	return users
}
