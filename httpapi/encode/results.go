package encode

import (
	"strconv"

	"example.com/groupmembership/membership"
)

// AppendResults appends {"results":[…]}: each of found as true or false.
func AppendResults(b []byte, found []bool) []byte {
	b = append(b, `{"results":[`...)
	for i, f := range found {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendBool(b, f)
	}
	return append(b, "]}"...)
}

// AppendBatchResults appends {"results":[…]}: each write's counts, as an
// object, "added" for an add (of users or groups), "removed" for a remove
// or a deletion, both for a replace.
func AppendBatchResults(b []byte, ws []membership.Write, results []membership.Result) []byte {
	b = append(b, `{"results":[`...)
	for i, res := range results {
		if i > 0 {
			b = append(b, ',')
		}
		switch ws[i].Op {
		case membership.OpAdd, membership.OpAddGroups:
			b = strconv.AppendInt(append(b, `{"added":`...), int64(res.Count), 10)
		case membership.OpReplace, membership.OpReplaceGroups:
			b = strconv.AppendInt(append(b, `{"added":`...), int64(res.Count), 10)
			b = strconv.AppendInt(append(b, `,"removed":`...), int64(res.Removed), 10)
		default:
			b = strconv.AppendInt(append(b, `{"removed":`...), int64(res.Count), 10)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// AppendReplaced appends the reply of a replace: {"added":A,"removed":R}.
func AppendReplaced(b []byte, res membership.Result) []byte {
	b = append(b, `{"added":`...)
	b = strconv.AppendInt(b, int64(res.Count), 10)
	b = append(b, `,"removed":`...)
	b = strconv.AppendInt(b, int64(res.Removed), 10)
	return append(b, '}')
}
