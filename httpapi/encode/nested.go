package encode

import (
	"iter"

	"example.com/groupmembership/membership"
)

const (
	ViaPrefix          = `,"via":[`
	nestedGroupPrefix  = `{"group":`
	nestedExpiryPrefix = `,"expires":`
)

// NestedJSONLen returns len(AppendNested(nil, groups)).
func NestedJSONLen(groups iter.Seq[membership.Nested]) int {
	size, n := 2, 0 // []
	for g := range groups {
		size += nestedElementLen(g)
		n++
	}
	return size + max(n-1, 0) // commas
}

func nestedElementLen(g membership.Nested) int {
	n := len(nestedGroupPrefix) + jsonStringLen(g.GroupID) + 1 // }
	if !g.Expires.IsZero() {
		n += len(nestedExpiryPrefix) + changeTimeLen(g.Expires)
	}
	return n
}

// AppendNested appends groups as a JSON array of {"group":…}, each with
// "expires" when its nesting ends.
func AppendNested(b []byte, groups iter.Seq[membership.Nested]) []byte {
	b = append(b, '[')
	i := 0
	for g := range groups {
		if i > 0 {
			b = append(b, ',')
		}
		i++
		b = appendNestedElement(b, g)
	}
	return append(b, ']')
}

// appendNestedElement appends {"group":…}, with "expires" (in the feed's
// time layout) when g has an expiry.
func appendNestedElement(b []byte, g membership.Nested) []byte {
	b = append(b, nestedGroupPrefix...)
	b = AppendJSONString(b, g.GroupID)
	if !g.Expires.IsZero() {
		b = append(b, nestedExpiryPrefix...)
		b = appendChangeTime(b, g.Expires)
	}
	return append(b, '}')
}
