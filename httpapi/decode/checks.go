package decode

import (
	"strconv"
	"strings"

	"example.com/groupmembership/membership"
)

// CheckRequest is a decoded POST /check.
type CheckRequest struct {
	Checks     []membership.Check
	Transitive bool
}

// wantCheck is what an element of checks must be, for messages.
const wantCheck = `{"group": "group id", "uid": uid}`

// ParseChecks parses the body of POST /check: one JSON object with the key
// "checks" and, optionally, "transitive" (true or false). "checks" is an
// array of at most maxChecks objects, each with the keys "group" (a
// string) and "uid" (a number or a decimal string, as in users), and no
// other. Keys are matched byte for byte and each at most
// once (encoding/json would match "CHECKS", the last repeat winning);
// strings are read as ParseUsers reads them, so a group id that is not
// valid UTF-8, or has a lone surrogate escape, is an error, never altered.
// The group ids may point into body. Group ids are validated by
// membership.Service.CheckMembers, not here.
//
// Errors: CodeInvalidBody (the object around checks), CodeInvalidChecks
// naming the first offending element, CodeTooManyChecks.
func ParseChecks(body string, maxChecks int) (CheckRequest, error) {
	p := checksParser{usersParser{s: body, array: "checks", code: membership.CodeInvalidChecks}}
	return p.parse(maxChecks)
}

// checksParser reads a POST /check body with the scanner of users.
type checksParser struct{ usersParser }

func (p *checksParser) parse(maxChecks int) (CheckRequest, error) {
	var req CheckRequest
	p.skipSpace()
	if !p.consume('{') {
		return req, membership.Errorf(membership.CodeInvalidBody,
			`the body is not a JSON object: send {"checks":[{"group":"g","uid":1},...]}`)
	}
	seen, seenTransitive := false, false
	p.skipSpace()
	for !p.consume('}') {
		if (seen || seenTransitive) && !p.consume(',') {
			return req, p.bodyError("want , or } after a value")
		}
		p.skipSpace()
		if p.peek() != '"' {
			return req, p.bodyError("want a quoted key")
		}
		key, err := p.string()
		if err != nil {
			return req, p.bodyError("a key is not a valid JSON string")
		}
		switch {
		case key != "checks" && key != "transitive":
			return req, membership.Errorf(membership.CodeInvalidBody,
				"unknown field %.40q: the body takes only \"checks\" and \"transitive\", spelt exactly so", key)
		case key == "checks" && seen, key == "transitive" && seenTransitive:
			return req, membership.Errorf(membership.CodeInvalidBody, "the key %q is given twice: give it once", key)
		}
		p.skipSpace()
		if !p.consume(':') {
			return req, p.bodyError("want : after the key")
		}
		p.skipSpace()
		if key == "transitive" {
			if req.Transitive, err = p.boolean(); err != nil {
				return req, err
			}
			seenTransitive = true
		} else {
			if req.Checks, err = parseArray(&p.usersParser, maxChecks, membership.CodeTooManyChecks, (*usersParser).check); err != nil {
				return req, err
			}
			seen = true
		}
		p.skipSpace()
	}
	p.skipSpace()
	switch {
	case p.pos != len(p.s):
		return req, membership.Errorf(membership.CodeInvalidBody, "the body has more than one JSON value")
	case !seen:
		return req, membership.Errorf(membership.CodeInvalidBody, `the body has no "checks": send {"checks":[{"group":"g","uid":1},...]}`)
	}
	return req, nil
}

// boolean parses the value of "transitive": true or false.
func (p *checksParser) boolean() (bool, error) {
	for _, b := range []bool{true, false} {
		word := strconv.FormatBool(b)
		if strings.HasPrefix(p.s[p.pos:], word) {
			p.pos += len(word)
			return b, nil
		}
	}
	return false, membership.Errorf(membership.CodeInvalidBody, "transitive is not true or false: send \"transitive\":true or leave it out")
}

// bodyError reports malformed JSON, at p.pos, in the object around checks.
func (p *checksParser) bodyError(format string, args ...any) error {
	return membership.Errorf(membership.CodeInvalidBody, "the body is not valid JSON at byte %d: "+format, append([]any{p.pos}, args...)...)
}

// check parses one element of checks: {"group": "g", "uid": uid}, the keys
// in any order.
func (p *usersParser) check() (c membership.Check, err error) {
	if p.peek() != '{' {
		return c, p.wrongValue(wantCheck)
	}
	var hasGroup, hasUID bool
	err = p.members(checkKeys, func(key string) error {
		return p.elementError("unknown key %.40q: only \"group\" and \"uid\" are allowed", key)
	}, func(key string) (err error) {
		switch key {
		case "group":
			if p.peek() != '"' {
				return p.wrongValue("a string group id")
			}
			c.GroupID, err = p.string()
			hasGroup = true
		case "uid":
			c.UID, err = p.uid(wantUID)
			hasUID = true
		}
		return err
	})
	switch {
	case err != nil:
		return membership.Check{}, err
	case !hasGroup:
		return membership.Check{}, p.elementError(`the object has no "group", want %s`, wantCheck)
	case !hasUID:
		return membership.Check{}, p.elementError(`the object has no "uid", want %s`, wantCheck)
	}
	return c, nil
}

// checkKeys are the keys of an element of checks.
var checkKeys = []string{"group", "uid"}
