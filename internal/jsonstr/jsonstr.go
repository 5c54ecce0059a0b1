// Package jsonstr writes strings as JSON, byte for byte as the standard
// library does, without its allocations: the list replies and the access
// log write one for every nickname, path and message.
package jsonstr

import "unicode/utf8"

// Style is how the two control characters that JSON may name, \b and \f,
// are written: the standard library's encoders differ on them.
type Style uint8

const (
	// EncodingJSON names \b and \f, as encoding/json does.
	EncodingJSON Style = iota
	// Slog writes \b and \f as \u0008 and \u000c, as log/slog does.
	Slog
)

const hexDigits = "0123456789abcdef"

// Append appends s as the contents of a JSON string, without the quotes,
// with HTML escaping off: '"', '\' and control characters escaped (\n, \r
// and \t by name; \b and \f as style says; the rest as \u00XX), U+2028 and
// U+2029 escaped because JavaScript reads them as line ends, and bytes
// that are not UTF-8 as \ufffd.
func Append(b []byte, s string, style Style) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\b' && style == EncodingJSON:
				b = append(b, '\\', 'b')
			case c == '\f' && style == EncodingJSON:
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += n
			continue
		}
		i += n
		start = i
	}
	return append(b, s[start:]...)
}

// Len returns len(Append(nil, s, EncodingJSON)) without building it.
func Len(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			n += 6
		} else {
			n += size
		}
		i += size
	}
	return n
}
