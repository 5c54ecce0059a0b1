package wire

import (
	"encoding/json"
	"slices"
	"strings"
)

// Filter is a list's filter (RFC 7644 3.4.2.2) as far as the service takes
// it: comparisons of an attribute with eq and a string, joined by and,
// which is what identity providers send (userName eq "…", externalId eq
// "…", displayName eq "…", and Entra ID's id eq "…" and members eq "…").
type Filter []Comparison

// Comparison is Attr eq Value: attr folded to lower case, without its
// schema's URN.
type Comparison struct {
	Attr  string
	Value string
}

// filterAttributes are the attributes a filter of each kind of resource
// may compare.
var filterAttributes = map[string][]string{
	"User":  {"id", "username", "externalid"},
	"Group": {"id", "displayname", "externalid", "members", "members.value"},
	// A member, in the filter of a path: members[value eq "42"].
	"member": {"value"},
}

// filterNames are the attributes of filterAttributes as a message names
// them.
var filterNames = map[string]string{
	"User":   "id, userName, externalId",
	"Group":  "id, displayName, externalId, members",
	"member": "value",
}

// ParseFilter parses s, a filter of resources of kind.
func ParseFilter(s, kind string) (Filter, error) {
	if len(s) > MaxQueryParamBytes {
		return nil, BadRequest(InvalidFilter, "the filter is longer than %d bytes", MaxQueryParamBytes)
	}
	p := filterParser{s: s}
	var f Filter
	for {
		c, err := p.comparison(kind)
		if err != nil {
			return nil, err
		}
		f = append(f, c)
		if p.done() {
			return f, nil
		}
		if err := p.space(); err != nil {
			return nil, err
		}
		if word := p.word(); !strings.EqualFold(word, "and") {
			return nil, BadRequest(InvalidFilter, "the filter has %q where and or its end was due: the service takes comparisons with eq joined by and", word)
		}
		if err := p.space(); err != nil {
			return nil, err
		}
	}
}

// filterParser reads a filter from s at i.
type filterParser struct {
	s string
	i int
}

func (p *filterParser) done() bool { return p.i == len(p.s) }

// space reads the one space that separates two words of a filter (RFC
// 7644 3.4.2.2's SP): none, two, or one at the end is invalidFilter.
func (p *filterParser) space() error {
	if p.done() || p.s[p.i] != ' ' {
		return BadRequest(InvalidFilter, "the filter has no space after %.60q: its words are separated by one space", p.s[:p.i])
	}
	p.i++
	if p.done() || p.s[p.i] == ' ' {
		return BadRequest(InvalidFilter, "the filter has a space too many after %.60q: its words are separated by one space, with none at its start or end", p.s[:p.i-1])
	}
	return nil
}

// word reads up to the next space.
func (p *filterParser) word() string {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] != ' ' {
		p.i++
	}
	return p.s[start:p.i]
}

// comparison reads attr eq "value".
func (p *filterParser) comparison(kind string) (Comparison, error) {
	attr := p.word()
	if attr == "" && !p.done() {
		return Comparison{}, BadRequest(InvalidFilter, "the filter has a space where a comparison was due: its words are separated by one space, with none at its start or end")
	}
	if attr == "" {
		return Comparison{}, BadRequest(InvalidFilter, "the filter ends where a comparison was due")
	}
	c := Comparison{Attr: AttributePath(attr, kind)}
	if !slices.Contains(filterAttributes[kind], c.Attr) {
		return Comparison{}, BadRequest(InvalidFilter, "the filter compares %.60q: a filter of %ss compares %s", attr, kind, filterNames[kind])
	}
	if c.Attr == "members.value" {
		c.Attr = "members"
	}
	if err := p.space(); err != nil {
		return Comparison{}, err
	}
	if op := p.word(); !strings.EqualFold(op, "eq") {
		return Comparison{}, BadRequest(InvalidFilter, "the filter has the operator %.20q: the service takes eq only", op)
	}
	if err := p.space(); err != nil {
		return Comparison{}, err
	}
	value, err := p.string()
	if err != nil {
		return Comparison{}, err
	}
	c.Value = value
	return c, nil
}

// string reads a JSON string.
func (p *filterParser) string() (string, error) {
	if p.i == len(p.s) || p.s[p.i] != '"' {
		return "", BadRequest(InvalidFilter, "the filter compares with something other than a string in double quotes")
	}
	end := p.i + 1
	for end < len(p.s) && p.s[end] != '"' {
		if p.s[end] == '\\' {
			end++
		}
		end++
	}
	if end >= len(p.s) {
		return "", BadRequest(InvalidFilter, "the filter has a string with no closing quote")
	}
	var v string
	if err := json.Unmarshal([]byte(p.s[p.i:end+1]), &v); err != nil {
		return "", BadRequest(InvalidFilter, "the filter has a string that is not one: %v", err)
	}
	p.i = end + 1
	return v, nil
}

// Value returns the value f compares attr with, and false when it does
// not compare attr.
func (f Filter) Value(attr string) (string, bool) {
	for _, c := range f {
		if c.Attr == attr {
			return c.Value, true
		}
	}
	return "", false
}
