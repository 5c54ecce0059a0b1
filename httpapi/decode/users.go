package decode

import (
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"example.com/groupmembership/membership"
)

// ParseUsers parses the users value of an add or remove request: a JSON array
// with at most maxUsers elements, each naming one user in one of these forms:
//
//	7                               a uid
//	"7"                             a uid as a decimal string
//	[7]                             a one-item list
//	[7, "Alice"]                    a uid and a nickname
//	{"uid": 7, "nickname": "Alice"} an object; "nickname" is optional
//	{"uid": 7, "expires": "2026-12-01T00:00:00Z"}  an object with an expiry
//	{"uid": 7, "ttl": "4h"}         an object with an expiry after the commit
//
// Anywhere a uid goes, the number and the decimal-string forms are both
// accepted. A uid is an integer from 1 to 9223372036854775807, read exactly:
// 1.5, 1e3, -3, 0, true and null are errors, not rounded. A nickname is a JSON
// string of valid UTF-8 (a lone surrogate escape such as "\ud800" is not);
// how long it may be is the Service's to check, with the rest of the
// write. Objects may not repeat or add keys.
//
// An object may carry the membership's expiry (membership.Expiry): "expires",
// an RFC 3339 time with any offset, kept in UTC to the millisecond, or null
// (the membership is made permanent); or "ttl", a Go duration ("4h",
// "90m") from 1ms to membership.MaxExpiryAhead, counted from the write's
// commit. Not both. Whether a time is in the future, and not too far in
// it, is the Service's to check, on its clock.
//
// Errors: membership.CodeInvalidUsers naming the first offending element, or
// membership.CodeTooManyUsers.
func ParseUsers(s string, maxUsers int) ([]membership.User, error) {
	p := usersParser{s: s, array: "users", code: membership.CodeInvalidUsers}
	return parseWhole(&p, maxUsers, membership.CodeTooManyUsers, (*usersParser).element)
}

type usersParser struct {
	s   string
	pos int
	// elem is the index of the element being parsed, for error messages.
	elem int
	// array names the array parsed in messages, and code is its errors'
	// code: "users" and CodeInvalidUsers, or "checks" and CodeInvalidChecks
	// (checksParser reads its strings and uids so).
	array string
	code  membership.Code
}

const (
	wantElement = `a uid, [uid], [uid, "nickname"] or {"uid": uid, "nickname": "nickname"}`
	wantUID     = "a uid (a number or a decimal string)"
	wantExpires = `an RFC 3339 time (a string such as "2026-12-01T00:00:00Z") or null`
	wantTTL     = `a duration such as "4h" or "90m" (a string)`
)

// parseWhole parses p.s, which must be one JSON array and nothing more,
// as parseArray does.
func parseWhole[T any](p *usersParser, most int, tooMany membership.Code, element func(*usersParser) (T, error)) ([]T, error) {
	elements, err := parseArray(p, most, tooMany, element)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.s) {
		return nil, p.syntaxError("unexpected data after the array")
	}
	return elements, nil
}

// parseArray parses the JSON array at p.pos, of at most most elements
// (more is a tooMany error), calling element to parse each, at p.pos,
// with p.elem its index.
func parseArray[T any](p *usersParser, most int, tooMany membership.Code, element func(*usersParser) (T, error)) ([]T, error) {
	// Commas bound the element count, and so does preallocated, so this
	// never allocates more than the request could fill.
	elements := make([]T, 0, min(strings.Count(p.s[p.pos:], ",")+1, most, preallocated))
	p.skipSpace()
	if !p.consume('[') {
		return nil, membership.Errorf(p.code, "%s is not a JSON array: it must start with [", p.array)
	}
	p.skipSpace()
	if p.consume(']') {
		return elements, nil
	}
	for {
		if len(elements) == most {
			return nil, membership.Errorf(tooMany, "%s has more than %d elements", p.array, most)
		}
		p.elem = len(elements)
		e, err := element(p)
		if err != nil {
			return nil, err
		}
		elements = append(elements, e)
		p.skipSpace()
		if p.consume(']') {
			return elements, nil
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

// preallocated bounds the elements an array's slice has room for before
// they are parsed: commas bound the count, but count those inside strings
// too, and a limit set high must not let a body of commas reserve more than
// its elements will fill. Past it, the slice grows with what is parsed,
// each element from a few bytes of body at least.
const preallocated = 1024

// element parses one element of the array at p.pos.
func (p *usersParser) element() (membership.User, error) {
	switch p.peek() {
	case '[':
		return p.list()
	case '{':
		return p.object()
	default:
		uid, err := p.uid(wantElement)
		return membership.User{UID: uid}, err
	}
}

// list parses [uid] or [uid, "nickname"].
func (p *usersParser) list() (membership.User, error) {
	p.pos++ // [
	p.skipSpace()
	if p.peek() == ']' {
		return membership.User{}, p.elementError("the list is empty, " + wantElement)
	}
	uid, err := p.uid(wantUID)
	if err != nil {
		return membership.User{}, err
	}
	u := membership.User{UID: uid}
	p.skipSpace()
	if p.consume(',') {
		p.skipSpace()
		if u.Nickname, err = p.ownString("nickname"); err != nil {
			return membership.User{}, err
		}
		u.HasNickname = true
		p.skipSpace()
	}
	if !p.consume(']') {
		if p.peek() == ',' {
			return membership.User{}, p.elementError("the list has more than two items, " + wantElement)
		}
		return membership.User{}, p.syntaxError("want ] to close element %d", p.elem)
	}
	return u, nil
}

// object parses {"uid": uid, "nickname": "nickname", "expires": time or
// null, "ttl": duration} with the keys in any order, all but uid optional,
// and expires and ttl not both.
func (p *usersParser) object() (u membership.User, err error) {
	var hasUID, hasExpires, hasTTL bool
	err = p.members(userKeys, func(key string) error {
		return p.elementError(`unknown key %q: only "uid", "nickname", "expires" and "ttl" are allowed`, truncate(key))
	}, func(key string) (err error) {
		switch key {
		case "uid":
			u.UID, err = p.uid(wantUID)
			hasUID = true
		case "nickname":
			u.Nickname, err = p.ownString("nickname")
			u.HasNickname = true
		case "expires":
			u.Expiry.At, err = p.expires()
			hasExpires = true
		case "ttl":
			u.Expiry.TTL, err = p.ttl()
			hasTTL = true
		}
		return err
	})
	switch {
	case err != nil:
		return membership.User{}, err
	case !hasUID:
		return membership.User{}, p.elementError(`the object has no "uid"`)
	}
	u.Expiry.Set, err = p.expiryGiven(hasExpires, hasTTL)
	return u, err
}

// userKeys are the keys of a users element's object.
var userKeys = []string{"uid", "nickname", "expires", "ttl"}

// expiryGiven returns whether an object gives an expiry: "expires" or
// "ttl", which it may not both give.
func (p *usersParser) expiryGiven(hasExpires, hasTTL bool) (bool, error) {
	if hasExpires && hasTTL {
		return false, p.elementError(`"expires" and "ttl" are both given: give one`)
	}
	return hasExpires || hasTTL, nil
}

// members parses the JSON object at p.pos, whose keys must be among keys,
// each at most once: value parses the value of each, at p.pos, and
// unknown returns the error of any other key.
func (p *usersParser) members(keys []string, unknown func(key string) error, value func(key string) error) error {
	p.pos++ // {
	p.skipSpace()
	var given uint // 1<<i for keys[i]
	for n := 0; !p.consume('}'); n++ {
		if n > 0 {
			if !p.consume(',') {
				return p.syntaxError("want , or } in element %d", p.elem)
			}
			p.skipSpace()
		}
		if p.peek() != '"' {
			return p.syntaxError("want a quoted key in element %d", p.elem)
		}
		key, err := p.string()
		if err != nil {
			return err
		}
		p.skipSpace()
		if !p.consume(':') {
			return p.syntaxError("want : after key %q in element %d", key, p.elem)
		}
		p.skipSpace()
		i := slices.Index(keys, key)
		switch {
		case i < 0:
			return unknown(key)
		case given&(1<<i) != 0:
			return p.elementError("the key %q appears twice", key)
		}
		if err := value(key); err != nil {
			return err
		}
		given |= 1 << i
		p.skipSpace()
	}
	return nil
}

// expires parses the value of "expires": an RFC 3339 time, returned in
// UTC to the millisecond, or null, returned as the zero time (the
// membership is made permanent).
func (p *usersParser) expires() (time.Time, error) {
	if strings.HasPrefix(p.s[p.pos:], "null") {
		p.pos += len("null")
		return time.Time{}, nil
	}
	if p.peek() != '"' {
		return time.Time{}, p.wrongValue(wantExpires)
	}
	s, err := p.string()
	if err != nil {
		return time.Time{}, err
	}
	// RFC 3339 lets T and Z be written in lower case; time.Parse does not.
	t, err := time.Parse(time.RFC3339, strings.ToUpper(s))
	if err != nil {
		return time.Time{}, p.elementError("expires %q is not an RFC 3339 time, such as \"2026-12-01T00:00:00Z\" or \"2026-12-01T01:00:00+01:00\"", truncate(s))
	}
	t = t.UTC().Truncate(time.Millisecond)
	if t.Before(time.UnixMilli(1)) { // the zero time would read as null; and no clock is before 1970
		return time.Time{}, p.elementError("the expiry %s is not in the future", t.Format(membership.ExpiryLayout))
	}
	return t, nil
}

// ttl parses the value of "ttl": a Go duration string, from 1ms to
// membership.MaxExpiryAhead.
func (p *usersParser) ttl() (time.Duration, error) {
	if p.peek() != '"' {
		return 0, p.wrongValue(wantTTL)
	}
	s, err := p.string()
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, p.elementError("ttl %q is not a duration, such as \"4h\", \"90m\" or \"1h30m\" (units ns, us, ms, s, m, h)", truncate(s))
	case d < time.Millisecond:
		return 0, p.elementError("the ttl %s is not at least 1ms", d)
	case d > membership.MaxExpiryAhead:
		return 0, p.elementError("the ttl %s is longer than %s", d, membership.MaxExpiryAheadText)
	}
	return d, nil
}

// uid parses a uid written as a JSON number or a JSON string of decimal digits.
// want describes what belongs here, for the error message.
func (p *usersParser) uid(want string) (membership.UID, error) {
	var text string
	switch c := p.peek(); {
	case c == '"':
		s, err := p.string()
		if err != nil {
			return 0, err
		}
		text = strconv.Quote(s)
		if uid, ok := ParseUID(s); ok {
			return uid, nil
		}
	case c == '-' || ('0' <= c && c <= '9'):
		num, err := p.number()
		if err != nil {
			return 0, err
		}
		text = num
		if uid, ok := ParseUID(num); ok {
			return uid, nil
		}
	default:
		return 0, p.wrongValue(want)
	}
	return 0, p.elementError("uid %s is not %s", truncate(text), membership.UIDRange)
}

// ownString parses what (a nickname, a group id): a JSON string of valid
// UTF-8. It outlives the request: it is copied out of the request body,
// so that keeping it does not keep the whole body alive.
func (p *usersParser) ownString(what string) (string, error) {
	if p.peek() != '"' {
		return "", p.wrongValue("a string " + what)
	}
	s, err := p.string()
	if err != nil {
		return "", err
	}
	return strings.Clone(s), nil
}

// wrongValue reports the value at p.pos, which is not what belongs there: a
// well-formed JSON value of the wrong kind, or a syntax error.
func (p *usersParser) wrongValue(want string) error {
	rest := p.s[p.pos:]
	var got string
	switch c := p.peek(); {
	case strings.HasPrefix(rest, "true"):
		got = "true"
	case strings.HasPrefix(rest, "false"):
		got = "false"
	case strings.HasPrefix(rest, "null"):
		got = "null"
	case c == '[':
		got = "a list"
	case c == '{':
		got = "an object"
	case c == '"':
		got = "a string"
	case c == '-' || ('0' <= c && c <= '9'):
		got = "a number"
	case p.pos == len(p.s):
		return p.syntaxError("unexpected end: the array is not closed")
	default:
		return p.syntaxError("unexpected %q", c)
	}
	return p.elementError("got %s, want %s", got, want)
}

// number scans a JSON number and returns its text.
func (p *usersParser) number() (string, error) {
	start := p.pos
	p.consume('-')
	switch {
	case p.consume('0'):
		if p.digits() > 0 {
			return "", p.syntaxError("malformed number: leading zero")
		}
	case p.digits() == 0:
		return "", p.syntaxError("malformed number")
	}
	if p.consume('.') && p.digits() == 0 {
		return "", p.syntaxError("malformed number")
	}
	if p.consume('e') || p.consume('E') {
		_ = p.consume('+') || p.consume('-')
		if p.digits() == 0 {
			return "", p.syntaxError("malformed number")
		}
	}
	return p.s[start:p.pos], nil
}

func (p *usersParser) digits() int {
	start := p.pos
	for p.pos < len(p.s) && '0' <= p.s[p.pos] && p.s[p.pos] <= '9' {
		p.pos++
	}
	return p.pos - start
}

// string scans a JSON string and returns it decoded. It rejects invalid UTF-8
// and lone surrogate escapes instead of replacing them with U+FFFD, so no
// nickname is silently altered.
func (p *usersParser) string() (string, error) {
	start := p.pos
	p.pos++ // "
	// Fast path: no escapes, so the decoded string is a slice of the input.
	i := p.pos
	for ; i < len(p.s); i++ {
		c := p.s[i]
		if c == '"' {
			s := p.s[p.pos:i]
			if !utf8.ValidString(s) {
				return "", p.elementError("a string is not valid UTF-8")
			}
			p.pos = i + 1
			return s, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
	}
	// Slow path: decode rune by rune, with room for the part already scanned.
	b := make([]byte, 0, i-p.pos+16)
	for {
		if p.pos >= len(p.s) {
			p.pos = start
			return "", p.syntaxError("unterminated string")
		}
		c := p.s[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(b), nil
		case c < 0x20:
			return "", p.syntaxError("control character %q in a string", c)
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			b = utf8.AppendRune(b, r)
		case c < utf8.RuneSelf:
			b = append(b, c)
			p.pos++
		default:
			r, size := utf8.DecodeRuneInString(p.s[p.pos:])
			if r == utf8.RuneError && size == 1 {
				return "", p.elementError("a string is not valid UTF-8")
			}
			b = append(b, p.s[p.pos:p.pos+size]...)
			p.pos += size
		}
	}
}

// escape decodes the escape sequence at p.pos, joining surrogate pairs.
func (p *usersParser) escape() (rune, error) {
	if p.pos+1 >= len(p.s) {
		return 0, p.syntaxError("unterminated string")
	}
	c := p.s[p.pos+1]
	p.pos += 2
	if i := strings.IndexByte(`"\/bfnrt`, c); i >= 0 {
		return rune("\"\\/\b\f\n\r\t"[i]), nil
	}
	if c != 'u' {
		p.pos -= 2
		return 0, p.syntaxError(`unknown escape \%c`, c)
	}
	r, err := p.hex4()
	if err != nil || !utf16.IsSurrogate(r) {
		return r, err
	}
	if r < 0xDC00 && strings.HasPrefix(p.s[p.pos:], `\u`) {
		p.pos += 2
		r2, err := p.hex4()
		if err != nil {
			return 0, err
		}
		if joined := utf16.DecodeRune(r, r2); joined != utf8.RuneError {
			return joined, nil
		}
	}
	return 0, p.elementError("a string is not valid UTF-8: it has a lone surrogate escape")
}

// hex4 decodes the four hex digits of a \u escape at p.pos.
func (p *usersParser) hex4() (rune, error) {
	if p.pos+4 <= len(p.s) {
		if r, err := strconv.ParseUint(p.s[p.pos:p.pos+4], 16, 16); err == nil {
			p.pos += 4
			return rune(r), nil
		}
	}
	return 0, p.syntaxError(`malformed \u escape`)
}

func (p *usersParser) peek() byte {
	if p.pos < len(p.s) {
		return p.s[p.pos]
	}
	return 0
}

func (p *usersParser) consume(c byte) bool {
	if p.pos < len(p.s) && p.s[p.pos] == c {
		p.pos++
		return true
	}
	return false
}

func (p *usersParser) skipSpace() {
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// syntaxError reports malformed JSON at p.pos.
func (p *usersParser) syntaxError(format string, args ...any) error {
	return membership.Errorf(p.code, "%s is not valid JSON at byte %d: "+format, append([]any{p.array, p.pos}, args...)...)
}

// elementError reports well-formed JSON that is not a valid user element.

func (p *usersParser) elementError(format string, args ...any) error {
	return membership.Errorf(p.code, "%s element %d: "+format, append([]any{p.array, p.elem}, args...)...)
}

// truncate shortens s for an error message.
func truncate(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
