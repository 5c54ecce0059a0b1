// Package accesslog writes the access log: one line per request, exactly
// as log/slog's TextHandler or JSONHandler would write the record
// "request" with its attributes, but encoded by hand into a pooled buffer,
// with no allocation, and written in one call. A test holds it to slog's
// output, byte for byte.
package accesslog

import (
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"example.com/groupmembership/internal/jsonstr"
)

// Entry is one request's line.
type Entry struct {
	Time      time.Time
	Method    string
	Path      string
	Status    int
	Duration  time.Duration
	RequestID string
	Principal string // the name the request was authenticated as; "" for none
	UID       int64  // the acting uid; 0 for none
	Err       string // what failed on the service's side; "" for nothing, and then the level is INFO, not ERROR
}

// Logger writes entries to its writer, as text or JSON.
type Logger struct {
	w    io.Writer
	json bool
	bufs sync.Pool // of *[]byte
	// second is the text of the second the latest line's time fell in:
	// lines come many to a second, and its text costs more to make than to
	// copy.
	second atomic.Pointer[secondText]
}

// secondText is the text of the times of one second in one location, as
// appendRFC3339Millis writes them: what comes before their milliseconds
// and, after them, the zone.
type secondText struct {
	unix         int64
	loc          *time.Location
	prefix, zone string
}

// maxPooled bounds the buffers kept for reuse: a line with a long error
// (a panic's stack) is encoded in a buffer of its own, then dropped.
const maxPooled = 4 << 10

// New returns a Logger that writes to w, as JSONHandler does when json is
// set, as TextHandler does otherwise.
func New(w io.Writer, json bool) *Logger {
	l := &Logger{w: w, json: json}
	l.bufs.New = func() any { b := make([]byte, 0, 512); return &b }
	return l
}

// Log writes e's line in one call of the writer's Write. Errors of the
// writer are dropped, as slog's Logger drops them.
func (l *Logger) Log(e *Entry) {
	bp := l.bufs.Get().(*[]byte)
	*bp = l.Append((*bp)[:0], e)
	_, _ = l.w.Write(*bp)
	if cap(*bp) <= maxPooled {
		l.bufs.Put(bp)
	}
}

// Append appends e's line, newline included, to b.
func (l *Logger) Append(b []byte, e *Entry) []byte {
	if l.json {
		return appendJSON(b, e)
	}
	return l.appendText(b, e)
}

func level(e *Entry) string {
	if e.Err != "" {
		return "ERROR"
	}
	return "INFO"
}

// appendText writes e as TextHandler does: key=value pairs, the time in
// RFC 3339 with milliseconds, strings quoted when they need it.
func (l *Logger) appendText(b []byte, e *Entry) []byte {
	b = append(b, "time="...)
	b = l.appendTime(b, e.Time)
	b = append(b, " level="...)
	b = append(b, level(e)...)
	b = append(b, " msg=request method="...)
	b = appendTextString(b, e.Method)
	b = append(b, " path="...)
	b = appendTextString(b, e.Path)
	b = append(b, " status="...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, " duration="...)
	b = appendDuration(b, e.Duration)
	b = append(b, " request_id="...)
	b = appendTextString(b, e.RequestID)
	if e.Principal != "" {
		b = append(b, " principal="...)
		b = appendTextString(b, e.Principal)
	}
	if e.UID != 0 {
		b = append(b, " uid="...)
		b = strconv.AppendInt(b, e.UID, 10)
	}
	if e.Err != "" {
		b = append(b, " err="...)
		b = appendTextString(b, e.Err)
	}
	return append(b, '\n')
}

// appendJSON writes e as JSONHandler does: one object, the time in RFC 3339
// with nanoseconds, the duration in nanoseconds.
func appendJSON(b []byte, e *Entry) []byte {
	b = append(b, `{"time":"`...)
	b = e.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"`...)
	b = append(b, level(e)...)
	b = append(b, `","msg":"request","method":"`...)
	b = appendJSONString(b, e.Method)
	b = append(b, `","path":"`...)
	b = appendJSONString(b, e.Path)
	b = append(b, `","status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, `,"duration":`...)
	b = strconv.AppendInt(b, int64(e.Duration), 10)
	b = append(b, `,"request_id":"`...)
	b = appendJSONString(b, e.RequestID)
	b = append(b, '"')
	if e.Principal != "" {
		b = append(b, `,"principal":"`...)
		b = appendJSONString(b, e.Principal)
		b = append(b, '"')
	}
	if e.UID != 0 {
		b = append(b, `,"uid":`...)
		b = strconv.AppendInt(b, e.UID, 10)
	}
	if e.Err != "" {
		b = append(b, `,"err":"`...)
		b = appendJSONString(b, e.Err)
		b = append(b, '"')
	}
	return append(b, "}\n"...)
}

// appendTime is appendRFC3339Millis with the text of t's second, but for
// its milliseconds, made once a second (and location), not once a line.
func (l *Logger) appendTime(b []byte, t time.Time) []byte {
	sec := l.second.Load()
	if sec == nil || sec.unix != t.Unix() || sec.loc != t.Location() {
		text := string(appendRFC3339Millis(nil, t))
		dot := strings.IndexByte(text, '.') // the date and the clock have none, the zone neither
		sec = &secondText{unix: t.Unix(), loc: t.Location(), prefix: text[:dot+1], zone: text[dot+4:]}
		l.second.Store(sec)
	}
	ms := t.Nanosecond() / int(time.Millisecond)
	b = append(b, sec.prefix...)
	b = append(b, byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(b, sec.zone...)
}

// appendRFC3339Millis appends t as 2006-01-02T15:04:05.000Z07:00: the
// milliseconds always three digits, truncated.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	year, month, day := t.Date()
	_, offset := t.Zone()
	if year < 0 || year > 9999 || offset%60 != 0 || offset <= -100*3600 || offset >= 100*3600 {
		return appendRFC3339MillisSlowly(b, t) // AppendFormat's own forms
	}
	hour, minute, second := t.Clock()
	ms := t.Nanosecond() / int(time.Millisecond)
	b = append(b, byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-')
	b = append2Digits(b, int(month), '-')
	b = append2Digits(b, day, 'T')
	b = append2Digits(b, hour, ':')
	b = append2Digits(b, minute, ':')
	b = append2Digits(b, second, '.')
	b = append(b, byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	if offset == 0 {
		return append(b, 'Z')
	}
	sign := byte('+')
	if offset < 0 {
		sign, offset = '-', -offset
	}
	b = append(b, sign)
	b = append2Digits(b, offset/3600, ':')
	return append(b, byte('0'+offset/60%60/10), byte('0'+offset/60%10))
}

// append2Digits appends v, 0 to 99, in two digits, then sep.
func append2Digits(b []byte, v int, sep byte) []byte {
	return append(b, byte('0'+v/10), byte('0'+v%10), sep)
}

// appendRFC3339MillisSlowly is appendRFC3339Millis through time's layouts:
// the reference, and the form of years out of 0 to 9999, of offsets in
// seconds and of offsets of 100 hours or more.
func appendRFC3339MillisSlowly(b []byte, t time.Time) []byte {
	b = t.AppendFormat(b, "2006-01-02T15:04:05")
	ms := t.Nanosecond() / int(time.Millisecond)
	b = append(b, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return t.AppendFormat(b, "Z07:00")
}

// appendTextString appends s, quoted (strconv.Quote) when it is empty or
// holds a space, '=', '"', a control character below ' ', a non-ASCII
// rune that is a space or does not print, or bytes that are not UTF-8 (as
// slog: DEL goes unquoted).
func appendTextString(b []byte, s string) []byte {
	if needsQuotes(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

func needsQuotes(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if quotedASCII[c] {
				return true
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += n
	}
	return false
}

// quotedASCII holds the ASCII characters that make a string quoted: the
// controls, space, '=' and '"' (DEL is left as it is, as slog leaves it).
var quotedASCII = func() (q [utf8.RuneSelf]bool) {
	for c := range q {
		q[c] = c <= ' ' || c == '=' || c == '"'
	}
	return q
}()

// appendJSONString appends s escaped for a JSON string, without the
// quotes, as log/slog escapes it (see jsonstr.Append).
func appendJSONString(b []byte, s string) []byte {
	return jsonstr.Append(b, s, jsonstr.Slog)
}

// appendDuration appends d as d.String() writes it ("1.5ms", "2m0.25s"),
// without allocating.
func appendDuration(b []byte, d time.Duration) []byte {
	if d < 0 {
		return append(b, d.String()...) // never for a request's duration
	}
	switch {
	case d == 0:
		return append(b, "0s"...)
	case d < time.Microsecond:
		return append(strconv.AppendInt(b, int64(d), 10), "ns"...)
	case d < time.Millisecond:
		return append(appendDecimal(b, int64(d), 3), "µs"...)
	case d < time.Second:
		return append(appendDecimal(b, int64(d), 6), "ms"...)
	}
	h, m := d/time.Hour, d%time.Hour/time.Minute
	if h > 0 {
		b = append(strconv.AppendInt(b, int64(h), 10), 'h')
	}
	if h > 0 || m > 0 {
		b = append(strconv.AppendInt(b, int64(m), 10), 'm')
	}
	return append(appendDecimal(b, int64(d%time.Minute), 9), 's')
}

// appendDecimal appends v / 10^digits, with its fraction's trailing zeros
// (and a bare point) dropped.
func appendDecimal(b []byte, v int64, digits int) []byte {
	unit := int64(1)
	for range digits {
		unit *= 10
	}
	b = strconv.AppendInt(b, v/unit, 10)
	frac := v % unit
	if frac == 0 {
		return b
	}
	for frac%10 == 0 {
		frac /= 10
		unit /= 10
	}
	b = append(b, '.')
	for p := unit / 10; p > frac; p /= 10 {
		b = append(b, '0') // the fraction's leading zeros
	}
	return strconv.AppendInt(b, frac, 10)
}
