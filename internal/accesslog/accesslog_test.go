package accesslog

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// viaSlog returns e's line as the service wrote it before: through slog.
func viaSlog(e *Entry, json bool) string {
	var buf bytes.Buffer
	var h slog.Handler = slog.NewTextHandler(&buf, nil)
	if json {
		h = slog.NewJSONHandler(&buf, nil)
	}
	level := slog.LevelInfo
	if e.Err != "" {
		level = slog.LevelError
	}
	r := slog.NewRecord(e.Time, level, "request", 0)
	r.AddAttrs(slog.String("method", e.Method), slog.String("path", e.Path), slog.Int("status", e.Status),
		slog.Duration("duration", e.Duration), slog.String("request_id", e.RequestID))
	if e.Principal != "" {
		r.AddAttrs(slog.String("principal", e.Principal))
	}
	if e.UID != 0 {
		r.AddAttrs(slog.Int64("uid", e.UID))
	}
	if e.Err != "" {
		r.AddAttrs(slog.String("err", e.Err))
	}
	if err := h.Handle(context.Background(), r); err != nil {
		panic(err)
	}
	return buf.String()
}

func check(t *testing.T, e *Entry) {
	t.Helper()
	for _, json := range []bool{false, true} {
		got := string(New(nil, json).Append(nil, e))
		require.Equal(t, viaSlog(e, json), got, "json %v, entry %+v", json, e)
	}
}

func TestLinesAreSlogs(t *testing.T) {
	at := time.Date(2026, 11, 23, 4, 5, 6, 7008009, time.UTC)
	for _, e := range []Entry{
		{Time: at, Method: "GET", Path: "/group-user/g", Status: 200, Duration: 1234567, RequestID: "b84c343627bd-3"},
		{Time: at, Method: "POST", Path: "/group-user/a=b", Status: 400, Duration: time.Microsecond, RequestID: "x", UID: 42},
		{Time: at, Method: "PUT", Path: "/group-user/g", Status: 200, Duration: time.Millisecond, RequestID: "y", Principal: "sync-job@team-a:1.x", UID: 7},
		{Time: at, Method: "GET", Path: "/groups", Status: 200, Duration: time.Millisecond, RequestID: "z", Principal: "token"},
		{Time: at.Truncate(time.Second), Method: "GET", Path: "", Status: 503, Duration: 0, RequestID: ""},
		{Time: at.In(time.FixedZone("x", -5*3600)), Method: "DELETE", Path: `/a"b\c`, Status: 500, Duration: 90 * time.Minute,
			RequestID: "r", Err: "panic: boom\n\tgoroutine 1 [running]:\n\x00\x7f\u2028\u2029é\xff"},
		{Time: at, Method: "G ET", Path: "/é/\u00a0/\u200b", Status: 499, Duration: 61*time.Second + 5, RequestID: "a:b.c_d-e"},
	} {
		check(t, &e)
	}
}

// Random strings of every kind of byte and rune, and random durations,
// against slog.
func TestLinesAreSlogsAtRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "Z", "0", " ", "=", `"`, `\`, "\n", "\t", "\r", "\x00", "\x1f", "\x7f", "é", "\u00a0", "\u2028",
		"\u2029", "\u200b", "\ufffd", "\xff", "\xe2\x80", "µ", "<", ">", "&", "/", "%2E", "😀", "\u0085", "\u3000"}
	str := func() string {
		var b []byte
		for range rng.IntN(6) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		return string(b)
	}
	for range 20000 {
		e := Entry{
			Time:      time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).UTC(),
			Method:    str(),
			Path:      str(),
			Status:    rng.IntN(600),
			Duration:  time.Duration(rng.Int64N(1 << uint(rng.IntN(62)))),
			RequestID: str(),
		}
		if rng.IntN(3) == 0 {
			e.UID = rng.Int64()
		}
		if rng.IntN(3) == 0 {
			e.Principal = str()
		}
		if rng.IntN(4) == 0 {
			e.Err = str()
		}
		check(t, &e)
	}
}

// The line's time, written digit by digit, against time's own layouts, in
// zones east and west of UTC, whole hours or not, and in years that time
// writes in other forms.
func TestTimesAreTheLayoutsTimes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	zones := []*time.Location{time.UTC, time.FixedZone("e", 5*3600+30*60), time.FixedZone("w", -(9*3600 + 45*60)),
		time.FixedZone("s", 3600+7), time.FixedZone("far", -23*3600-59*60)}
	for range 20000 {
		at := time.Unix(rng.Int64N(1<<40)-1<<39, rng.Int64N(1e9)).In(zones[rng.IntN(len(zones))])
		if rng.IntN(10) == 0 {
			at = at.AddDate(rng.IntN(40000)-20000, 0, 0)
		}
		want := string(appendRFC3339MillisSlowly(nil, at))
		require.Equal(t, want, string(appendRFC3339Millis(nil, at)), "%v", at)
	}
	// The edges: years around 0 and 9999, and offsets of seconds, of a
	// minute, and of 100 hours and more, which need three digits.
	for _, year := range []int{-10000, -1, 0, 1, 999, 1000, 9999, 10000, 99999} {
		for _, offset := range []int{0, 30, -30, 60, -60, -(3600 + 7), 24 * 3600, -24 * 3600, 99*3600 + 59*60, 100 * 3600, -100 * 3600, 150*3600 + 30*60} {
			at := time.Date(year, 12, 31, 23, 59, 59, 999999999, time.FixedZone("z", offset))
			require.Equal(t, string(appendRFC3339MillisSlowly(nil, at)), string(appendRFC3339Millis(nil, at)), "%v", at)
		}
	}
}

// One logger's times, as lines come: many to a second, now and then into
// the next second, a zone or a year, and back; the text of a second is
// made once and reused, and must be that second's, in that zone.
func TestTimesOfOneLoggerAreTheLayoutsTimes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("e", 5*3600+30*60), time.FixedZone("w", -(9*3600 + 45*60)), time.FixedZone("s", 3600+7)}
	l := New(nil, false)
	at := time.Date(2026, 12, 31, 23, 59, 58, 0, time.UTC)
	for range 50000 {
		switch k := rng.IntN(100); {
		case k < 80:
			at = at.Add(time.Duration(rng.Int64N(int64(50 * time.Millisecond)))) // the next line, often in the same second
		case k < 90:
			at = at.In(zones[rng.IntN(len(zones))])
		case k < 95:
			at = at.Add(-time.Duration(rng.Int64N(int64(2 * time.Second))))
		default:
			at = at.AddDate(rng.IntN(20000)-10000, 0, 0)
		}
		require.Equal(t, string(appendRFC3339MillisSlowly(nil, at)), string(l.appendTime(nil, at)), "%v", at)
	}
}

func TestDurationsAreDurationStrings(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 999, 1000, 1001, 1010, 1100, 999999, 1000000, 1000001, 1500000, 999999999, time.Second,
		time.Second + 1, time.Minute, time.Minute + time.Millisecond, time.Hour, time.Hour + 1, 100*time.Hour + 59*time.Minute + 59*time.Second + 999999999,
		1<<63 - 1, -1, -time.Hour} {
		assert.Equal(t, d.String(), string(appendDuration(nil, d)), "%d", int64(d))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		d := time.Duration(rng.Int64N(1 << uint(rng.IntN(63))))
		require.Equal(t, d.String(), string(appendDuration(nil, d)), "%d", int64(d))
	}
}

func TestLogWritesOneLineInOneWriteWithoutAllocating(t *testing.T) {
	var w countingWriter
	l := New(&w, false)
	e := &Entry{Time: time.Now(), Method: "GET", Path: "/group-user/g", Status: 200, Duration: 1234567, RequestID: "b84c343627bd-3", Principal: "sync-job", UID: 7}
	l.Log(e)
	assert.Equal(t, 1, w.writes)
	assert.Equal(t, viaSlog(e, false), w.last)
	for _, json := range []bool{false, true} {
		l := New(&w, json)
		allocs := testing.AllocsPerRun(1000, func() { l.Log(e) })
		assert.Zero(t, allocs, "json %v", json)
	}
}

type countingWriter struct {
	writes int
	last   string
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.writes == 1 {
		w.last = string(p)
	}
	return len(p), nil
}

func BenchmarkLine(b *testing.B) {
	e := &Entry{Time: time.Now(), Method: "POST", Path: "/group-user/g123", Status: 200, Duration: 1234567, RequestID: "b84c343627bd-3", UID: 7}
	for _, json := range []bool{false, true} {
		name := map[bool]string{false: "text", true: "json"}[json]
		b.Run("accesslog/"+name, func(b *testing.B) {
			l := New(discard{}, json)
			for b.Loop() {
				l.Log(e)
			}
		})
		b.Run("slog/"+name, func(b *testing.B) {
			var h slog.Handler = slog.NewTextHandler(discard{}, nil)
			if json {
				h = slog.NewJSONHandler(discard{}, nil)
			}
			logger := slog.New(h)
			ctx := context.Background()
			for b.Loop() {
				logger.LogAttrs(ctx, slog.LevelInfo, "request", slog.String("method", e.Method), slog.String("path", e.Path),
					slog.Int("status", e.Status), slog.Duration("duration", e.Duration), slog.String("request_id", e.RequestID), slog.Int64("uid", e.UID))
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
