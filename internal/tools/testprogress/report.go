package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// event is one line of go test -json (see go doc test2json).
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64 // seconds
	Output      string
	ImportPath  string // of build-output and build-fail
	FailedBuild string // of a package's fail: the build that failed
}

// reporter turns events into lines for people. It is not safe for
// concurrent use: follow calls it from one goroutine.
type reporter struct {
	w        io.Writer
	began    time.Time
	quiet    time.Duration
	slowest  int
	lastLine time.Time // when the last line was printed

	running  map[string]*pkg // packages started and not ended
	order    []string        // running's keys, in the order they started
	ended    []*pkg
	builds   map[string][]string // build output, by import path, until it fails
	tests    []endedTest         // top-level tests that ended, less those of cached packages
	counts   tally               // top-level tests
	subtests tally
	skipped  []endedTest
	failures []string // what failed, for the summary
	failed   bool
}

// pkg is a package whose tests go test runs.
type pkg struct {
	path    string
	began   time.Time
	tests   map[string]*test // started and not ended
	output  []string         // printed by the package, outside any test
	counts  tally            // its top-level tests
	elapsed time.Duration
	cached  bool
	status  string // once it ended: "ok", "FAIL" or "-" (no test files)
}

// test is a test that started and has not ended.
type test struct {
	name   string
	since  time.Time // when it started, or continued after a pause
	paused bool      // a parallel test, waiting for the others
	output []string
}

// endedTest is a test that passed, failed or was skipped.
type endedTest struct {
	pkg, name string
	elapsed   time.Duration
	reason    string // why it was skipped
}

type tally struct{ passed, failed, skipped int }

func newReporter(w io.Writer, began time.Time, quiet time.Duration, slowest int) *reporter {
	return &reporter{
		w: w, began: began, quiet: quiet, slowest: slowest, lastLine: began,
		running: map[string]*pkg{}, builds: map[string][]string{},
	}
}

// printf prints one line, after the time since the run began.
func (r *reporter) printf(now time.Time, format string, args ...any) {
	fmt.Fprintf(r.w, "%5s  %s\n", clock(now.Sub(r.began)), fmt.Sprintf(format, args...))
	r.lastLine = now
}

// raw prints lines as they came, each ending in a newline.
func (r *reporter) raw(now time.Time, lines []string) {
	for _, l := range lines {
		writeLine(r.w, l)
	}
	if len(lines) > 0 {
		r.lastLine = now
	}
}

// line takes one line of go test's output. A line that is not an event (go
// test writes some of its own errors as text) is printed as it is.
func (r *reporter) line(line string, now time.Time) {
	var e event
	if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil || e.Action == "" {
		r.raw(now, []string{line})
		return
	}
	r.event(e, now)
}

func (r *reporter) event(e event, now time.Time) {
	switch e.Action {
	case "build-output":
		r.builds[e.ImportPath] = append(r.builds[e.ImportPath], e.Output)
		return
	case "build-fail":
		r.failed = true
		r.failures = append(r.failures, "build of "+e.ImportPath)
		r.printf(now, "build failed: %s", e.ImportPath)
		r.raw(now, r.builds[e.ImportPath])
		delete(r.builds, e.ImportPath)
		return
	}
	if e.Package == "" {
		return
	}
	p := r.running[e.Package]
	if p == nil {
		p = &pkg{path: e.Package, began: now, tests: map[string]*test{}}
		r.running[e.Package] = p
		r.order = append(r.order, e.Package)
		if e.Action == "start" {
			r.printf(now, "start %s", e.Package)
			return
		}
	}
	if e.Test == "" {
		r.packageEvent(p, e, now)
		return
	}
	t := p.tests[e.Test]
	switch e.Action {
	case "run":
		p.tests[e.Test] = &test{name: e.Test, since: now}
	case "pause":
		if t != nil {
			t.paused = true
		}
	case "cont":
		if t != nil {
			t.paused, t.since = false, now
		}
	case "output":
		if t != nil {
			t.output = append(t.output, e.Output)
		} else {
			p.output = append(p.output, e.Output)
		}
	case "pass", "fail", "skip":
		if t == nil {
			t = &test{name: e.Test}
		}
		delete(p.tests, e.Test)
		r.testEnded(p, t, e.Action, time.Duration(e.Elapsed*float64(time.Second)), now)
	}
}

// testEnded counts a test that ended, and prints it if it failed.
func (r *reporter) testEnded(p *pkg, t *test, action string, elapsed time.Duration, now time.Time) {
	c := &r.subtests
	topLevel := !strings.Contains(t.name, "/")
	if topLevel {
		c = &r.counts
	}
	ended := endedTest{pkg: p.path, name: t.name, elapsed: elapsed}
	c.add(action)
	switch action {
	case "skip":
		ended.reason = skipReason(t.output)
		r.skipped = append(r.skipped, ended)
	case "fail":
		r.failed = true
		r.failures = append(r.failures, t.name+" in "+p.path)
		r.printf(now, "FAIL %s in %s (%s)", t.name, p.path, duration(elapsed))
		if hasNews(t.output) {
			r.raw(now, t.output)
		}
	}
	if topLevel {
		p.counts.add(action)
		r.tests = append(r.tests, ended)
	}
}

// packageEvent takes an event of the package itself, outside its tests.
func (r *reporter) packageEvent(p *pkg, e event, now time.Time) {
	switch e.Action {
	case "output":
		p.output = append(p.output, e.Output)
		if strings.HasPrefix(e.Output, "ok ") && strings.Contains(e.Output, "(cached)") {
			p.cached = true
		}
		return
	case "pass", "fail", "skip":
	default:
		return
	}
	delete(r.running, p.path)
	r.order = slices.DeleteFunc(r.order, func(s string) bool { return s == p.path })
	p.elapsed = time.Duration(e.Elapsed * float64(time.Second))
	r.ended = append(r.ended, p)
	switch {
	case e.Action == "skip":
		p.status = "-"
		r.printf(now, "-    %s  no test files", p.path)
	case e.Action == "pass":
		p.status = "ok"
		r.printf(now, "ok   %s  %s", p.path, p.result())
	case e.FailedBuild != "":
		p.status = "FAIL"
		r.failed = true
		r.printf(now, "FAIL %s  build failed", p.path)
	default:
		p.status = "FAIL"
		r.failed = true
		// Tests still running when the package ended died with it: a
		// timeout, a panic in another goroutine, an os.Exit. Their
		// output says how.
		for _, t := range sortedTests(p.tests) {
			if strings.Contains(t.name, "/") {
				r.subtests.failed++
			} else {
				r.counts.failed++
				p.counts.failed++
			}
			r.failures = append(r.failures, t.name+" in "+p.path+" (did not finish)")
			r.printf(now, "FAIL %s in %s: did not finish, the package's test binary ended", t.name, p.path)
			r.raw(now, t.output)
		}
		if p.counts.failed == 0 {
			r.failures = append(r.failures, p.path)
		}
		if hasNews(p.output) {
			r.raw(now, p.output)
		}
		r.printf(now, "FAIL %s  %s", p.path, p.result())
	}
	// Cached results were measured on an earlier run: they take no time
	// now, and are left out of the slowest.
	if p.cached {
		r.tests = slices.DeleteFunc(r.tests, func(t endedTest) bool { return t.pkg == p.path })
	}
}

func (c *tally) add(action string) {
	switch action {
	case "pass":
		c.passed++
	case "fail":
		c.failed++
	case "skip":
		c.skipped++
	}
}

// result is what a package's end line says after its path.
func (p *pkg) result() string {
	s := duration(p.elapsed)
	if p.cached {
		s = "cached"
	}
	s += fmt.Sprintf(", %d passed", p.counts.passed)
	if p.counts.failed > 0 {
		s += fmt.Sprintf(", %d failed", p.counts.failed)
	}
	if p.counts.skipped > 0 {
		s += fmt.Sprintf(", %d skipped", p.counts.skipped)
	}
	return s
}

// tick prints which packages and tests are running, when no line has
// been printed for r.quiet.
func (r *reporter) tick(now time.Time) {
	if now.Sub(r.lastLine) < r.quiet {
		return
	}
	if len(r.order) == 0 {
		r.printf(now, "waiting for go test: no package running (building, linking, or done); %d ended", len(r.ended))
		return
	}
	var parts []string
	for _, path := range r.order {
		p := r.running[path]
		parts = append(parts, fmt.Sprintf("%s for %s: %s", path, duration(now.Sub(p.began)), runningTests(p, now)))
	}
	r.printf(now, "running %s", strings.Join(parts, "; "))
}

// runningTests names the tests of p that are running, the innermost
// subtests only, with how long they have run.
func runningTests(p *pkg, now time.Time) string {
	var names []string
	tests := sortedTests(p.tests)
	for _, t := range tests {
		if t.paused || slices.ContainsFunc(tests, func(u *test) bool { return !u.paused && strings.HasPrefix(u.name, t.name+"/") }) {
			continue
		}
		names = append(names, fmt.Sprintf("%s (%s)", t.name, duration(now.Sub(t.since))))
	}
	switch {
	case len(names) == 0:
		return "no test running"
	case len(names) > 3:
		return strings.Join(names[:3], ", ") + fmt.Sprintf(" and %d more", len(names)-3)
	}
	return strings.Join(names, ", ")
}

// finish prints the summary, and returns the exit status: 1 if anything
// failed or did not end, or if no package ran.
func (r *reporter) finish(now time.Time) int {
	for _, path := range slices.Sorted(maps.Keys(r.builds)) {
		r.printf(now, "build output of %s", path)
		r.raw(now, r.builds[path])
	}
	for _, path := range r.order {
		r.failed = true
		r.failures = append(r.failures, path+" (did not end)")
		p := r.running[path]
		r.printf(now, "FAIL %s: the events ended before the package did", path)
		for _, t := range sortedTests(p.tests) {
			r.raw(now, t.output)
		}
		r.raw(now, p.output)
	}
	status := map[string]int{}
	cached := 0
	for _, p := range r.ended {
		status[p.status]++
		if p.cached {
			cached++
		}
	}
	fmt.Fprintf(r.w, "\n%s in %s: %d ok (%d cached), %d failed, %d with no test files\n",
		count(len(r.ended)+len(r.order), "package"), duration(now.Sub(r.began)), status["ok"], cached, status["FAIL"]+len(r.order), status["-"])
	fmt.Fprintf(r.w, "tests: %d passed, %d failed, %d skipped; subtests: %d passed, %d failed, %d skipped\n",
		r.counts.passed, r.counts.failed, r.counts.skipped, r.subtests.passed, r.subtests.failed, r.subtests.skipped)
	if len(r.skipped) > 0 {
		fmt.Fprintln(r.w, "skipped:")
		for _, t := range r.skipped {
			fmt.Fprintf(r.w, "  %s in %s: %s\n", t.name, t.pkg, cmp.Or(t.reason, "no reason given"))
		}
	}
	r.printSlowest()
	if len(r.ended)+len(r.order) == 0 {
		fmt.Fprintln(r.w, "FAIL: go test reported no package")
		return 1
	}
	if r.failed {
		fmt.Fprintf(r.w, "FAIL: %s\n", strings.Join(r.failures, "; "))
		return 1
	}
	fmt.Fprintln(r.w, "PASS")
	return 0
}

func (r *reporter) printSlowest() {
	if r.slowest == 0 {
		return
	}
	tests := slices.Clone(r.tests)
	slices.SortStableFunc(tests, func(a, b endedTest) int { return cmp.Compare(b.elapsed, a.elapsed) })
	if len(tests) > 0 {
		fmt.Fprintln(r.w, "slowest tests:")
		for _, t := range tests[:min(r.slowest, len(tests))] {
			fmt.Fprintf(r.w, "  %7s  %s in %s\n", duration(t.elapsed), t.name, t.pkg)
		}
	}
	var pkgs []*pkg
	for _, p := range r.ended {
		if !p.cached && p.counts != (tally{}) {
			pkgs = append(pkgs, p)
		}
	}
	slices.SortStableFunc(pkgs, func(a, b *pkg) int { return cmp.Compare(b.elapsed, a.elapsed) })
	if len(pkgs) > 0 {
		fmt.Fprintln(r.w, "slowest packages:")
		for _, p := range pkgs[:min(r.slowest, len(pkgs))] {
			fmt.Fprintf(r.w, "  %7s  %s\n", duration(p.elapsed), p.path)
		}
	}
}

// hasNews reports whether output holds more than go test's framing: the
// lines that say a test runs, pauses, continues, and how it ended.
func hasNews(output []string) bool {
	for _, l := range output {
		l = strings.TrimSpace(l)
		switch {
		case l == "", l == "FAIL", l == "PASS", strings.HasPrefix(l, "=== "), strings.HasPrefix(l, "--- FAIL: "),
			strings.HasPrefix(l, "FAIL\t"):
		default:
			return true
		}
	}
	return false
}

// skipReason returns what a skipped test said, from its output: t.Skip's
// message is the line above "--- SKIP".
func skipReason(output []string) string {
	var said []string
	for _, l := range output {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "--- ") {
			said = append(said, l)
		}
	}
	if len(said) == 0 {
		return ""
	}
	// "file_test.go:12: message": the message alone.
	last := said[len(said)-1]
	if _, msg, ok := strings.Cut(last, ": "); ok && strings.Contains(last[:strings.Index(last, ": ")], ".go:") {
		return msg
	}
	return last
}

func sortedTests(tests map[string]*test) []*test {
	return slices.SortedFunc(maps.Values(tests), func(a, b *test) int { return strings.Compare(a.name, b.name) })
}

// count is n and noun, in the plural unless n is 1.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// duration is d the way go test prints times, rounded for people: 0.4s,
// 12.3s, 1m02s.
func duration(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
}

// clock is the time since the run began, as m:ss.
func clock(d time.Duration) string {
	d = d.Truncate(time.Second)
	return fmt.Sprintf("%d:%02d", int(d/time.Minute), int(d%time.Minute/time.Second))
}
