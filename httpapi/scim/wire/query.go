package wire

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"example.com/groupmembership/httpapi/decode"
)

// The bounds of a list's query (advertised in ServiceProviderConfig).
const (
	// MaxResults is the most resources one list returns; a count above it
	// returns this many.
	MaxResults = 1000
	// DefaultCount is the page a list returns without a count.
	DefaultCount = 100
	// MaxQueryParamBytes bounds a filter and an attributes list.
	MaxQueryParamBytes = 1024
)

// List is what a list's query string asks: a filter, a page
// (startIndex is 1-based, as SCIM's), and the attributes to return.
type List struct {
	Filter     Filter
	StartIndex int
	Count      int
	Sel        Selection
}

// ParseList parses the query of a list of resources of kind
// ("User", "Group").
func ParseList(r *http.Request, kind string) (List, error) {
	q, err := decode.ParseQuery(r, "filter", "startIndex", "count", "attributes", "excludedAttributes")
	if err != nil {
		return List{}, err
	}
	lq := List{StartIndex: 1, Count: DefaultCount}
	if v, ok := q["filter"]; ok {
		if lq.Filter, err = ParseFilter(v, kind); err != nil {
			return List{}, err
		}
	}
	if v, ok := q["startIndex"]; ok {
		if lq.StartIndex, err = integer("startIndex", v); err != nil {
			return List{}, err
		}
		lq.StartIndex = max(lq.StartIndex, 1) // RFC 7644 3.4.2.4: less than 1 is 1
	}
	if v, ok := q["count"]; ok {
		if lq.Count, err = integer("count", v); err != nil {
			return List{}, err
		}
		lq.Count = min(max(lq.Count, 0), MaxResults) // a negative count is 0
	}
	lq.Sel, err = selectionOf(q, kind)
	return lq, err
}

// ParseResource parses the query of a read or write of one resource
// of kind: attributes or excludedAttributes.
func ParseResource(r *http.Request, kind string) (Selection, error) {
	q, err := decode.ParseQuery(r, "attributes", "excludedAttributes")
	if err != nil {
		return Selection{}, err
	}
	return selectionOf(q, kind)
}

// integer parses v, the parameter name, as a decimal integer. One past
// ±math.MaxInt32 is taken as that bound: a larger count or startIndex
// asks no more than it does (RFC 7644 3.4.2.4).
func integer(name, v string) (int, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, BadRequest(InvalidValue, "%s %.20q is not an integer", name, v)
	}
	return int(n), nil // at the bound when out of range
}

// Selection is the attributes a reply returns (RFC 7644 3.9): those of
// only, when set, or all but those of except. Each is an attribute name
// folded to lower case ("members"), or a sub-attribute ("name.givenname").
// id and schemas are always returned.
type Selection struct {
	only, except []string
}

// selectionOf reads the attributes and excludedAttributes of q.
func selectionOf(q decode.Query, kind string) (Selection, error) {
	only, hasOnly := q["attributes"]
	except, hasExcept := q["excludedAttributes"]
	switch {
	case hasOnly && hasExcept:
		return Selection{}, BadRequest(InvalidValue, "attributes and excludedAttributes are given together: give one")
	case len(only) > MaxQueryParamBytes || len(except) > MaxQueryParamBytes:
		return Selection{}, BadRequest(InvalidValue, "the attributes list is longer than %d bytes", MaxQueryParamBytes)
	}
	return Selection{only: attributeNames(only, kind), except: attributeNames(except, kind)}, nil
}

// attributeNames splits a comma-separated list of attribute names, each
// folded to lower case and without the URN of kind's core schema.
func attributeNames(list, kind string) []string {
	var names []string
	for name := range strings.SplitSeq(list, ",") {
		if name = AttributePath(strings.TrimSpace(name), kind); name != "" {
			names = append(names, name)
		}
	}
	return names
}

// AttributePath folds path to lower case and drops the URN of kind's core
// schema before it.
func AttributePath(path, kind string) string {
	path = strings.ToLower(path)
	if urn := strings.ToLower(SchemaOf(kind)) + ":"; strings.HasPrefix(path, urn) {
		path = path[len(urn):]
	}
	return path
}

// Wants reports whether the selection returns the attribute name (folded)
// or any of its sub-attributes.
func (s Selection) Wants(name string) bool {
	if len(s.only) > 0 {
		for _, n := range s.only {
			if n == name || strings.HasPrefix(n, name+".") {
				return true
			}
		}
		return false
	}
	for _, n := range s.except {
		if n == name {
			return false
		}
	}
	return true
}

// Apply returns o with only the members the selection returns; a complex
// or multi-valued member keeps only the sub-attributes it names.
func (s Selection) Apply(o Object) Object {
	if len(s.only) == 0 && len(s.except) == 0 {
		return o
	}
	out := make(Object, 0, len(o))
	for _, m := range o {
		name := strings.ToLower(m.Name)
		if name == "id" || name == "schemas" || !s.Wants(name) {
			if name == "id" || name == "schemas" {
				out = append(out, m)
			}
			continue
		}
		out = append(out, Member{m.Name, s.subAttributes(name, m.Value)})
	}
	return out
}

// IsZero reports whether the selection returns every attribute.
func (s Selection) IsZero() bool { return len(s.only) == 0 && len(s.except) == 0 }

// subAttributes returns v, the value of the attribute name, with only
// the sub-attributes the selection names of it, or all when it names the
// attribute itself or names none.
func (s Selection) subAttributes(name string, v any) any {
	var subs []string
	for _, n := range s.only {
		if n == name {
			return v
		}
		if sub, ok := strings.CutPrefix(n, name+"."); ok {
			subs = append(subs, sub)
		}
	}
	var drop []string
	for _, n := range s.except {
		if sub, ok := strings.CutPrefix(n, name+"."); ok {
			drop = append(drop, sub)
		}
	}
	keep := func(o Object) Object {
		var out Object
		for _, m := range o {
			in := len(subs) == 0 || slices.Contains(subs, strings.ToLower(m.Name))
			if in && !slices.Contains(drop, strings.ToLower(m.Name)) {
				out = append(out, m)
			}
		}
		return out
	}
	switch v := v.(type) {
	case Object:
		return keep(v)
	case []Object:
		out := make([]Object, len(v))
		for i, o := range v {
			out[i] = keep(o)
		}
		return out
	}
	return v
}
