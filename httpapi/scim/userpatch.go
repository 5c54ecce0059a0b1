package scim

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"example.com/groupmembership/membership/account"

	"example.com/groupmembership/httpapi/scim/wire"
)

// MaxPatchOperations bounds the operations of one PATCH.
const MaxPatchOperations = 1000

// patchOp is one operation of a PATCH (RFC 7644 3.5.2): its op folded to
// lower case (Entra ID sends "Add", "Replace", "Remove"), its path as
// given ("" for none) and its value (nil for none).
type patchOp struct {
	op    string
	path  string
	value json.RawMessage
}

// readPatch reads the operations of a PATCH's body: a PatchOp message
// whose schemas, when given, name PatchOp's, and whose Operations each
// have an op of add, replace or remove.
func readPatch(r *http.Request, d Deps) ([]patchOp, error) {
	doc, err := readDocument(r, d)
	if err != nil {
		return nil, err
	}
	if raw, ok := doc["schemas"]; ok {
		var schemas []string
		if err := json.Unmarshal(raw, &schemas); err != nil || !slices.Contains(schemas, wire.PatchSchema) {
			return nil, wire.BadRequest(wire.InvalidValue, "schemas does not name %s", wire.PatchSchema)
		}
	}
	var ops []patchOp
	err = wire.EachOf(doc["operations"], "Operations", func(raw json.RawMessage) error {
		if len(ops) == MaxPatchOperations { // read no further
			return wire.BadRequest(wire.InvalidValue, "the PATCH has more than %d operations", MaxPatchOperations)
		}
		op, err := readPatchOp(raw)
		if err != nil {
			e := wire.ErrorOf(err)
			return wire.BadRequest(e.ScimType, "operation %d: %s", len(ops), e.Detail)
		}
		ops = append(ops, op)
		return nil
	})
	if err == nil && len(ops) == 0 {
		err = wire.BadRequest(wire.InvalidValue, "the PATCH has no Operations")
	}
	return ops, err
}

// readPatchOp reads one operation.
func readPatchOp(raw json.RawMessage) (patchOp, error) {
	o, err := wire.ObjectOf(raw, "the operation")
	if err != nil {
		return patchOp{}, err
	}
	var p patchOp
	if p.op, err = wire.StringOf(o["op"], "op"); err != nil {
		return patchOp{}, err
	}
	p.op = strings.ToLower(p.op)
	if p.op != "add" && p.op != "replace" && p.op != "remove" {
		return patchOp{}, wire.BadRequest(wire.InvalidValue, "op %.20q is not add, replace or remove", p.op)
	}
	if p.path, err = wire.StringOf(o["path"], "path"); err != nil {
		return patchOp{}, wire.BadRequest(wire.InvalidPath, "path is not a string")
	}
	if v, ok := o["value"]; ok && !wire.IsNull(v) {
		p.value = v
	}
	switch {
	case p.op == "remove" && p.path == "":
		return patchOp{}, wire.BadRequest(wire.NoTarget, "a remove needs a path")
	case p.op != "remove" && p.value == nil:
		return patchOp{}, wire.BadRequest(wire.InvalidValue, "an %s needs a value", p.op)
	}
	return p, nil
}

// patchAccount returns a, the account of the user id, with ops applied
// in order. An add or a replace without a path sets each attribute of
// its value ("name.givenName" as "name": {"givenName": …}); one with a
// path, that attribute. A remove unassigns its attribute. id is
// read-only: an operation may name it only with its value. Attributes
// the service does not keep are ignored, as in a POST.
func patchAccount(a account.Account, id string, ops []patchOp) (account.Account, error) {
	for i, op := range ops {
		var err error
		path := wire.AttributePath(op.path, wire.UserResource)
		switch {
		case path == "id" && op.op == "remove":
			err = wire.BadRequest(wire.Mutability, "id is read-only: it cannot be removed")
		case path == "id":
			err = sameID(id, op.value)
		case op.op == "remove":
			err = removeUserAttribute(&a, path)
		case path == "":
			err = setUserAttributes(&a, id, op.value)
		default:
			err = setUserAttribute(&a, emailPath(path), op.value)
		}
		if err != nil {
			e := wire.ErrorOf(err)
			return a, wire.BadRequest(e.ScimType, "operation %d: %s", i, e.Detail)
		}
	}
	return a, nil
}

// setUserAttributes sets each attribute of value, an object, of the
// account of the user id.
func setUserAttributes(a *account.Account, id string, value json.RawMessage) error {
	o, err := wire.ObjectValue(value, "the value of an operation without a path")
	if err != nil {
		return err
	}
	for name, raw := range o {
		path := emailPath(wire.AttributePath(name, wire.UserResource))
		if path == "id" {
			err = sameID(id, raw)
		} else {
			err = setUserAttribute(a, path, raw)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// sameID refuses raw, an id an operation sets, unless it is id, the
// user's: id is read-only (mutability, RFC 7644 3.5.2).
func sameID(id string, raw json.RawMessage) error {
	if got, err := wire.StringOf(raw, "id"); err != nil || got != id {
		return wire.BadRequest(wire.Mutability, "id is read-only: the user's is %q", id)
	}
	return nil
}

// emailPath returns the path of the one email the service keeps for a
// path that filters emails (emails[type eq "work"].value, as Entra ID
// sends it, or any filter of them), and path otherwise.
func emailPath(path string) string {
	if strings.HasPrefix(path, "emails[") && strings.HasSuffix(path, "].value") {
		return "emails.value"
	}
	return path
}

// removeUserAttribute unassigns the attribute path of a. userName is
// required, and active is a boolean to replace: neither is removed.
func removeUserAttribute(a *account.Account, path string) error {
	switch path = emailPath(path); {
	case path == "username":
		return wire.BadRequest(wire.Mutability, "userName is required: it cannot be removed")
	case path == "active":
		return wire.BadRequest(wire.InvalidValue, "active cannot be removed: replace it with false")
	case path == "externalid":
		a.ExternalID = ""
	case path == "displayname":
		a.DisplayName = ""
	case path == "name":
		a.GivenName, a.FamilyName = "", ""
	case path == "name.givenname":
		a.GivenName = ""
	case path == "name.familyname":
		a.FamilyName = ""
	case path == "emails", path == "emails.value", strings.HasPrefix(path, "emails["):
		a.Email = ""
	}
	return nil
}
