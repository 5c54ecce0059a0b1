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
			if req.Checks, err = p.array(maxChecks); err != nil {
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

// array parses the checks array at p.pos.
func (p *checksParser) array(maxChecks int) ([]membership.Check, error) {
	if p.peek() != '[' {
		return nil, membership.Errorf(membership.CodeInvalidChecks, "checks is not a JSON array: it must start with [")
	}
	p.pos++
	// Commas bound the element count, and so does preallocated, so this
	// never allocates more than the request could fill.
	checks := make([]membership.Check, 0, min(strings.Count(p.s[p.pos:], ",")+1, maxChecks, preallocated))
	p.skipSpace()
	if p.consume(']') {
		return checks, nil
	}
	for {
		if len(checks) == maxChecks {
			return nil, membership.Errorf(membership.CodeTooManyChecks, "checks has more than %d elements", maxChecks)
		}
		p.elem = len(checks)
		c, err := p.check()
		if err != nil {
			return nil, err
		}
		checks = append(checks, c)
		p.skipSpace()
		if p.consume(']') {
			return checks, nil
		}
		if p.pos == len(p.s) {
			return nil, p.syntaxError("unexpected end: the array is not closed")
		}
		if !p.consume(',') {
			return nil, p.syntaxError("want , or ] after element %d", p.elem)
		}
		p.skipSpace()
	}
}

// check parses one element of checks: {"group": "g", "uid": uid}, the keys
// in any order.
func (p *checksParser) check() (membership.Check, error) {
	if p.peek() != '{' {
		return membership.Check{}, p.wrongValue(wantCheck)
	}
	p.pos++
	var c membership.Check
	var hasGroup, hasUID bool
	p.skipSpace()
	for !p.consume('}') {
		if hasGroup || hasUID {
			if !p.consume(',') {
				return membership.Check{}, p.syntaxError("want , or } in element %d", p.elem)
			}
			p.skipSpace()
		}
		if p.peek() != '"' {
			return membership.Check{}, p.syntaxError("want a quoted key in element %d", p.elem)
		}
		key, err := p.string()
		if err != nil {
			return membership.Check{}, err
		}
		p.skipSpace()
		if !p.consume(':') {
			return membership.Check{}, p.syntaxError("want : after key %q in element %d", key, p.elem)
		}
		p.skipSpace()
		switch {
		case key == "group" && hasGroup, key == "uid" && hasUID:
			return membership.Check{}, p.elementError("the key %q appears twice", key)
		case key == "group":
			if p.peek() != '"' {
				return membership.Check{}, p.wrongValue("a string group id")
			}
			if c.GroupID, err = p.string(); err != nil {
				return membership.Check{}, err
			}
			hasGroup = true
		case key == "uid":
			if c.UID, err = p.uid(wantUID); err != nil {
				return membership.Check{}, err
			}
			hasUID = true
		default:
			return membership.Check{}, p.elementError("unknown key %.40q: only \"group\" and \"uid\" are allowed", key)
		}
		p.skipSpace()
	}
	switch {
	case !hasGroup:
		return membership.Check{}, p.elementError(`the object has no "group", want %s`, wantCheck)
	case !hasUID:
		return membership.Check{}, p.elementError(`the object has no "uid", want %s`, wantCheck)
	}
	return c, nil
}
