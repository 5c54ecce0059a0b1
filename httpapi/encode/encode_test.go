package encode

import (
	"bytes"
	"encoding/json"
	"iter"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
)

// stdlibJSON encodes v as encoding/json does with HTML escaping off, which
// is what the service promises.
func stdlibJSON(t testing.TB, v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// wireMember is a member as the API sends it, in the form encoding/json
// gives a struct with these tags.
type wireMember struct {
	UID      membership.UID `json:"uid"`
	Nickname string         `json:"nickname"`
	// Expires is there only for a member with an expiry: RFC 3339 in UTC,
	// three digits of milliseconds always, as the feed's time.
	Expires string `json:"expires,omitempty"`
}

func wireMembers(ms []membership.Member) []wireMember {
	out := make([]wireMember, len(ms))
	for i, m := range ms {
		out[i] = wireMember{UID: m.UID, Nickname: m.Nickname}
		if !m.Expires.IsZero() {
			out[i].Expires = m.Expires.UTC().Format("2006-01-02T15:04:05.000Z07:00")
		}
	}
	return out
}

var stringClasses = []struct {
	name string
	s    string
}{
	{"empty", ""},
	{"ASCII", "Alice Smith"},
	{"quote and backslash", `a"b\c`},
	{"named control escapes", "\b\f\n\r\t"},
	{"other control characters", "\x00\x01\x1f\x0b"},
	{"DEL is not escaped", "\x7f"},
	{"HTML characters stay literal", "<b>&amp;</b>"},
	{"line and paragraph separators", "a\u2028b\u2029c"},
	{"two-byte UTF-8", "Zoë é ß"},
	{"three-byte UTF-8", "日本語 €"},
	{"four-byte UTF-8", "😀 𝄞"},
	{"U+FFFD itself", "\ufffd"},
	{"invalid byte", "a\xffb"},
	{"truncated sequence", "ab\xe6\x97"},
	{"overlong encoding", "\xc0\xaf"},
	{"encoded surrogate", "\xed\xa0\x80"},
	{"everything at once", "\"\\\n\x00<>&\u2028\u2029é😀\xff"},
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, tt := range stringClasses {
		t.Run(tt.name, func(t *testing.T) {
			want := stdlibJSON(t, tt.s)
			got := AppendJSONString(nil, tt.s)
			assert.Equal(t, string(want), string(got))
			assert.Equal(t, len(got), jsonStringLen(tt.s))
		})
	}
}

func TestEncodeMembersMatchesEncodingJSON(t *testing.T) {
	tests := []struct {
		name    string
		members []membership.Member
	}{
		{"none", []membership.Member{}},
		{"one", []membership.Member{{UID: 1}}},
		{"extremes", []membership.Member{{UID: 1, Nickname: ""}, {UID: 9, Nickname: "x"}, {UID: 10}, {UID: math.MaxInt64, Nickname: "max"}}},
		{"with expiries", []membership.Member{
			{UID: 1, Nickname: "a"},
			{UID: 2, Expires: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
			{UID: 3, Nickname: "c\"", Expires: time.Date(2036, 1, 2, 3, 4, 5, 678e6, time.FixedZone("x", 3600))},
			{UID: math.MaxInt64, Expires: time.UnixMilli(1).UTC()},
		}},
		{"every string class", func() []membership.Member {
			var ms []membership.Member
			for i, c := range stringClasses {
				ms = append(ms, membership.Member{UID: membership.UID(i + 1), Nickname: c.s})
			}
			return ms
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := encodeMembers(slices.Values(tt.members))
			assert.Equal(t, string(stdlibJSON(t, wireMembers(tt.members))), string(got))
			assert.Equal(t, len(got), cap(got), "the body is allocated at its exact size")
		})
	}
}

func TestDecimalLen(t *testing.T) {
	for _, n := range []int64{0, 1, 9, 10, 99, 100, 999999999, 1000000000, math.MaxInt64, -1, -10, math.MinInt64} {
		assert.Equal(t, len(json.Number(stdlibJSON(t, n))), decimalLen(n), "decimalLen(%d)", n)
	}
}

// FuzzEncodeMembers checks the encoder against encoding/json on any nickname
// and uid, valid UTF-8 or not.
func FuzzEncodeMembers(f *testing.F) {
	for _, c := range stringClasses {
		f.Add(int64(1), c.s, int64(0))
	}
	f.Add(int64(math.MaxInt64), "max", int64(0))
	f.Add(int64(7), "x", int64(1796083200000))
	f.Fuzz(func(t *testing.T, uid int64, nickname string, expires int64) {
		if uid < 1 {
			uid = -(uid + 1) + 1 // any int64 maps to a valid uid
		}
		members := []membership.Member{{UID: membership.UID(uid), Nickname: nickname}, {UID: 1, Nickname: nickname + "x"}}
		if expires != 0 { // the years a store keeps: 1970 to 9999
			const last = 253402300799999
			members[1].Expires = time.UnixMilli(1 + (expires%last+last)%last).UTC()
		}
		got := encodeMembers(slices.Values(members))
		want := stdlibJSON(t, wireMembers(members))
		if !bytes.Equal(want, got) {
			t.Fatalf("encodeMembers(%d, %q):\n got %s\nwant %s", uid, nickname, got, want)
		}
		if len(got) != cap(got) {
			t.Fatalf("encodeMembers(%d, %q): measured %d bytes, wrote %d", uid, nickname, cap(got), len(got))
		}
	})
}

// encodeMembers returns the JSON array of members, [{"uid":…,"nickname":…},…],
// in a buffer of exactly its size: a first pass measures, a second writes,
// so that a list of a million members is held once and never regrown.
func encodeMembers(members iter.Seq[membership.Member]) []byte {
	size, _ := MembersJSONLen(members)
	return AppendMembers(make([]byte, 0, size), members, nil)
}

// The lengths measured before a reply is built are the lengths built, for
// every op of the feed, with and without a time and an actor, and for the
// groups.
func TestMeasuredLengthsAreTheEncodedOnes(t *testing.T) {
	changes := []membership.Change{
		{Revision: 1, Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{1, 22}, Nicknames: []membership.Member{{UID: 1, Nickname: "Ann \"A\""}}},
		{Revision: 22, Op: membership.OpRemove, GroupID: "g\u2028", UIDs: []membership.UID{1}, Nicknames: []membership.Member{{UID: 1}}},
		{Revision: 333, Op: membership.OpReplace, GroupID: "team/a", UIDs: []membership.UID{}},
		{Revision: 4444, Op: membership.OpReplace, GroupID: "h", UIDs: []membership.UID{5, 9223372036854775807}, Nicknames: []membership.Member{{UID: 5, Nickname: "é"}}},
		{Revision: 55555, Op: membership.OpDeleteGroup, GroupID: "a&b"},
		{Revision: 666666, Op: membership.OpRemoveUser, UIDs: []membership.UID{7}},
		{Revision: 7777777, Op: membership.OpBatch, Changes: []membership.Change{
			{Op: membership.OpRemove, GroupID: "from", UIDs: []membership.UID{3}},
			{Op: membership.OpAdd, GroupID: "to", UIDs: []membership.UID{3, 4}, Nicknames: []membership.Member{{UID: 3, Nickname: "Cy"}}},
			{Op: membership.OpDeleteGroup, GroupID: "x"},
		}},
		{Revision: 8, Op: membership.OpBatch, Changes: []membership.Change{}},
		{Revision: 9, Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{1}, Expiries: []membership.MemberExpiry{
			{UID: 1, At: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}, {UID: 9223372036854775807}}},
		{Revision: 10, Op: membership.OpReplace, GroupID: "g", UIDs: []membership.UID{1, 2}, Nicknames: []membership.Member{{UID: 2, Nickname: "B"}},
			Expiries: []membership.MemberExpiry{{UID: 2, At: time.UnixMilli(1796083200123).UTC()}}},
		{Revision: 11, Op: membership.OpExpire, GroupID: "g", UIDs: []membership.UID{1, 2}},
		{Revision: 12, Op: membership.OpBatch, Changes: []membership.Change{
			{Op: membership.OpAdd, GroupID: "to", UIDs: []membership.UID{3}, Expiries: []membership.MemberExpiry{{UID: 3}}},
		}},
		{Revision: 13, Op: membership.OpAddGroups, GroupID: "eng", Groups: []membership.Nested{
			{GroupID: "back\"end"}, {GroupID: "été", Expires: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}}},
		{Revision: 14, Op: membership.OpReplaceGroups, GroupID: "eng", Groups: []membership.Nested{}},
		{Revision: 15, Op: membership.OpRemoveGroups, GroupID: "eng", Groups: []membership.Nested{{GroupID: "a", Expires: time.UnixMilli(1)}}},
		{Revision: 16, Op: membership.OpExpireGroups, GroupID: "eng", Groups: []membership.Nested{{GroupID: "a"}, {GroupID: "b"}}},
		{Revision: 17, Op: membership.OpBatch, Changes: []membership.Change{
			{Op: membership.OpReplaceGroups, GroupID: "to", Groups: []membership.Nested{{GroupID: "x", Expires: time.UnixMilli(1796083200123).UTC()}}},
		}},
		{Revision: 18, Op: membership.OpSetUser, UIDs: []membership.UID{42}, Account: &account.Account{UserName: "ann\"@example.com",
			ExternalID: "00u\u2028", DisplayName: "Ann", GivenName: "Ann", FamilyName: "é", Email: "ann@example.com", Active: true}},
		{Revision: 19, Op: membership.OpSetUser, UIDs: []membership.UID{9223372036854775807}, Account: &account.Account{UserName: "x"}},
		{Revision: 20, Op: membership.OpDeleteUser, UIDs: []membership.UID{42}},
		{Revision: 21, Op: membership.OpSetGroup, GroupID: "admins", GroupAttributes: &account.GroupAttributes{DisplayName: "Admins \"A\"", ExternalID: "x"}},
		{Revision: 22, Op: membership.OpBatch, Changes: []membership.Change{
			{Op: membership.OpSetGroup, GroupID: "g", GroupAttributes: &account.GroupAttributes{DisplayName: "G"}},
			{Op: membership.OpAdd, GroupID: "g", UIDs: []membership.UID{1}},
		}},
	}
	for _, c := range slices.Clone(changes) { // each again with a time, an actor, a principal, and all of them
		at := time.Date(2026, 11, 24, 23, 59, 1, 123e6, time.UTC)
		c.Time = at
		changes = append(changes, c)
		c.Time, c.Actor = time.Time{}, 9223372036854775807
		changes = append(changes, c)
		c.Actor, c.Principal = 0, "sync-job"
		changes = append(changes, c)
		c.Time, c.Actor, c.Principal = at, 1, "o"
		changes = append(changes, c)
	}
	for _, c := range changes {
		b := AppendChange(nil, c)
		assert.Equal(t, len(b), changeJSONLen(c), "%s", b)
		assert.True(t, json.Valid(b), "%s", b)
	}
	n, size := ChangesJSONLen(changes, 1<<20)
	assert.Equal(t, len(changes), n)
	assert.Equal(t, len(AppendChanges(nil, changes)), size)

	for _, groups := range [][]membership.GroupSize{nil, {{ID: "a", Members: 1}}, {{ID: "a\"b", Members: 10}, {ID: "été", Members: 12345}},
		{{ID: "a", Subgroups: 3}, {ID: "b", Members: 2, Subgroups: 12345}}} {
		b := AppendGroups(nil, slices.Values(groups))
		assert.Equal(t, len(b), GroupsJSONLen(slices.Values(groups)), "%s", b)
		assert.True(t, json.Valid(b), "%s", b)
	}
	for _, groups := range [][]membership.Nested{nil, {{GroupID: "a"}}, {{GroupID: "a\u2028\"", Expires: time.UnixMilli(1796083200123)}, {GroupID: "b"}}} {
		b := AppendNested(nil, slices.Values(groups))
		assert.Equal(t, len(b), NestedJSONLen(slices.Values(groups)), "%s", b)
		assert.True(t, json.Valid(b), "%s", b)
	}
}

func TestNestingChangesAsTheFeedSendsThem(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		c    membership.Change
		want string
	}{
		{membership.Change{Revision: 1, Op: membership.OpAddGroups, GroupID: "eng", Groups: []membership.Nested{{GroupID: "a"}, {GroupID: "b", Expires: at}}},
			`{"rev":1,"op":"add_groups","group":"eng","groups":[{"group":"a"},{"group":"b","expires":"2026-12-01T00:00:00.000Z"}]}`},
		{membership.Change{Revision: 2, Op: membership.OpReplaceGroups, GroupID: "eng"},
			`{"rev":2,"op":"replace_groups","group":"eng","groups":[]}`},
		{membership.Change{Revision: 3, Op: membership.OpRemoveGroups, GroupID: "eng", Groups: []membership.Nested{{GroupID: "b", Expires: at}}},
			`{"rev":3,"op":"remove_groups","group":"eng","groups":[{"group":"b"}]}`},
		{membership.Change{Revision: 4, Op: membership.OpExpireGroups, GroupID: "eng", Time: at, Groups: []membership.Nested{{GroupID: "b", Expires: at}}},
			`{"rev":4,"op":"expire_groups","time":"2026-12-01T00:00:00.000Z","group":"eng","groups":[{"group":"b"}]}`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, string(AppendChange(nil, tt.c)))
	}
}

func TestDirectoryChangesAsTheFeedSendsThem(t *testing.T) {
	tests := []struct {
		c    membership.Change
		want string
	}{
		{membership.Change{Revision: 1, Op: membership.OpSetUser, UIDs: []membership.UID{42}, Account: &account.Account{UserName: "ann", DisplayName: "Ann", Active: true}},
			`{"rev":1,"op":"set_user","uids":[42],"account":{"userName":"ann","externalId":"","displayName":"Ann","givenName":"","familyName":"","email":"","active":true}}`},
		{membership.Change{Revision: 2, Op: membership.OpDeleteUser, Actor: 7, UIDs: []membership.UID{42}},
			`{"rev":2,"op":"delete_user","actor":7,"uids":[42]}`},
		{membership.Change{Revision: 3, Op: membership.OpSetGroup, GroupID: "g", GroupAttributes: &account.GroupAttributes{DisplayName: "Gee", ExternalID: "x"}},
			`{"rev":3,"op":"set_group","group":"g","attributes":{"displayName":"Gee","externalId":"x"}}`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, string(AppendChange(nil, tt.c)))
	}
}

// wireChange is a change as the feed sends it, in the form encoding/json
// gives a struct with these tags (the fields in the feed's order).
type wireChange struct {
	Rev       membership.Revision `json:"rev"`
	Op        membership.Op       `json:"op"`
	Time      string              `json:"time,omitempty"`
	Actor     membership.UID      `json:"actor,omitempty"`
	Principal string              `json:"principal,omitempty"`
	Group     *string             `json:"group,omitempty"`
	UIDs      *[]membership.UID   `json:"uids,omitempty"`
	Nicknames []wireMember        `json:"nicknames,omitempty"`
	Expiries  []wireExpiry        `json:"expiries,omitempty"`
}

// wireExpiry is an element of a change's expiries: expires is null for a
// membership made permanent.
type wireExpiry struct {
	UID     membership.UID `json:"uid"`
	Expires *string        `json:"expires"`
}

func wireChangeOf(c membership.Change) wireChange {
	w := wireChange{Rev: c.Revision, Op: c.Op, Actor: c.Actor, Principal: c.Principal}
	if !c.Time.IsZero() {
		w.Time = c.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00") // RFC 3339, three digits always
	}
	if c.Op != membership.OpRemoveUser {
		w.Group = &c.GroupID
	}
	if c.Op != membership.OpDeleteGroup {
		uids := c.UIDs
		if uids == nil {
			uids = []membership.UID{}
		}
		w.UIDs = &uids
	}
	if len(c.Nicknames) > 0 {
		w.Nicknames = wireMembers(c.Nicknames)
	}
	for _, e := range c.Expiries {
		we := wireExpiry{UID: e.UID}
		if !e.At.IsZero() {
			at := e.At.UTC().Format("2006-01-02T15:04:05.000Z07:00")
			we.Expires = &at
		}
		w.Expiries = append(w.Expiries, we)
	}
	return w
}

// FuzzEncodeChange checks the feed's encoder against encoding/json, and
// its measure against what it writes, on any time, actor, group and
// nickname, and any principal (the service's are plainer); the time
// against RFC 3339 as time.Parse reads it.
func FuzzEncodeChange(f *testing.F) {
	f.Add(uint64(1), int64(1795996741123), int64(7), "sync-job", "g", "Ann", uint8(0))
	f.Add(uint64(math.MaxUint64), int64(0), int64(math.MaxInt64), "", "a\u2028", "\xff", uint8(3))
	f.Add(uint64(2), int64(-62135596800000), int64(0), "a\"<b", "", "", uint8(4))
	f.Fuzz(func(t *testing.T, rev uint64, ms, actor int64, principal, group, nickname string, op uint8) {
		ops := []membership.Op{membership.OpAdd, membership.OpRemove, membership.OpReplace, membership.OpDeleteGroup, membership.OpRemoveUser, membership.OpExpire}
		c := membership.Change{Revision: membership.Revision(rev), Op: ops[int(op)%len(ops)], GroupID: group, Actor: membership.UID(max(actor, 0)),
			Principal: principal}
		// The years a store's clock gives: 1 to 9999.
		const first, last = -62135596800000, 253402300799999
		c.Time = time.UnixMilli(first + (ms%(last-first+1)+(last-first+1))%(last-first+1)).UTC()
		switch c.Op {
		case membership.OpRemoveUser:
			c.GroupID, c.UIDs = "", []membership.UID{5}
		case membership.OpAdd, membership.OpReplace:
			c.UIDs, c.Nicknames = []membership.UID{5}, []membership.Member{{UID: 5, Nickname: nickname}}
			c.Expiries = []membership.MemberExpiry{{UID: 5, At: c.Time.Add(time.Hour)}, {UID: 6}}
		case membership.OpRemove, membership.OpExpire:
			c.UIDs = []membership.UID{5, 6}
		}
		got := AppendChange(nil, c)
		if want := stdlibJSON(t, wireChangeOf(c)); !bytes.Equal(want, got) {
			t.Fatalf("appendChange(%+v):\n got %s\nwant %s", c, got, want)
		}
		if n := changeJSONLen(c); n != len(got) {
			t.Fatalf("appendChange(%+v): measured %d bytes, wrote %d", c, n, len(got))
		}
		if !c.Time.IsZero() {
			var decoded struct{ Time time.Time }
			if err := json.Unmarshal(got, &decoded); err != nil || !decoded.Time.Equal(c.Time) {
				t.Fatalf("appendChange(%+v): its time reads back as %s (%v)", c, decoded.Time, err)
			}
		}
	})
}
