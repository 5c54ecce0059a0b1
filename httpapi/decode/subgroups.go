package decode

import (
	"strings"

	"example.com/groupmembership/membership"
)

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
	groups := make([]membership.Subgroup, 0, min(strings.Count(s, ",")+1, maxGroups, preallocated))
	err := p.eachElement(maxGroups, membership.CodeTooManyGroups, func() error {
		g, err := p.subgroup()
		groups = append(groups, g)
		return err
	})
	if err != nil {
		return nil, err
	}
	return groups, nil
}

// subgroup parses one element of groups at p.pos.
func (p *usersParser) subgroup() (membership.Subgroup, error) {
	switch p.peek() {
	case '"':
		id, err := p.groupID()
		return membership.Subgroup{GroupID: id}, err
	case '{':
		return p.subgroupObject()
	default:
		return membership.Subgroup{}, p.wrongValue(wantGroupElement)
	}
}

// groupID parses a group id: a JSON string of valid UTF-8, copied out of
// the request body, which the store may keep it beyond.
func (p *usersParser) groupID() (string, error) {
	if p.peek() != '"' {
		return "", p.wrongValue("a string group id")
	}
	s, err := p.string()
	if err != nil {
		return "", err
	}
	return strings.Clone(s), nil
}

// subgroupObject parses {"group": "g", "expires": time or null, "ttl":
// duration}, the keys in any order, all but group optional, and expires
// and ttl not both.
func (p *usersParser) subgroupObject() (membership.Subgroup, error) {
	p.pos++ // {
	var g membership.Subgroup
	var hasGroup, hasExpires, hasTTL bool
	p.skipSpace()
	for !p.consume('}') {
		if hasGroup || hasExpires || hasTTL {
			if !p.consume(',') {
				return g, p.syntaxError("want , or } in element %d", p.elem)
			}
			p.skipSpace()
		}
		if p.peek() != '"' {
			return g, p.syntaxError("want a quoted key in element %d", p.elem)
		}
		key, err := p.string()
		if err != nil {
			return g, err
		}
		p.skipSpace()
		if !p.consume(':') {
			return g, p.syntaxError("want : after key %q in element %d", key, p.elem)
		}
		p.skipSpace()
		switch key {
		case "group":
			if hasGroup {
				return g, p.elementError(`the key "group" appears twice`)
			}
			if g.GroupID, err = p.groupID(); err != nil {
				return g, err
			}
			hasGroup = true
		case "expires":
			if hasExpires {
				return g, p.elementError(`the key "expires" appears twice`)
			}
			if g.Expiry.At, err = p.expires(); err != nil {
				return g, err
			}
			hasExpires = true
		case "ttl":
			if hasTTL {
				return g, p.elementError(`the key "ttl" appears twice`)
			}
			if g.Expiry.TTL, err = p.ttl(); err != nil {
				return g, err
			}
			hasTTL = true
		default:
			return g, p.elementError(`unknown key %q: only "group", "expires" and "ttl" are allowed`, truncate(key))
		}
		p.skipSpace()
	}
	switch {
	case !hasGroup:
		return g, p.elementError(`the object has no "group", want %s`, wantGroupElement)
	case hasExpires && hasTTL:
		return g, p.elementError(`"expires" and "ttl" are both given: give one`)
	}
	g.Expiry.Set = hasExpires || hasTTL
	return g, nil
}
