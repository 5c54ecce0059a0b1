package main

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// textReporter passes lines of text through as they come and, after quiet
// without a line, says how long it has been since the last one, and which
// it was: for a step like make clients, whose commands print a line now
// and then, and nothing while they fetch or compile.
type textReporter struct {
	w         io.Writer
	began     time.Time
	quiet     time.Duration
	lastLine  time.Time // when the last line was printed, passed on or not
	lastInput time.Time // when the last line of the input came
	last      string    // the last line of the input
}

func newTextReporter(w io.Writer, began time.Time, quiet time.Duration) *textReporter {
	return &textReporter{w: w, began: began, quiet: quiet, lastLine: began, lastInput: began}
}

func (r *textReporter) line(line string, now time.Time) {
	writeLine(r.w, line)
	r.last = strings.TrimSpace(line)
	r.lastLine, r.lastInput = now, now
}

func (r *textReporter) tick(now time.Time) {
	if now.Sub(r.lastLine) < r.quiet {
		return
	}
	if r.last == "" {
		fmt.Fprintf(r.w, "%5s  still running, nothing printed yet\n", clock(now.Sub(r.began)))
	} else {
		fmt.Fprintf(r.w, "%5s  still running, %s after: %s\n", clock(now.Sub(r.began)), duration(now.Sub(r.lastInput)), shorten(r.last, 100))
	}
	r.lastLine = now
}

// finish returns 0: the exit status of the step is the pipeline's.
func (r *textReporter) finish(time.Time) int { return 0 }

// writeLine writes line, and a newline after it if it has none.
func writeLine(w io.Writer, line string) {
	io.WriteString(w, line)
	if !strings.HasSuffix(line, "\n") {
		io.WriteString(w, "\n")
	}
}

// shorten returns s, cut to n runes with an ellipsis if it is longer.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
