package decode

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// The forms of an element's expiry: "expires", an RFC 3339 time (any
// offset, stored in UTC to the millisecond) or null, and "ttl", a Go
// duration.
func TestParseUsersReadsExpiries(t *testing.T) {
	at := func(s string) membership.Expiry {
		tm, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return membership.Expiry{Set: true, At: tm.UTC()}
	}
	ttl := func(d time.Duration) membership.Expiry { return membership.Expiry{Set: true, TTL: d} }
	tests := []struct {
		name  string
		users string
		want  []membership.User
	}{
		{"expires in UTC", `[{"uid":7,"expires":"2026-12-01T00:00:00Z"}]`,
			[]membership.User{{UID: 7, Expiry: at("2026-12-01T00:00:00Z")}}},
		{"expires with an offset is kept in UTC", `[{"uid":7,"expires":"2026-12-01T02:30:00+02:30"}]`,
			[]membership.User{{UID: 7, Expiry: at("2026-12-01T00:00:00Z")}}},
		{"a negative offset", `[{"uid":7,"expires":"2026-11-30T19:00:00-05:00"}]`,
			[]membership.User{{UID: 7, Expiry: at("2026-12-01T00:00:00Z")}}},
		{"milliseconds are kept", `[{"uid":7,"expires":"2026-12-01T00:00:00.123Z"}]`,
			[]membership.User{{UID: 7, Expiry: at("2026-12-01T00:00:00.123Z")}}},
		{"finer than milliseconds is truncated", `[{"uid":7,"expires":"2026-12-01T00:00:00.123999999Z"}]`,
			[]membership.User{{UID: 7, Expiry: at("2026-12-01T00:00:00.123Z")}}},
		{"lower-case t and z, as RFC 3339 allows", `[{"uid":7,"expires":"2026-12-01t00:00:00z"}]`,
			[]membership.User{{UID: 7, Expiry: at("2026-12-01T00:00:00Z")}}},
		{"escaped characters in the time", `[{"uid":7,"expires":"2026-12-01T00:00:00\u005a"}]`,
			[]membership.User{{UID: 7, Expiry: at("2026-12-01T00:00:00Z")}}},
		{"null makes the membership permanent", `[{"uid":7,"expires":null}]`,
			[]membership.User{{UID: 7, Expiry: membership.Expiry{Set: true}}}},
		{"a ttl in hours", `[{"uid":7,"ttl":"4h"}]`, []membership.User{{UID: 7, Expiry: ttl(4 * time.Hour)}}},
		{"a ttl in minutes", `[{"uid":7,"ttl":"90m"}]`, []membership.User{{UID: 7, Expiry: ttl(90 * time.Minute)}}},
		{"a ttl of several units", `[{"uid":7,"ttl":"1h30m15.5s"}]`, []membership.User{{UID: 7, Expiry: ttl(time.Hour + 30*time.Minute + 15500*time.Millisecond)}}},
		{"the shortest ttl", `[{"uid":7,"ttl":"1ms"}]`, []membership.User{{UID: 7, Expiry: ttl(time.Millisecond)}}},
		{"the longest ttl", `[{"uid":7,"ttl":"87840h"}]`, []membership.User{{UID: 7, Expiry: ttl(membership.MaxExpiryAhead)}}},
		{"with a nickname, keys in any order", `[{"ttl":"4h","nickname":"Al","uid":"7"}]`,
			[]membership.User{{UID: 7, Nickname: "Al", HasNickname: true, Expiry: ttl(4 * time.Hour)}}},
		{"whitespace around the values", "[{ \"uid\" : 7 ,\n\"expires\" : null }]",
			[]membership.User{{UID: 7, Expiry: membership.Expiry{Set: true}}}},
		{"an object without one keeps the expiry", `[{"uid":7,"nickname":"Al"}]`,
			[]membership.User{{UID: 7, Nickname: "Al", HasNickname: true}}},
		{"mixed with the other forms, which stay as they are", `[1,"2",[3],[4,"d"],{"uid":5,"ttl":"1m"},{"uid":6,"expires":null}]`,
			[]membership.User{{UID: 1}, {UID: 2}, {UID: 3}, {UID: 4, Nickname: "d", HasNickname: true},
				{UID: 5, Expiry: ttl(time.Minute)}, {UID: 6, Expiry: membership.Expiry{Set: true}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseUsers(tt.users, 100)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			for _, u := range got {
				if !u.Expiry.At.IsZero() {
					assert.Equal(t, time.UTC, u.Expiry.At.Location(), "stored in UTC")
				}
			}
		})
	}
}

func TestParseUsersRejectsBadExpiries(t *testing.T) {
	tests := []struct {
		name    string
		users   string
		wantMsg string
	}{
		{"both expires and ttl", `[1,{"uid":7,"expires":"2026-12-01T00:00:00Z","ttl":"4h"}]`, `users element 1: "expires" and "ttl" are both given: give one`},
		{"both, with null", `[{"uid":7,"ttl":"4h","expires":null}]`, `users element 0: "expires" and "ttl" are both given`},
		{"expires twice", `[{"uid":7,"expires":null,"expires":null}]`, `users element 0: the key "expires" appears twice`},
		{"ttl twice", `[{"uid":7,"ttl":"1h","ttl":"2h"}]`, `users element 0: the key "ttl" appears twice`},
		{"a month out of range", `[{"uid":7,"expires":"2026-13-01T00:00:00Z"}]`, `users element 0: expires "2026-13-01T00:00:00Z" is not an RFC 3339 time`},
		{"no offset", `[{"uid":7,"expires":"2026-12-01T00:00:00"}]`, `is not an RFC 3339 time`},
		{"a date alone", `[{"uid":7,"expires":"2026-12-01"}]`, `is not an RFC 3339 time`},
		{"a space for the T", `[{"uid":7,"expires":"2026-12-01 00:00:00Z"}]`, `is not an RFC 3339 time`},
		{"an empty time", `[{"uid":7,"expires":""}]`, `expires "" is not an RFC 3339 time`},
		{"a long bad time is cut short", `[{"uid":7,"expires":"` + "2026-12-01T00:00:00Zxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" + `"}]`, `..." is not an RFC 3339 time`},
		{"expires is a number", `[{"uid":7,"expires":1796083200}]`, `users element 0: got a number, want an RFC 3339 time`},
		{"expires is true", `[{"uid":7,"expires":true}]`, `got true, want an RFC 3339 time`},
		{"expires is an object", `[{"uid":7,"expires":{}}]`, `got an object, want an RFC 3339 time`},
		{"expires before 1970", `[{"uid":7,"expires":"0001-01-01T00:00:00Z"}]`, `users element 0: the expiry 0001-01-01T00:00:00.000Z is not in the future`},
		{"a ttl that is not a duration", `[{"uid":7,"ttl":"4 hours"}]`, `users element 0: ttl "4 hours" is not a duration`},
		{"a ttl without a unit", `[{"uid":7,"ttl":"3600"}]`, `ttl "3600" is not a duration`},
		{"a ttl in days", `[{"uid":7,"ttl":"1d"}]`, `ttl "1d" is not a duration`},
		{"an empty ttl", `[{"uid":7,"ttl":""}]`, `ttl "" is not a duration`},
		{"a zero ttl", `[{"uid":7,"ttl":"0s"}]`, `users element 0: the ttl 0s is not at least 1ms`},
		{"a bare zero ttl", `[{"uid":7,"ttl":"0"}]`, `the ttl 0s is not at least 1ms`},
		{"a negative ttl", `[{"uid":7,"ttl":"-1h"}]`, `the ttl -1h0m0s is not at least 1ms`},
		{"a ttl under a millisecond", `[{"uid":7,"ttl":"999us"}]`, `the ttl 999µs is not at least 1ms`},
		{"a ttl past the bound", `[{"uid":7,"ttl":"87841h"}]`, `users element 0: the ttl 87841h0m0s is longer than 3660 days (87840h)`},
		{"a ttl that overflows", `[{"uid":7,"ttl":"9999999999h"}]`, `is not a duration`},
		{"a ttl as a number", `[{"uid":7,"ttl":3600}]`, `users element 0: got a number, want a duration such as "4h"`},
		{"a null ttl", `[{"uid":7,"ttl":null}]`, `got null, want a duration such as "4h"`},
		{"an unknown key names every key allowed", `[{"uid":7,"expiry":"4h"}]`, `users element 0: unknown key "expiry": only "uid", "nickname", "expires" and "ttl" are allowed`},
		{"a time that is not UTF-8", "[{\"uid\":7,\"expires\":\"2026\xff\"}]", "not valid UTF-8"},
		{"an object with an expiry but no uid", `[{"ttl":"4h"}]`, `users element 0: the object has no "uid"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseUsers(tt.users, 100)
			require.Error(t, err)
			assert.Nil(t, got)
			assert.Equal(t, membership.CodeInvalidUsers, membership.ErrorCode(err))
			assert.Contains(t, err.Error(), tt.wantMsg)
		})
	}
}
