package decode

import (
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

func TestParseUsersAcceptsEveryElementForm(t *testing.T) {
	tests := []struct {
		name  string
		users string
		want  []membership.User
	}{
		{"empty array", `[]`, []membership.User{}},
		{"bare integer", `[7]`, []membership.User{{UID: 7}}},
		{"numeric string", `["7"]`, []membership.User{{UID: 7}}},
		{"one-item list", `[[7]]`, []membership.User{{UID: 7}}},
		{"one-item list of a string", `[["7"]]`, []membership.User{{UID: 7}}},
		{"pair", `[[7,"Alice"]]`, []membership.User{{UID: 7, Nickname: "Alice", HasNickname: true}}},
		{"object", `[{"uid":7,"nickname":"Alice"}]`, []membership.User{{UID: 7, Nickname: "Alice", HasNickname: true}}},
		{"object, keys reversed", `[{"nickname":"Alice","uid":"7"}]`, []membership.User{{UID: 7, Nickname: "Alice", HasNickname: true}}},
		{"object without nickname", `[{"uid":7}]`, []membership.User{{UID: 7}}},
		{"empty nickname is a nickname", `[[7,""]]`, []membership.User{{UID: 7, Nickname: "", HasNickname: true}}},
		{"all forms mixed", `[1,"2",[3],[4,"d"],{"uid":5,"nickname":"e"}]`, []membership.User{
			{UID: 1}, {UID: 2}, {UID: 3}, {UID: 4, Nickname: "d", HasNickname: true}, {UID: 5, Nickname: "e", HasNickname: true},
		}},
		{"whitespace everywhere", " \t\n[ 1 ,\r[ 2 , \"b\" ] , { \"uid\" : 3 } ] \n", []membership.User{
			{UID: 1}, {UID: 2, Nickname: "b", HasNickname: true}, {UID: 3},
		}},
		{"largest uid stays exact", `[9223372036854775807]`, []membership.User{{UID: 9223372036854775807}}},
		{"largest uid as a string", `["9223372036854775807"]`, []membership.User{{UID: 9223372036854775807}}},
		{"repeats are kept for the store to count", `[1,1]`, []membership.User{{UID: 1}, {UID: 1}}},
		{"escapes in a nickname", `[[1,"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"]]`, []membership.User{
			{UID: 1, Nickname: "a\"\\/\b\f\n\r\té😀", HasNickname: true},
		}},
		{"raw UTF-8 nickname", `[[1,"Zoë 日本 😀"]]`, []membership.User{{UID: 1, Nickname: "Zoë 日本 😀", HasNickname: true}}},
		{"nickname of exactly 256 bytes", `[[1,"` + strings.Repeat("é", 128) + `"]]`, []membership.User{
			{UID: 1, Nickname: strings.Repeat("é", 128), HasNickname: true},
		}},
		{"escaped uid string", `["\u0037"]`, []membership.User{{UID: 7}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseUsers(tt.users, 100)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseUsersRejectsBadInput(t *testing.T) {
	tests := []struct {
		name     string
		users    string
		wantCode membership.Code
		wantMsg  string // a part of the message that names the problem
	}{
		{"not JSON", `hello`, membership.CodeInvalidUsers, "not a JSON array"},
		{"an object, not an array", `{"uid":1}`, membership.CodeInvalidUsers, "not a JSON array"},
		{"a bare number", `7`, membership.CodeInvalidUsers, "not a JSON array"},
		{"unclosed array", `[1,2`, membership.CodeInvalidUsers, "not closed"},
		{"trailing comma", `[1,]`, membership.CodeInvalidUsers, "not valid JSON"},
		{"missing comma", `[1 2]`, membership.CodeInvalidUsers, "want , or ]"},
		{"trailing data", `[1] x`, membership.CodeInvalidUsers, "after the array"},
		{"two arrays", `[1][2]`, membership.CodeInvalidUsers, "after the array"},
		{"fraction", `[1.5]`, membership.CodeInvalidUsers, "element 0: uid 1.5 is not an integer"},
		{"integral fraction", `[1.0]`, membership.CodeInvalidUsers, "uid 1.0 is not an integer"},
		{"exponent", `[1e3]`, membership.CodeInvalidUsers, "uid 1e3 is not an integer"},
		{"negative", `[1,-3]`, membership.CodeInvalidUsers, "element 1: uid -3 is not an integer"},
		{"zero", `[0]`, membership.CodeInvalidUsers, "uid 0 is not an integer from 1"},
		{"too large", `[9223372036854775808]`, membership.CodeInvalidUsers, "uid 9223372036854775808 is not"},
		{"far too large", `[` + strings.Repeat("9", 100) + `]`, membership.CodeInvalidUsers, "is not an integer"},
		{"leading zero number", `[07]`, membership.CodeInvalidUsers, "leading zero"},
		{"malformed number", `[-]`, membership.CodeInvalidUsers, "malformed number"},
		{"malformed exponent", `[1e]`, membership.CodeInvalidUsers, "malformed number"},
		{"true", `[true]`, membership.CodeInvalidUsers, "element 0: got true"},
		{"false", `[false]`, membership.CodeInvalidUsers, "element 0: got false"},
		{"null", `[null]`, membership.CodeInvalidUsers, "element 0: got null"},
		{"empty list element", `[[]]`, membership.CodeInvalidUsers, "element 0: the list is empty"},
		{"three-item list", `[[1,"a","b"]]`, membership.CodeInvalidUsers, "more than two items"},
		{"nested list", `[[[1]]]`, membership.CodeInvalidUsers, "element 0: got a list"},
		{"non-numeric string", `["abc"]`, membership.CodeInvalidUsers, `uid "abc" is not an integer`},
		{"empty string", `[""]`, membership.CodeInvalidUsers, `uid "" is not`},
		{"signed string", `["+7"]`, membership.CodeInvalidUsers, `uid "+7" is not`},
		{"leading zero string", `["07"]`, membership.CodeInvalidUsers, `uid "07" is not`},
		{"spaced string", `[" 7"]`, membership.CodeInvalidUsers, `uid " 7" is not`},
		{"nickname is a number", `[[7,8]]`, membership.CodeInvalidUsers, "element 0: got a number, want a string nickname"},
		{"nickname is null", `[[7,null]]`, membership.CodeInvalidUsers, "got null, want a string nickname"},
		{"nickname is a list", `[{"uid":7,"nickname":["a"]}]`, membership.CodeInvalidUsers, "got a list, want a string nickname"},
		{"nickname not UTF-8", "[[1,\"a\xffb\"]]", membership.CodeInvalidUsers, "not valid UTF-8"},
		{"nickname not UTF-8 after an escape", "[[1,\"\\n\xff\"]]", membership.CodeInvalidUsers, "not valid UTF-8"},
		{"lone high surrogate", `[[1,"\ud800"]]`, membership.CodeInvalidUsers, "lone surrogate"},
		{"lone low surrogate", `[[1,"\udc00x"]]`, membership.CodeInvalidUsers, "lone surrogate"},
		{"reversed surrogates", `[[1,"\ude00\ud83d"]]`, membership.CodeInvalidUsers, "lone surrogate"},
		{"bad escape", `[[1,"\x"]]`, membership.CodeInvalidUsers, `unknown escape \x`},
		{"short unicode escape", `[[1,"\u12"]]`, membership.CodeInvalidUsers, `malformed \u escape`},
		{"raw control character", "[[1,\"a\nb\"]]", membership.CodeInvalidUsers, "control character"},
		{"unterminated string", `[[1,"abc`, membership.CodeInvalidUsers, "unterminated string"},
		{"object without uid", `[{"nickname":"a"}]`, membership.CodeInvalidUsers, `element 0: the object has no "uid"`},
		{"empty object", `[{}]`, membership.CodeInvalidUsers, `has no "uid"`},
		{"unknown key", `[{"uid":1,"name":"a"}]`, membership.CodeInvalidUsers, `unknown key "name"`},
		{"repeated uid key", `[{"uid":1,"uid":2}]`, membership.CodeInvalidUsers, `"uid" appears twice`},
		{"repeated nickname key", `[{"uid":1,"nickname":"a","nickname":"b"}]`, membership.CodeInvalidUsers, `"nickname" appears twice`},
		{"object uid is an object", `[{"uid":{"uid":1}}]`, membership.CodeInvalidUsers, "got an object, want a uid"},
		{"unquoted key", `[{uid:1}]`, membership.CodeInvalidUsers, "want a quoted key"},
		{"missing colon", `[{"uid" 1}]`, membership.CodeInvalidUsers, `want : after key "uid"`},
		{"unclosed object", `[{"uid":1`, membership.CodeInvalidUsers, "want , or }"},
		{"error names the element", `[1,2,"x"]`, membership.CodeInvalidUsers, "element 2:"},
		{"too many users", `[1,2,3,4]`, membership.CodeTooManyUsers, "more than 3 elements"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseUsers(tt.users, 3)
			require.Error(t, err)
			assert.Nil(t, got)
			assert.Equal(t, tt.wantCode, membership.ErrorCode(err))
			assert.Contains(t, err.Error(), tt.wantMsg)
		})
	}
}

func TestParseUsersAllowsExactlyMaxUsers(t *testing.T) {
	got, err := ParseUsers(`[1,2,3]`, 3)
	require.NoError(t, err)
	assert.Len(t, got, 3)
}

func TestParseUsersCopiesNicknamesOutOfTheInput(t *testing.T) {
	// A nickname that shared memory with the request body would keep the
	// whole body alive for as long as the nickname is stored.
	input := `[[1,"Alice"]]`
	got, err := ParseUsers(input, 10)
	require.NoError(t, err)
	require.Equal(t, "Alice", got[0].Nickname)
	start := uintptr(unsafe.Pointer(unsafe.StringData(input)))
	nick := uintptr(unsafe.Pointer(unsafe.StringData(got[0].Nickname)))
	assert.False(t, start <= nick && nick < start+uintptr(len(input)), "the nickname points into the input")
}

// FuzzParseUsers checks ParseUsers against referenceParseUsers, which is built on
// encoding/json's tokenizer: both must accept the same inputs and read the same
// users from them. encoding/json replaces invalid UTF-8 and lone surrogates
// with U+FFFD where ParseUsers rejects them, so for such inputs it only checks
// that what ParseUsers accepts is valid JSON.
func FuzzParseUsers(f *testing.F) {
	for _, seed := range []string{
		`[]`, `[7]`, `["7"]`, `[[7]]`, `[[7,"Alice"]]`, `[{"uid":7,"nickname":"Alice"}]`,
		`[{"nickname":"A","uid":"7"}]`, `[1,"2",[3],[4,"d"],{"uid":5}]`, ` [ 1 , 2 ] `,
		`[9223372036854775807]`, `[9223372036854775808]`, `[1.5]`, `[1e3]`, `[-3]`, `[0]`,
		`[true]`, `[null]`, `[[]]`, `[[1,2]]`, `[{"uid":1,"uid":2}]`, `[{"x":1}]`,
		`[[1,"\u00e9\ud83d\ude00"]]`, `[[1,"\ud800"]]`, "[[1,\"\xff\"]]", `[1,]`, `[1`, `[1]]`,
		`[["07"]]`, `[[1,"a\"b"]]`,
		`[{"uid":7,"expires":"2026-12-01T00:00:00Z"}]`, `[{"uid":7,"expires":null}]`, `[{"uid":7,"ttl":"4h"}]`,
		`[{"uid":7,"expires":"2026-12-01t01:00:00.1234+01:00","nickname":"a"}]`, `[{"uid":7,"ttl":"4h","expires":null}]`,
		`[{"uid":7,"ttl":"0s"}]`, `[{"uid":7,"ttl":"87841h"}]`, `[{"uid":7,"expires":"0001-01-01T00:00:00Z"}]`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, input string) {
		got, err := ParseUsers(input, 1000)
		if err != nil {
			code := membership.ErrorCode(err)
			if code != membership.CodeInvalidUsers && code != membership.CodeTooManyUsers {
				t.Fatalf("ParseUsers(%q): got code %q, want invalid_users or too_many_users", input, code)
			}
		} else {
			if !json.Valid([]byte(input)) {
				t.Fatalf("ParseUsers(%q) accepted input that is not valid JSON", input)
			}
			if !utf8.ValidString(input) {
				t.Fatalf("ParseUsers(%q) accepted invalid UTF-8", input)
			}
		}
		if !utf8.ValidString(input) || surrogateEscape.MatchString(input) {
			return
		}
		want, ok := referenceParseUsers(input, 1000)
		if ok != (err == nil) {
			t.Fatalf("ParseUsers(%q): got error %v, reference accepts: %v", input, err, ok)
		}
		if ok && !assert.Equal(t, want, got) {
			t.Fatalf("ParseUsers(%q) disagrees with the reference", input)
		}
	})
}

var surrogateEscape = regexp.MustCompile(`(?i)\\u+d[89a-f]`)

// referenceParseUsers is a slow, obviously-correct ParseUsers built on
// encoding/json's tokenizer, for the fuzz test to compare with.
func referenceParseUsers(s string, maxUsers int) ([]membership.User, bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, false
	}
	users := []membership.User{}
	for dec.More() {
		if len(users) == maxUsers {
			return nil, false
		}
		u, ok := referenceElement(dec)
		if !ok {
			return nil, false
		}
		users = append(users, u)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return users, true
}

func referenceElement(dec *json.Decoder) (membership.User, bool) {
	tok, err := dec.Token()
	if err != nil {
		return membership.User{}, false
	}
	switch tok {
	case json.Delim('['):
		uid, ok := referenceUID(dec)
		if !ok {
			return membership.User{}, false
		}
		u := membership.User{UID: uid}
		if dec.More() {
			if u.Nickname, ok = referenceNickname(dec); !ok {
				return membership.User{}, false
			}
			u.HasNickname = true
		}
		end, err := dec.Token()
		return u, err == nil && end == json.Delim(']')
	case json.Delim('{'):
		var u membership.User
		var hasUID, hasExpires, hasTTL bool
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return membership.User{}, false
			}
			var ok bool
			switch {
			case key == "uid" && !hasUID:
				u.UID, ok = referenceUID(dec)
				hasUID = true
			case key == "nickname" && !u.HasNickname:
				u.Nickname, ok = referenceNickname(dec)
				u.HasNickname = true
			case key == "expires" && !hasExpires:
				u.Expiry.At, ok = referenceExpires(dec)
				hasExpires = true
			case key == "ttl" && !hasTTL:
				u.Expiry.TTL, ok = referenceTTL(dec)
				hasTTL = true
			}
			if !ok {
				return membership.User{}, false
			}
		}
		u.Expiry.Set = hasExpires || hasTTL
		end, err := dec.Token()
		return u, err == nil && end == json.Delim('}') && hasUID && !(hasExpires && hasTTL)
	default:
		uid, ok := referenceUIDToken(tok)
		return membership.User{UID: uid}, ok
	}
}

func referenceUID(dec *json.Decoder) (membership.UID, bool) {
	tok, err := dec.Token()
	if err != nil {
		return 0, false
	}
	return referenceUIDToken(tok)
}

func referenceUIDToken(tok json.Token) (membership.UID, bool) {
	switch v := tok.(type) {
	case json.Number:
		return ParseUID(string(v))
	case string:
		return ParseUID(v)
	}
	return 0, false
}

func referenceNickname(dec *json.Decoder) (string, bool) {
	tok, err := dec.Token()
	if err != nil {
		return "", false
	}
	s, ok := tok.(string)
	return s, ok && len(s) <= membership.MaxNicknameBytes
}

// referenceExpires reads an expiry's time: null (the zero time), or an
// RFC 3339 time, T and Z in either case, after 1970, in UTC to the
// millisecond.
func referenceExpires(dec *json.Decoder) (time.Time, bool) {
	tok, err := dec.Token()
	if err != nil {
		return time.Time{}, false
	}
	if tok == nil {
		return time.Time{}, true
	}
	s, ok := tok.(string)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, strings.ToUpper(s))
	t = t.UTC().Truncate(time.Millisecond)
	return t, err == nil && t.UnixMilli() >= 1
}

// referenceTTL reads a ttl: a duration string from 1ms to the bound.
func referenceTTL(dec *json.Decoder) (time.Duration, bool) {
	tok, err := dec.Token()
	if err != nil {
		return 0, false
	}
	s, ok := tok.(string)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	return d, err == nil && d >= time.Millisecond && d <= membership.MaxExpiryAhead
}

func TestReferenceParseUsersAgreesOnTheBasics(t *testing.T) {
	// The fuzz test trusts the reference; make sure it is not trivially wrong.
	got, ok := referenceParseUsers(`[1,"2",[3],[4,"d"],{"uid":5,"nickname":"e"}]`, 10)
	require.True(t, ok)
	assert.Equal(t, []membership.User{
		{UID: 1}, {UID: 2}, {UID: 3}, {UID: 4, Nickname: "d", HasNickname: true}, {UID: 5, Nickname: "e", HasNickname: true},
	}, got)
	for _, bad := range []string{`[1.5]`, `[[]]`, `[{"uid":1,"uid":2}]`, `[1] x`, `[1,2,3,4,5,6,7,8,9,10,11]`} {
		_, ok := referenceParseUsers(bad, 10)
		assert.False(t, ok, bad)
	}
}
