package record

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
	"example.com/groupmembership/membership/scope"
)

// writes returns one write of every op, each without a precondition and
// with each kind of one.
func writes() map[string]*Write {
	users := []membership.User{{UID: 3, Nickname: "Ann", HasNickname: true}, {UID: 9223372036854775807}, {UID: 1, HasNickname: true}}
	plain := map[string]*Write{
		"add":              {Op: membership.OpAdd, GroupID: "g", Users: users},
		"remove":           {Op: membership.OpRemove, GroupID: "team/b", UIDs: []membership.UID{9, 2, 9223372036854775807}},
		"replace":          {Op: membership.OpReplace, GroupID: "g", Users: users},
		"replace by none":  {Op: membership.OpReplace, GroupID: "g"},
		"delete_group":     {Op: membership.OpDeleteGroup, GroupID: "g"},
		"remove_user":      {Op: membership.OpRemoveUser, UIDs: []membership.UID{9223372036854775807}},
		"add, no nickname": {Op: membership.OpAdd, GroupID: "ü", Users: []membership.User{{UID: 1}}},
		"add with expiries": {Op: membership.OpAdd, GroupID: "g", Users: []membership.User{
			{UID: 3, Nickname: "Ann", HasNickname: true, Expiry: membership.Expiry{Set: true, At: time.UnixMilli(1764028800123).UTC()}},
			{UID: 9223372036854775807, Expiry: membership.Expiry{Set: true}}, {UID: 1}, {UID: 2, Expiry: membership.Expiry{Set: true, At: time.UnixMilli(1).UTC()}}}},
		"replace with expiries": {Op: membership.OpReplace, GroupID: "g", Users: []membership.User{
			{UID: 3, Expiry: membership.Expiry{Set: true, At: time.UnixMilli(math.MaxInt64).UTC()}}}},
		"expire":                     {Op: membership.OpExpire, GroupID: "g", UIDs: []membership.UID{9, 2, 9223372036854775807}, AsOf: time.UnixMilli(1764028800123).UTC()},
		"expire, before 1970":        {Op: membership.OpExpire, GroupID: "g", UIDs: []membership.UID{1}, AsOf: time.UnixMilli(-1).UTC()},
		"expire as of the zero time": {Op: membership.OpExpire, GroupID: "g", UIDs: []membership.UID{1}, AsOf: time.UnixMilli(time.Time{}.UnixMilli()).UTC()},
		"add_groups":                 {Op: membership.OpAddGroups, GroupID: "all-staff", Subgroups: subgroups, MaxDepth: 32},
		"add_groups, no bound":       {Op: membership.OpAddGroups, GroupID: "g", Subgroups: []membership.Subgroup{{GroupID: "h"}}},
		"add_groups, largest bound":  {Op: membership.OpAddGroups, GroupID: "g", Subgroups: subgroups, MaxDepth: membership.MaxMaxDepth},
		"add_groups, largest bounds": {Op: membership.OpAddGroups, GroupID: "g", Subgroups: subgroups, MaxDepth: membership.MaxMaxDepth, MaxAncestors: membership.MaxMaxAncestors},
		"add_groups, ancestors only": {Op: membership.OpAddGroups, GroupID: "g", Subgroups: subgroups, MaxAncestors: 1000},
		"remove_groups":              {Op: membership.OpRemoveGroups, GroupID: "g", Subgroups: []membership.Subgroup{{GroupID: "h"}, {GroupID: "ü"}}},
		"remove_groups of none":      {Op: membership.OpRemoveGroups, GroupID: "g"},
		"replace_groups":             {Op: membership.OpReplaceGroups, GroupID: "g", Subgroups: subgroups, MaxDepth: 1},
		"replace_groups by none":     {Op: membership.OpReplaceGroups, GroupID: "g", MaxDepth: 16},
		"expire_groups":              {Op: membership.OpExpireGroups, GroupID: "g", Subgroups: []membership.Subgroup{{GroupID: "h"}, {GroupID: "i"}}, AsOf: time.UnixMilli(1764028800123).UTC()},
		"expire_groups, before 1970": {Op: membership.OpExpireGroups, GroupID: "g", Subgroups: []membership.Subgroup{{GroupID: "h"}}, AsOf: time.UnixMilli(-1).UTC()},
		"set_user": {Op: membership.OpSetUser, UIDs: []membership.UID{9223372036854775807}, Account: &account.Account{UserName: "alice@example.com",
			ExternalID: "00u1", DisplayName: "Alice", GivenName: "Alice", FamilyName: "Liddell", Email: "alice@example.com", Active: true}},
		"set_user, inactive":        {Op: membership.OpSetUser, UIDs: []membership.UID{1}, Account: &account.Account{UserName: "ü"}},
		"delete_user":               {Op: membership.OpDeleteUser, UIDs: []membership.UID{5}},
		"set_group":                 {Op: membership.OpSetGroup, GroupID: "g", Group: &account.GroupAttributes{DisplayName: "Admins", ExternalID: "x"}},
		"set_group, no external id": {Op: membership.OpSetGroup, GroupID: "ü", Group: &account.GroupAttributes{DisplayName: "ü"}},
	}
	conds := map[string]membership.Precondition{
		"if-match":          {Revisions: []membership.Revision{7}},
		"if-match many":     {Revisions: []membership.Revision{1 << 62, 7, 300}},
		"if-match *":        {Exists: true},
		"if-none-match *":   {Empty: true},
		"all of them":       {Revisions: []membership.Revision{5}, Exists: true, Empty: true},
		"if-match and *":    {Revisions: []membership.Revision{5, 6}, Exists: true},
		"if-none-match and": {Revisions: []membership.Revision{5}, Empty: true},
	}
	stamps := map[string]func(*Write){
		"stamped":                func(c *Write) { c.Time, c.Actor = time.Date(2026, 11, 24, 23, 59, 1, 123e6, time.UTC), 7 },
		"stamped, no actor":      func(c *Write) { c.Time = time.UnixMilli(1).UTC() },
		"stamped, largest uid":   func(c *Write) { c.Time, c.Actor = time.UnixMilli(1<<50).UTC(), 9223372036854775807 },
		"stamped, before 1970":   func(c *Write) { c.Time = time.UnixMilli(-1).UTC() },
		"stamped, an actor only": func(c *Write) { c.Actor = 3 },
		"stamped, a principal":   func(c *Write) { c.Time, c.Actor, c.Principal = time.UnixMilli(1<<41).UTC(), 7, "sync-job" },
		"stamped, a principal only": func(c *Write) {
			c.Principal = string(bytes.Repeat([]byte{'p'}, scope.MaxPrincipalBytes))
		},
	}
	all := map[string]*Write{}
	for name, e := range plain {
		all[name] = e
		for cname, cond := range conds {
			c := *e
			c.If = cond
			all[name+" "+cname] = &c
			for sname, stamp := range stamps {
				stamped := c
				stamp(&stamped)
				all[name+" "+cname+" "+sname] = &stamped
			}
		}
		for sname, stamp := range stamps {
			c := *e
			stamp(&c)
			all[name+" "+sname] = &c
		}
		keyed := *e
		keyed.Time, keyed.Idem = time.UnixMilli(1764028800123).UTC(), testIdem("retry-1")
		all[name+" keyed"] = &keyed
		keyed.If, keyed.Actor = conds["all of them"], 9
		all[name+" keyed, with a precondition and an actor"] = &keyed
		keyed.Principal = "ops@team-a"
		all[name+" keyed, with a precondition, an actor and a principal"] = &keyed
	}
	return all
}

// subgroups are the subgroups of a nesting write, with each kind of
// expiry.
var subgroups = []membership.Subgroup{{GroupID: "backend"}, {GroupID: "ü/x", Expiry: membership.Expiry{Set: true, At: time.UnixMilli(1764028800123).UTC()}},
	{GroupID: "p", Expiry: membership.Expiry{Set: true}}, {GroupID: string(bytes.Repeat([]byte{'g'}, membership.MaxGroupIDBytes))}}

// testIdem returns an Idempotency of key, with a fingerprint of its own.
func testIdem(key string) membership.Idempotency {
	return membership.Idempotency{Key: key, Fingerprint: membership.Fingerprint{0: byte(len(key)), 15: 0xff}}
}

// A key is written after the stamp, flagged in the op byte: the key, then
// its 16-byte fingerprint.
func TestWriteKey(t *testing.T) {
	e := &Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{9}, Time: time.UnixMilli(1000).UTC(), Actor: 300,
		Idem: membership.Idempotency{Key: "k", Fingerprint: membership.Fingerprint{15: 7}}}
	payload := []byte{0x62, 1, 'g', 1, 9, 0xd0, 0x0f, 0xac, 0x02, 1, 'k', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7}
	assert.Equal(t, payload, appendWrite(nil, e))
	got, err := decodeWrite(payload)
	require.NoError(t, err)
	assert.Equal(t, e, got)
	assert.LessOrEqual(t, int64(len(payload)), e.Cost(), "the cost counts the key")
}

// A principal is written after the stamp, before the key, flagged 0x10
// in the op byte.
func TestWritePrincipal(t *testing.T) {
	e := &Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{9}, Time: time.UnixMilli(1000).UTC(), Actor: 300, Principal: "ops"}
	payload := []byte{0x52, 1, 'g', 1, 9, 0xd0, 0x0f, 0xac, 0x02, 3, 'o', 'p', 's'}
	assert.Equal(t, payload, appendWrite(nil, e))
	got, err := decodeWrite(payload)
	require.NoError(t, err)
	assert.Equal(t, e, got)

	e.Idem = membership.Idempotency{Key: "k", Fingerprint: membership.Fingerprint{15: 7}}
	payload = append([]byte{0x72, 1, 'g', 1, 9, 0xd0, 0x0f, 0xac, 0x02, 3, 'o', 'p', 's', 1, 'k'}, fingerprint7...)
	assert.Equal(t, payload, appendWrite(nil, e))
	got, err = decodeWrite(payload)
	require.NoError(t, err)
	assert.Equal(t, e, got)
	assert.LessOrEqual(t, int64(len(payload)), e.Cost(), "the cost counts the record")
}

// A stamp is written after the rest, flagged in the op byte.
func TestWriteStamp(t *testing.T) {
	e := &Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{9}, Time: time.UnixMilli(1000).UTC(), Actor: 300}
	payload := []byte{0x42, 1, 'g', 1, 9, 0xd0, 0x0f, 0xac, 0x02}
	assert.Equal(t, payload, appendWrite(nil, e))
	got, err := decodeWrite(payload)
	require.NoError(t, err)
	assert.Equal(t, e, got)
}

func TestWriteRoundTrip(t *testing.T) {
	for name, e := range writes() {
		t.Run(name, func(t *testing.T) {
			payload := appendWrite(nil, e)
			got, err := decodeWrite(payload)
			require.NoError(t, err)
			assert.Equal(t, e, got)
			assert.LessOrEqual(t, int64(len(payload)), e.Cost(), "the cost counts the record")
		})
	}
}

// A user's expiry is writecodec's: flag 2, then milliseconds since 1970,
// 0 for a membership made permanent. An expire record (op 7) is laid out
// as a remove, then the time its expiries were due as of (milliseconds
// since 1970, signed), then the stamp the committer gives every record.
func TestWriteExpiryLayout(t *testing.T) {
	add := &Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{
		{UID: 3, Expiry: membership.Expiry{Set: true, At: time.UnixMilli(1000).UTC()}}, {UID: 4, Expiry: membership.Expiry{Set: true}}}}
	assert.Equal(t, []byte{1, 1, 'g', 2, 3, 2, 0xe8, 0x07, 4, 2, 0}, appendWrite(nil, add))
	expire := &Write{Op: membership.OpExpire, GroupID: "g", UIDs: []membership.UID{10, 11}, AsOf: time.UnixMilli(1000).UTC(), Time: time.UnixMilli(1).UTC()}
	payload := []byte{0x47, 1, 'g', 2, 10, 11, 0xd0, 0x0f, 2, 0}
	assert.Equal(t, payload, appendWrite(nil, expire))
	got, err := Decode(payload)
	require.NoError(t, err)
	assert.Equal(t, expire, got)
}

// A nesting write is its op byte (8 add_groups, 9 remove_groups, 10
// replace_groups, 11 expire_groups), the group id, the subgroups as
// writecodec lays them out, then an add's or a replace's bound on depth,
// or an expire's time, then the stamp.
func TestWriteNestingLayout(t *testing.T) {
	at := membership.Expiry{Set: true, At: time.UnixMilli(1000).UTC()}
	for _, tt := range []struct {
		w       *Write
		payload []byte
	}{
		{&Write{Op: membership.OpAddGroups, GroupID: "g", Subgroups: []membership.Subgroup{{GroupID: "h", Expiry: at}, {GroupID: "i"}}, MaxDepth: 32, Time: time.UnixMilli(1).UTC()},
			[]byte{0x48, 1, 'g', 2, 1, 'h', 1, 0xe8, 0x07, 1, 'i', 0, 32, 2, 0}},
		{&Write{Op: membership.OpRemoveGroups, GroupID: "g", Subgroups: []membership.Subgroup{{GroupID: "h"}}, Time: time.UnixMilli(1).UTC(), Actor: 5},
			[]byte{0x49, 1, 'g', 1, 1, 'h', 0, 2, 5}},
		{&Write{Op: membership.OpReplaceGroups, GroupID: "g", Subgroups: []membership.Subgroup{{GroupID: "h", Expiry: membership.Expiry{Set: true}}}, If: membership.Precondition{Empty: true}},
			[]byte{0x8a, 1, 'g', 1, 1, 'h', 1, 0, 0, 2, 0}},
		{&Write{Op: membership.OpExpireGroups, GroupID: "g", Subgroups: []membership.Subgroup{{GroupID: "h"}}, AsOf: time.UnixMilli(1000).UTC(), Time: time.UnixMilli(1).UTC()},
			[]byte{0x4b, 1, 'g', 1, 1, 'h', 0, 0xd0, 0x0f, 2, 0}},
	} {
		t.Run(string(tt.w.Op), func(t *testing.T) {
			assert.Equal(t, tt.payload, appendWrite(nil, tt.w))
			got, err := Decode(tt.payload)
			require.NoError(t, err)
			assert.Equal(t, tt.w, got)
		})
	}
}

// A write of the directory's ops is its op byte (12 set_user, 13
// delete_user, 14 set_group), the group id ("" for a user's), then a
// user's uid (a count of one) and a set_user's account, or a set_group's
// attributes, then the precondition and the stamp.
func TestWriteDirectoryLayout(t *testing.T) {
	for _, tt := range []struct {
		w       *Write
		payload []byte
	}{
		{&Write{Op: membership.OpSetUser, UIDs: []membership.UID{5}, Account: &account.Account{UserName: "u", DisplayName: "D", Active: true},
			If: membership.Precondition{Empty: true}, Time: time.UnixMilli(1).UTC()},
			[]byte{0xcc, 0, 1, 5, 1, 1, 'u', 0, 1, 'D', 0, 0, 0, 2, 0, 2, 0}},
		{&Write{Op: membership.OpDeleteUser, UIDs: []membership.UID{5}, Time: time.UnixMilli(1).UTC(), Actor: 3},
			[]byte{0x4d, 0, 1, 5, 2, 3}},
		{&Write{Op: membership.OpSetGroup, GroupID: "g", Group: &account.GroupAttributes{DisplayName: "A", ExternalID: "x"}, Time: time.UnixMilli(1).UTC()},
			[]byte{0x4e, 1, 'g', 1, 'A', 1, 'x', 2, 0}},
	} {
		t.Run(string(tt.w.Op), func(t *testing.T) {
			assert.Equal(t, tt.payload, appendWrite(nil, tt.w))
			got, err := Decode(tt.payload)
			require.NoError(t, err)
			assert.Equal(t, tt.w, got)
		})
	}
}

// SetTime turns the TTLs of a nesting write's subgroups into times as of
// the commit, as it does a user's, in a write and in a batch's writes.
func TestSetTimeResolvesSubgroupTTLs(t *testing.T) {
	commit := time.UnixMilli(1764028800000).UTC()
	groups := func() []membership.Subgroup {
		return []membership.Subgroup{{GroupID: "h", Expiry: membership.Expiry{Set: true, TTL: time.Minute}}, {GroupID: "i"}}
	}
	want := []membership.Subgroup{{GroupID: "h", Expiry: membership.Expiry{Set: true, At: commit.Add(time.Minute)}}, {GroupID: "i"}}
	w := &Write{Op: membership.OpAddGroups, GroupID: "g", Subgroups: groups()}
	w.SetTime(commit)
	assert.Equal(t, want, w.Subgroups)
	got, err := Decode(w.Append(nil))
	require.NoError(t, err)
	assert.Equal(t, want, got.(*Write).Subgroups)

	b := &Batch{Writes: []membership.Write{{Op: membership.OpReplaceGroups, GroupID: "g", Subgroups: groups()}}}
	b.SetTime(commit)
	assert.Equal(t, want, b.Writes[0].Subgroups)
	assert.NotPanics(t, func() { b.Append(nil) })
}

// The records of the first two ops are as every earlier build wrote them,
// so that old logs replay, and a change without a precondition is still
// written so.
func TestWriteAddAndRemoveAreAsBefore(t *testing.T) {
	for _, tt := range []struct {
		name    string
		payload []byte
		want    *Write
	}{
		{
			name:    "add",
			payload: []byte{1, 1, 'g', 3, 3, 1, 3, 'A', 'n', 'n', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 1, 1, 0},
			want:    &Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 3, Nickname: "Ann", HasNickname: true}, {UID: 9223372036854775807}, {UID: 1, HasNickname: true}}},
		},
		{
			name:    "remove",
			payload: []byte{2, 1, 'g', 2, 9, 0x80, 0x01},
			want:    &Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{9, 128}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeWrite(tt.payload)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.payload, appendWrite(nil, tt.want))
		})
	}
}

func TestWriteRefusesWhatNoBuildWrote(t *testing.T) {
	for _, tt := range []struct {
		name    string
		payload []byte
	}{
		{"empty", nil},
		{"unknown op", []byte{15, 1, 'g', 0}},
		{"unknown op with a precondition", []byte{0x8f, 1, 'g', 0, 0, 0}},
		{"an op past the flags", []byte{31, 1, 'g', 0}},
		{"op 0", []byte{0, 1, 'g', 0}},
		{"trailing bytes", []byte{2, 1, 'g', 1, 9, 0}},
		{"remove_user of two uids", []byte{5, 0, 2, 1, 2}},
		{"remove_user of none", []byte{5, 0, 0}},
		{"remove_user in a group", []byte{5, 1, 'g', 1, 1}},
		{"delete_group with a count", []byte{4, 1, 'g', 0}},
		{"a precondition cut short", []byte{0x84, 1, 'g', 1}},
		{"unknown precondition flags", []byte{0x84, 1, 'g', 4, 0}},
		{"more revisions than the record holds", []byte{0x84, 1, 'g', 0, 100, 1}},
		{"an empty precondition", []byte{0x84, 1, 'g', 0, 0}},
		{"a nickname flag of 2", []byte{1, 1, 'g', 1, 1, 2}},
		{"a stamp cut short", []byte{0x42, 1, 'g', 1, 9, 0xd0}},
		{"a stamp with no actor", []byte{0x42, 1, 'g', 1, 9, 2}},
		{"an actor beyond the uids", []byte{0x42, 1, 'g', 1, 9, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"a key without a stamp", append([]byte{0x22, 1, 'g', 1, 9, 1, 'k'}, fingerprint7...)},
		{"an empty key", append([]byte{0x62, 1, 'g', 1, 9, 2, 0, 0}, fingerprint7...)},
		{"a key with a control character", append([]byte{0x62, 1, 'g', 1, 9, 2, 0, 1, '\n'}, fingerprint7...)},
		{"a key too long", append(append([]byte{0x64, 1, 'g', 2, 0, 0x80, 0x02}, bytes.Repeat([]byte{'k'}, 256)...), fingerprint7...)},
		{"a fingerprint cut short", []byte{0x62, 1, 'g', 1, 9, 2, 0, 1, 'k', 1, 2, 3}},
		{"a fingerprint of zeros", append([]byte{0x62, 1, 'g', 1, 9, 2, 0, 1, 'k'}, make([]byte, 16)...)},
		{"a principal without a stamp", []byte{0x12, 1, 'g', 1, 9, 3, 'o', 'p', 's'}},
		{"an empty principal", []byte{0x52, 1, 'g', 1, 9, 2, 0, 0}},
		{"a principal with a space", []byte{0x52, 1, 'g', 1, 9, 2, 0, 3, 'o', ' ', 's'}},
		{"a principal too long", append([]byte{0x52, 1, 'g', 1, 9, 2, 0, 65}, bytes.Repeat([]byte{'p'}, 65)...)},
		{"a principal cut short", []byte{0x52, 1, 'g', 1, 9, 2, 0, 3, 'o'}},
		{"a batch as a write", []byte{6, 1, 'g', 0}},
		{"an expire with no time", []byte{7, 1, 'g', 1, 9}},
		{"an expire of no uid", []byte{7, 1, 'g', 0, 0}},
		{"an expire of no group", []byte{7, 0, 1, 9, 0}},
		{"an expiry cut short", []byte{1, 1, 'g', 1, 1, 2, 0x80}},
		{"an unknown user flag", []byte{1, 1, 'g', 1, 1, 4}},
		{"add_groups without a bound on depth", []byte{8, 1, 'g', 1, 1, 'h', 0}},
		{"add_groups with a bound past the largest", []byte{8, 1, 'g', 1, 1, 'h', 0, 0xe9, 0x07}},
		{"add_groups with a bound on ancestors past the largest", []byte{8, 1, 'g', 1, 1, 'h', 0, 0x80, 0x90, 0x80, 0x80, 0x08}},
		{"add_groups of no group", []byte{8, 0, 1, 1, 'h', 0, 0}},
		{"add_groups of an empty subgroup", []byte{8, 1, 'g', 1, 0, 0, 0}},
		{"add_groups with an unknown subgroup flag", []byte{8, 1, 'g', 1, 1, 'h', 2, 0}},
		{"replace_groups without a bound", []byte{10, 1, 'g', 0}},
		{"remove_groups with trailing bytes", []byte{9, 1, 'g', 1, 1, 'h', 0, 0}},
		{"remove_groups of no group", []byte{9, 0, 0}},
		{"expire_groups with no time", []byte{11, 1, 'g', 1, 1, 'h', 0}},
		{"expire_groups of no subgroup", []byte{11, 1, 'g', 0, 0}},
		{"expire_groups of no group", []byte{11, 0, 1, 1, 'h', 0, 0}},
		{"set_user of no uid", []byte{12, 0, 0, 1, 1, 'u', 0, 0, 0, 0, 0}},
		{"set_user of two uids", []byte{12, 0, 2, 1, 2, 1, 1, 'u', 0, 0, 0, 0, 0}},
		{"set_user in a group", []byte{12, 1, 'g', 1, 1, 1, 1, 'u', 0, 0, 0, 0, 0}},
		{"set_user with no user name", []byte{12, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0}},
		{"set_user with unknown flags", []byte{12, 0, 1, 1, 2, 1, 'u', 0, 0, 0, 0, 0}},
		{"set_user cut short", []byte{12, 0, 1, 1, 1, 1, 'u', 0, 0}},
		{"set_user with a control character", []byte{12, 0, 1, 1, 1, 1, '\n', 0, 0, 0, 0, 0}},
		{"delete_user of two uids", []byte{13, 0, 2, 1, 2}},
		{"delete_user in a group", []byte{13, 1, 'g', 1, 1}},
		{"set_group of no group", []byte{14, 0, 1, 'A', 0}},
		{"set_group with no display name", []byte{14, 1, 'g', 0, 0}},
		{"set_group cut short", []byte{14, 1, 'g', 1, 'A'}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeWrite(tt.payload)
			assert.Error(t, err)
		})
	}
}

// fingerprint7 is a fingerprint as a record holds it.
var fingerprint7 = []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7}

// FuzzDecodeWrite checks that decoding never panics, and that what it
// accepts is written back as it was read.
func FuzzDecodeWrite(f *testing.F) {
	for _, e := range writes() {
		f.Add(appendWrite(nil, e))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		e, err := decodeWrite(payload)
		if err != nil {
			return
		}
		again, err := decodeWrite(appendWrite(nil, e))
		require.NoError(t, err)
		assert.Equal(t, e, again)
	})
}

// Largest bounds the largest change of every op, precondition
// included, that the request limits allow.
func TestLargestBoundsEveryOp(t *testing.T) {
	const maxUsers = 100
	users := make([]membership.User, maxUsers)
	uids := make([]membership.UID, maxUsers)
	for i := range users {
		nick := string(make([]byte, membership.MaxNicknameBytes))
		users[i] = membership.User{UID: 9223372036854775807 - membership.UID(i), Nickname: nick, HasNickname: true}
		uids[i] = users[i].UID
	}
	revs := make([]membership.Revision, MaxPreconditionRevisions)
	for i := range revs {
		revs[i] = 1<<64 - 1 - membership.Revision(i)
	}
	cond := membership.Precondition{Revisions: revs, Exists: true, Empty: true}
	id := string(make([]byte, membership.MaxGroupIDBytes))
	expiring := slices.Clone(users)
	for i := range expiring {
		expiring[i].Expiry = membership.Expiry{Set: true, At: time.UnixMilli(math.MaxInt64).UTC()} // the longest expiry
	}
	expireUIDs := make([]membership.UID, MaxExpireUIDs)
	for i := range expireUIDs {
		expireUIDs[i] = 9223372036854775807 - membership.UID(i)
	}
	bound := Largest(1<<30, maxUsers, 1)
	for _, e := range []*Write{
		{Op: membership.OpAdd, GroupID: id, Users: users, If: cond},
		{Op: membership.OpAdd, GroupID: id, Users: expiring, If: cond},
		{Op: membership.OpReplace, GroupID: id, Users: expiring, If: cond},
		{Op: membership.OpRemove, GroupID: id, UIDs: uids, If: cond},
		{Op: membership.OpDeleteGroup, GroupID: id, If: cond},
		{Op: membership.OpRemoveUser, UIDs: uids[:1], If: cond},
		{Op: membership.OpExpire, GroupID: id, UIDs: expireUIDs, If: cond, AsOf: time.UnixMilli(-1 << 62).UTC()},
		{Op: membership.OpAddGroups, GroupID: id, Subgroups: longGroups(maxUsers, true), If: cond, MaxDepth: membership.MaxMaxDepth, MaxAncestors: membership.MaxMaxAncestors},
		{Op: membership.OpReplaceGroups, GroupID: id, Subgroups: longGroups(maxUsers, true), If: cond, MaxDepth: membership.MaxMaxDepth, MaxAncestors: membership.MaxMaxAncestors},
		{Op: membership.OpRemoveGroups, GroupID: id, Subgroups: longGroups(maxUsers, false), If: cond},
		{Op: membership.OpExpireGroups, GroupID: id, Subgroups: longGroups(MaxExpireGroups, false), If: cond, AsOf: time.UnixMilli(-1 << 62).UTC()},
		{Op: membership.OpSetUser, UIDs: uids[:1], If: cond, Account: longAccount()},
		{Op: membership.OpDeleteUser, UIDs: uids[:1], If: cond},
		{Op: membership.OpSetGroup, GroupID: id, If: cond, Group: longGroupAttributes()},
	} {
		e.Time, e.Actor = time.UnixMilli(-1<<62).UTC(), 9223372036854775807 // the longest stamp
		e.Principal = string(bytes.Repeat([]byte{'p'}, scope.MaxPrincipalBytes))
		e.Idem = testIdem(string(bytes.Repeat([]byte{'~'}, membership.MaxIdempotencyKeyBytes)))
		assert.LessOrEqual(t, int64(len(appendWrite(nil, e))), bound, "op %s", e.Op)
		switch e.Op {
		case membership.OpDeleteGroup, membership.OpExpire, membership.OpExpireGroups, membership.OpSetUser, membership.OpDeleteUser, membership.OpSetGroup:
			assert.LessOrEqual(t, int64(len(appendWrite(nil, e))), Largest(0, 0, 1), "op %s with no user to spare", e.Op)
		}
	}
	// A body names a user's expiry in fewer bytes than its record may
	// take: the bound counts them on top of the body's.
	small := int64(len(appendWrite(nil, &Write{Op: membership.OpAdd, GroupID: id, Users: expiring, If: cond, Time: time.UnixMilli(-1 << 62).UTC()})))
	assert.LessOrEqual(t, small, Largest(int64(maxUsers)*(2+membership.MaxNicknameBytes), maxUsers, 1))
	// A subgroup's id costs its bytes and three more in a body ("g",).
	nesting := int64(len(appendWrite(nil, &Write{Op: membership.OpAddGroups, GroupID: id, Subgroups: longGroups(maxUsers, true), If: cond,
		MaxDepth: membership.MaxMaxDepth, MaxAncestors: membership.MaxMaxAncestors, Time: time.UnixMilli(-1 << 62).UTC()})))
	assert.LessOrEqual(t, nesting, Largest(int64(maxUsers)*(3+membership.MaxGroupIDBytes), maxUsers, 1))
}

// longGroups returns n subgroups of the longest distinct ids, each with
// the longest expiry when expiring.
func longGroups(n int, expiring bool) []membership.Subgroup {
	groups := make([]membership.Subgroup, n)
	for i := range groups {
		id := []byte(fmt.Sprintf("%0*d", membership.MaxGroupIDBytes, i))
		groups[i].GroupID = string(id)
		if expiring {
			groups[i].Expiry = membership.Expiry{Set: true, At: time.UnixMilli(math.MaxInt64).UTC()}
		}
	}
	return groups
}

// longAccount returns an account of the longest attributes.
func longAccount() *account.Account {
	long := string(bytes.Repeat([]byte{'a'}, account.MaxAttributeBytes))
	return &account.Account{UserName: long, ExternalID: long, DisplayName: string(bytes.Repeat([]byte{'a'}, membership.MaxNicknameBytes)),
		GivenName: long, FamilyName: long, Email: long, Active: true}
}

// longGroupAttributes returns a group's attributes of the longest.
func longGroupAttributes() *account.GroupAttributes {
	long := string(bytes.Repeat([]byte{'a'}, account.MaxAttributeBytes))
	return &account.GroupAttributes{DisplayName: long, ExternalID: long}
}
