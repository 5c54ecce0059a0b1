package decode

import "example.com/groupmembership/membership"

// wantGroupElement is what an element of groups must be, for messages.
const wantGroupElement = `a group id (a string) or {"group": "group id"}`

// ParseSubgroups parses the groups value of a nesting write: a JSON array
// with at most maxGroups elements, each naming one group in one of these
// forms:
//
//	"backend"                                     a group id
//	{"group": "backend"}                          an object
//	{"group": "backend", "ttl": "4h"}             with an expiry after the commit
//	{"group": "backend", "expires": "2026-12-01T00:00:00Z"}  with an expiry
//
// "expires" and "ttl" are read exactly as in a users element (ParseUsers),
// and not both. A group id is a JSON string of valid UTF-8; whether it is a
// valid group id is the Service's to check, with the rest of the write.
// Objects may not repeat or add keys.
//
// Errors: membership.CodeInvalidGroups naming the first offending element,
// or membership.CodeTooManyGroups.
func ParseSubgroups(s string, maxGroups int) ([]membership.Subgroup, error) {
	p := usersParser{s: s, array: "groups", code: membership.CodeInvalidGroups}
	return parseWhole(&p, maxGroups, membership.CodeTooManyGroups, (*usersParser).subgroup)
}

// subgroup parses one element of groups at p.pos.
func (p *usersParser) subgroup() (membership.Subgroup, error) {
	switch p.peek() {
	case '"':
		id, err := p.ownString("group id")
		return membership.Subgroup{GroupID: id}, err
	case '{':
		return p.subgroupObject()
	default:
		return membership.Subgroup{}, p.wrongValue(wantGroupElement)
	}
}

// subgroupObject parses {"group": "g", "expires": time or null, "ttl":
// duration}, the keys in any order, all but group optional, and expires
// and ttl not both.
func (p *usersParser) subgroupObject() (g membership.Subgroup, err error) {
	var hasGroup, hasExpires, hasTTL bool
	err = p.members(subgroupKeys, func(key string) error {
		return p.elementError(`unknown key %q: only "group", "expires" and "ttl" are allowed`, truncate(key))
	}, func(key string) (err error) {
		switch key {
		case "group":
			g.GroupID, err = p.ownString("group id")
			hasGroup = true
		case "expires":
			g.Expiry.At, err = p.expires()
			hasExpires = true
		case "ttl":
			g.Expiry.TTL, err = p.ttl()
			hasTTL = true
		}
		return err
	})
	switch {
	case err != nil:
		return g, err
	case !hasGroup:
		return g, p.elementError(`the object has no "group", want %s`, wantGroupElement)
	}
	g.Expiry.Set, err = p.expiryGiven(hasExpires, hasTTL)
	return g, err
}

// subgroupKeys are the keys of a groups element's object.
var subgroupKeys = []string{"group", "expires", "ttl"}
