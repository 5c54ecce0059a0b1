package encode

import (
	"iter"
	"strconv"
	"time"

	"example.com/groupmembership/internal/jsonstr"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
)

// MembersJSONLen returns the length of the JSON array of members, and how
// many there are.
func MembersJSONLen(members iter.Seq[membership.Member]) (size, n int) {
	size = 2 // []
	for m := range members {
		size += memberJSONLen(m)
		n++
	}
	if n > 1 {
		size += n - 1 // commas
	}
	return size, n
}

// AppendMembers appends the JSON array of members to b. With marks, it
// appends to *marks every MarkEvery-th member's uid and offset in b.
func AppendMembers(b []byte, members iter.Seq[membership.Member], marks *[]ListMark) []byte {
	b = append(b, '[')
	i := 0
	for m := range members {
		if i > 0 {
			b = append(b, ',')
		}
		if marks != nil && i%MarkEvery == 0 {
			*marks = append(*marks, ListMark{UID: m.UID, Offset: len(b)})
		}
		i++
		b = AppendMemberJSON(b, m)
	}
	return append(b, ']')
}

const (
	UIDPrefix      = `{"uid":`
	nicknamePrefix = `,"nickname":`
	expiresPrefix  = `,"expires":`
)

// AppendMemberJSON appends m as lists send it: {"uid":…,"nickname":…},
// and, only for a member with an expiry, "expires" after the nickname (in
// the feed's time layout), so that a member without one is sent exactly as
// before expiries.
func AppendMemberJSON(b []byte, m membership.Member) []byte {
	b = appendNicknameJSON(b, m)
	if !m.Expires.IsZero() {
		b = append(b[:len(b)-1], expiresPrefix...) // over the }
		b = appendChangeTime(b, m.Expires)
		b = append(b, '}')
	}
	return b
}

func memberJSONLen(m membership.Member) int {
	n := nicknameJSONLen(m)
	if !m.Expires.IsZero() {
		n += len(expiresPrefix) + changeTimeLen(m.Expires)
	}
	return n
}

// appendNicknameJSON appends {"uid":…,"nickname":…}: a member's nickname,
// as the feed's "nicknames" report it, without its expiry.
func appendNicknameJSON(b []byte, m membership.Member) []byte {
	b = append(b, UIDPrefix...)
	b = strconv.AppendInt(b, int64(m.UID), 10)
	b = append(b, nicknamePrefix...)
	b = AppendJSONString(b, m.Nickname)
	return append(b, '}')
}

func nicknameJSONLen(m membership.Member) int {
	return len(UIDPrefix) + decimalLen(int64(m.UID)) + len(nicknamePrefix) + jsonStringLen(m.Nickname) + 1
}

// decimalLen returns the length of n in decimal, its sign included.
func decimalLen(n int64) int {
	if n < 0 {
		return 1 + uintLen(-uint64(n))
	}
	return uintLen(uint64(n))
}

// uintLen returns the number of digits of n.
func uintLen(n uint64) int {
	digits := 1
	for n >= 10 {
		n /= 10
		digits++
	}
	return digits
}

// AppendJSONString appends s as a JSON string, exactly as encoding/json does
// with HTML escaping off (see jsonstr.Append).
func AppendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	b = jsonstr.Append(b, s, jsonstr.EncodingJSON)
	return append(b, '"')
}

// jsonStringLen returns len(AppendJSONString(nil, s)) without building it.
func jsonStringLen(s string) int { return 2 + jsonstr.Len(s) }

// StringsJSONLen returns the length of ss as a JSON array of strings.
func StringsJSONLen(ss []string) int { return 2 + joinedLen(ss, jsonStringLen) }

func AppendStrings(b []byte, ss []string) []byte {
	b = appendJoined(append(b, '['), ss, AppendJSONString)
	return append(b, ']')
}

const (
	groupObjectPrefix = `{"group":`
	membersPrefix     = `,"members":`
	subgroupsPrefix   = `,"subgroups":`
)

// GroupsJSONLen returns the length of the JSON array of groups.
func GroupsJSONLen(groups iter.Seq[membership.GroupSize]) int {
	size, n := 2, 0 // []
	for g := range groups {
		size += len(groupObjectPrefix) + jsonStringLen(g.ID) + len(membersPrefix) + decimalLen(int64(g.Members)) + 1
		if g.Subgroups != 0 {
			size += len(subgroupsPrefix) + decimalLen(int64(g.Subgroups))
		}
		n++
	}
	return size + max(n-1, 0) // commas
}

// AppendGroups appends groups as a JSON array of {"group":…,"members":…},
// with "subgroups" when a group has some, so that a group without is sent
// exactly as before groups held groups.
func AppendGroups(b []byte, groups iter.Seq[membership.GroupSize]) []byte {
	b = append(b, '[')
	i := 0
	for g := range groups {
		if i > 0 {
			b = append(b, ',')
		}
		i++
		b = append(b, groupObjectPrefix...)
		b = AppendJSONString(b, g.ID)
		b = append(b, membersPrefix...)
		b = strconv.AppendInt(b, int64(g.Members), 10)
		if g.Subgroups != 0 {
			b = append(b, subgroupsPrefix...)
			b = strconv.AppendInt(b, int64(g.Subgroups), 10)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// ChangesJSONLen returns how many of the first changes fit in a JSON array
// of at most maxBytes, but at least one when there are any, and the length
// of that array.
func ChangesJSONLen(changes []membership.Change, maxBytes int) (n, size int) {
	size = 2 // []
	for i, c := range changes {
		next := changeJSONLen(c)
		if i > 0 {
			next++ // the comma
		}
		if i > 0 && size+next > maxBytes {
			return i, size
		}
		size += next
	}
	return len(changes), size
}

const (
	revPrefix       = `{"rev":`
	opPrefix        = `,"op":`
	timePrefix      = `,"time":`
	actorPrefix     = `,"actor":`
	principalPrefix = `,"principal":`
	groupPrefix     = `,"group":`
	uidsPrefix      = `,"uids":[`
	nicknamesPrefix = `,"nicknames":[`
	expiriesPrefix  = `,"expiries":[`
	changesPrefix   = `,"changes":[`
	subOpPrefix     = `{"op":`
	groupsPrefix    = `,"groups":[`
	accountPrefix   = `,"account":`
	attrsPrefix     = `,"attributes":`
)

// A change's JSON names its group, but for remove_user, set_user and
// delete_user (which name the user, in uids), and lists its uids, but for
// delete_group and set_group (which name only the group) and the nesting
// ops (which list groups instead): see AppendChange.
func hasGroup(c membership.Change) bool {
	return c.Op != membership.OpRemoveUser && c.Op != membership.OpSetUser && c.Op != membership.OpDeleteUser
}

func hasUIDs(c membership.Change) bool {
	return c.Op != membership.OpDeleteGroup && c.Op != membership.OpSetGroup && !membership.IsNestingOp(c.Op)
}

// changeGroupExpires reports whether the nesting change c sends its groups'
// expiries: an add or a replace gives each nesting as it is now, a remove
// or an expiry only the groups whose nesting ended.
func changeGroupExpires(c membership.Change) bool {
	return c.Op == membership.OpAddGroups || c.Op == membership.OpReplaceGroups
}

// changeGroup is g as a nesting change sends it.
func changeGroup(c membership.Change, g membership.Nested) membership.Nested {
	if !changeGroupExpires(c) {
		g.Expires = time.Time{}
	}
	return g
}

// changeTimeLayout is a change's time as the feed sends it, and a
// member's expiry as lists send it: RFC 3339 in UTC, to the millisecond,
// always with three digits (membership.ExpiryLayout, in UTC).
const changeTimeLayout = "2006-01-02T15:04:05.000Z"

// appendChangeTime appends t, in UTC, as a JSON string of changeTimeLayout.
func appendChangeTime(b []byte, t time.Time) []byte {
	// Formatted apart: AppendFormat writes nine digits of the fraction
	// before it cuts them to three, which would outgrow a buffer sized
	// to the reply when the time ends it.
	var buf [64]byte
	b = append(b, '"')
	b = append(b, t.UTC().AppendFormat(buf[:0], changeTimeLayout)...)
	return append(b, '"')
}

// changeTimeLen returns len(appendChangeTime(nil, t)): 26 for the years 0
// to 9999, the only ones a store's clock gives.
func changeTimeLen(t time.Time) int {
	if y := t.UTC().Year(); y >= 0 && y <= 9999 {
		return 2 + len(changeTimeLayout)
	}
	var buf [64]byte
	return len(appendChangeTime(buf[:0], t))
}

// changeJSONLen returns len(AppendChange(nil, c)) without building it.
func changeJSONLen(c membership.Change) int {
	n := len(revPrefix) + uintLen(uint64(c.Revision)) + len(opPrefix) + jsonStringLen(string(c.Op)) + 1 // }
	if !c.Time.IsZero() {
		n += len(timePrefix) + changeTimeLen(c.Time)
	}
	if c.Actor > 0 {
		n += len(actorPrefix) + decimalLen(int64(c.Actor))
	}
	if c.Principal != "" {
		n += len(principalPrefix) + jsonStringLen(c.Principal)
	}
	return n + changeBodyLen(c)
}

// changeBodyLen returns len(appendChangeBody(nil, c)).
func changeBodyLen(c membership.Change) int {
	if c.Op == membership.OpBatch {
		return len(changesPrefix) + joinedLen(c.Changes, func(sub membership.Change) int {
			return len(subOpPrefix) + jsonStringLen(string(sub.Op)) + changeBodyLen(sub) + 1 // }
		}) + 1 // ]
	}
	n := 0
	if hasGroup(c) {
		n += len(groupPrefix) + jsonStringLen(c.GroupID)
	}
	if hasUIDs(c) {
		n += len(uidsPrefix) + joinedLen(c.UIDs, func(uid membership.UID) int { return decimalLen(int64(uid)) }) + 1 // ]
	}
	if membership.IsNestingOp(c.Op) {
		n += len(groupsPrefix) + joinedLen(c.Groups, func(g membership.Nested) int { return nestedElementLen(changeGroup(c, g)) }) + 1
	}
	if len(c.Nicknames) > 0 {
		n += len(nicknamesPrefix) + joinedLen(c.Nicknames, nicknameJSONLen) + 1
	}
	if len(c.Expiries) > 0 {
		n += len(expiriesPrefix) + joinedLen(c.Expiries, expiryJSONLen) + 1
	}
	if c.Account != nil {
		n += len(accountPrefix) + len(appendAccountJSON(nil, *c.Account))
	}
	if c.GroupAttributes != nil {
		n += len(attrsPrefix) + len(appendGroupAttributesJSON(nil, *c.GroupAttributes))
	}
	return n
}

// appendAccountJSON appends a as a change of set_user sends it, every
// attribute named.
func appendAccountJSON(b []byte, a account.Account) []byte {
	for _, f := range [...]struct{ name, value string }{
		{`{"userName":`, a.UserName}, {`,"externalId":`, a.ExternalID}, {`,"displayName":`, a.DisplayName},
		{`,"givenName":`, a.GivenName}, {`,"familyName":`, a.FamilyName}, {`,"email":`, a.Email},
	} {
		b = append(b, f.name...)
		b = AppendJSONString(b, f.value)
	}
	b = append(b, `,"active":`...)
	b = strconv.AppendBool(b, a.Active)
	return append(b, '}')
}

// appendGroupAttributesJSON appends a as a change of set_group sends it.
func appendGroupAttributesJSON(b []byte, a account.GroupAttributes) []byte {
	b = append(b, `{"displayName":`...)
	b = AppendJSONString(b, a.DisplayName)
	b = append(b, `,"externalId":`...)
	b = AppendJSONString(b, a.ExternalID)
	return append(b, '}')
}

func AppendChanges(b []byte, changes []membership.Change) []byte {
	b = appendJoined(append(b, '['), changes, AppendChange)
	return append(b, ']')
}

// AppendChange appends c as the feed sends it:
// {"rev":…,"op":…,"time":…,"actor":…,"principal":…,"group":…,"uids":[…],
// "nicknames":[…],"expiries":[…]}, what says when and by whom before what
// changed, with "time" but for a change logged before changes had times,
// "actor" and "principal" only when c has them, "nicknames" and
// "expiries" only when c has some, no
// "group" for remove_user and no "uids" for delete_group. An expiry is
// {"uid":…,"expires":…}, "expires" null for a membership made permanent.
// A nesting change (add_groups, remove_groups, replace_groups,
// expire_groups) has "groups" in place of "uids": [{"group":…},…], each
// of an add or a replace with "expires" when its nesting ends (one without
// does not end), those of a remove or an expiry without. A set_user names
// no group, its user in "uids", and its "account" as set (every attribute,
// "displayName" the user's nickname); a delete_user names no group, its
// user in "uids"; a set_group names its group and its "attributes" as set,
// and no uids.
func AppendChange(b []byte, c membership.Change) []byte {
	b = append(b, revPrefix...)
	b = strconv.AppendUint(b, uint64(c.Revision), 10)
	b = append(b, opPrefix...)
	b = AppendJSONString(b, string(c.Op))
	if !c.Time.IsZero() {
		b = append(b, timePrefix...)
		b = appendChangeTime(b, c.Time)
	}
	if c.Actor > 0 {
		b = append(b, actorPrefix...)
		b = strconv.AppendInt(b, int64(c.Actor), 10)
	}
	if c.Principal != "" {
		b = append(b, principalPrefix...)
		b = AppendJSONString(b, c.Principal)
	}
	b = appendChangeBody(b, c)
	return append(b, '}')
}

// appendChangeBody appends what c changed: its group, uids, nicknames and
// expiries,
// or, for a batch, "changes": its writes' changes, each {"op":…} with what
// it changed, and no revision, time, actor or principal of its own.
func appendChangeBody(b []byte, c membership.Change) []byte {
	if c.Op == membership.OpBatch {
		b = append(b, changesPrefix...)
		b = appendJoined(b, c.Changes, func(b []byte, sub membership.Change) []byte {
			b = append(b, subOpPrefix...)
			b = AppendJSONString(b, string(sub.Op))
			b = appendChangeBody(b, sub)
			return append(b, '}')
		})
		return append(b, ']')
	}
	if hasGroup(c) {
		b = append(b, groupPrefix...)
		b = AppendJSONString(b, c.GroupID)
	}
	if hasUIDs(c) {
		b = append(b, uidsPrefix...)
		b = appendJoined(b, c.UIDs, func(b []byte, uid membership.UID) []byte { return strconv.AppendInt(b, int64(uid), 10) })
		b = append(b, ']')
	}
	if membership.IsNestingOp(c.Op) {
		b = append(b, groupsPrefix...)
		b = appendJoined(b, c.Groups, func(b []byte, g membership.Nested) []byte { return appendNestedElement(b, changeGroup(c, g)) })
		b = append(b, ']')
	}
	if len(c.Nicknames) > 0 {
		b = append(b, nicknamesPrefix...)
		b = appendJoined(b, c.Nicknames, appendNicknameJSON)
		b = append(b, ']')
	}
	if len(c.Expiries) > 0 {
		b = append(b, expiriesPrefix...)
		b = appendJoined(b, c.Expiries, appendExpiryJSON)
		b = append(b, ']')
	}
	if c.Account != nil {
		b = append(b, accountPrefix...)
		b = appendAccountJSON(b, *c.Account)
	}
	if c.GroupAttributes != nil {
		b = append(b, attrsPrefix...)
		b = appendGroupAttributesJSON(b, *c.GroupAttributes)
	}
	return b
}

// appendExpiryJSON appends {"uid":…,"expires":…}, "expires" null for a
// membership made permanent.
func appendExpiryJSON(b []byte, e membership.MemberExpiry) []byte {
	b = append(b, UIDPrefix...)
	b = strconv.AppendInt(b, int64(e.UID), 10)
	b = append(b, expiresPrefix...)
	if e.At.IsZero() {
		b = append(b, "null"...)
	} else {
		b = appendChangeTime(b, e.At)
	}
	return append(b, '}')
}

// expiryJSONLen returns len(appendExpiryJSON(nil, e)).
func expiryJSONLen(e membership.MemberExpiry) int {
	n := len(UIDPrefix) + decimalLen(int64(e.UID)) + len(expiresPrefix) + 1 // }
	if e.At.IsZero() {
		return n + len("null")
	}
	return n + changeTimeLen(e.At)
}

// joinedLen returns len(appendJoined(nil, items, …)), each item itemLen
// long.
func joinedLen[T any](items []T, itemLen func(T) int) int {
	n := max(len(items)-1, 0) // commas
	for _, item := range items {
		n += itemLen(item)
	}
	return n
}

// appendJoined appends items, each by appendItem, with commas between
// them.
func appendJoined[T any](b []byte, items []T, appendItem func([]byte, T) []byte) []byte {
	for i, item := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendItem(b, item)
	}
	return b
}

// ListMark is a member's uid and the offset of its object in an encoded list.
type ListMark struct {
	UID    membership.UID
	Offset int
}

// MarkEvery is how many members lie between two marks: a suffix's start is
// found by a binary search of the marks and a scan of at most this many
// objects.
const MarkEvery = 64
