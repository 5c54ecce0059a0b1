// Command bench compares the membership service with Redis sets and with a
// bare net/http handler, side by side in one run on loopback, and prints one
// table: throughput and p99 latency per operation, the ratios that the
// performance targets are stated in, and memory per membership.
//
// It is a module of its own (bench/go.mod), so that the service's module
// compiles none of it. Run it with `make bench` from the repository root,
// which installs wrk and redis-server first when they are missing, builds
// it into bin/bench and runs it there: it builds the service from ".".
package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"example.com/groupmembership/bench/loadtest"
	"example.com/groupmembership/internal/server"
)

type options struct {
	duration    time.Duration
	rounds      int
	connections int
	threads     int
	groups      int
	perGroup    int
	serviceArgs string
	serviceBin  string
	quietRows   bool
	baseline    string
	before      string
	only        *regexp.Regexp
	memory      bool
	nesting     bool
	nestMemory  bool
	nestSettle  time.Duration
	smallGroups bool
}

func main() {
	var opts options
	flag.DurationVar(&opts.duration, "duration", 5*time.Second, "length of each load run")
	flag.IntVar(&opts.rounds, "rounds", 3, "rounds of all runs; the table shows medians")
	flag.IntVar(&opts.connections, "c", 50, "connections per load run")
	flag.IntVar(&opts.threads, "t", 2, "client threads for wrk and redis-benchmark")
	flag.IntVar(&opts.groups, "mem-groups", 1000, "groups loaded for the memory comparison")
	flag.IntVar(&opts.perGroup, "mem-members", 1000, "members per group loaded for the memory comparison")
	flag.StringVar(&opts.serviceArgs, "service-args", "", "extra flags for the service, space-separated")
	flag.StringVar(&opts.serviceBin, "service", "", "a service binary to measure instead of building this checkout's")
	flag.BoolVar(&opts.quietRows, "quiet-rows", true, "also measure the service with -access-log=false (needs a service that has the flag)")
	flag.StringVar(&opts.baseline, "baseline", "", "instead of the comparison with Redis, measure what metrics and revisions cost: this service `binary` is the build from before them")
	flag.StringVar(&opts.before, "before", "", "also measure this service `binary` (an earlier build), as the rows \"before ...\", side by side with this one")
	only := flag.String("only", "", "run only the rows whose names match this `regexp` (such as 'POST' or 'GET 10$'); the targets of rows not run are not reported")
	flag.BoolVar(&opts.memory, "memory", true, "compare memory first, loading 1,000,000 memberships into each service, which then serve the load rows with them (false: the services hold only the lists the rows read)")
	flag.BoolVar(&opts.nesting, "nesting", true, "also load the nesting rows (transitive check, page and add, each beside its direct one) (each pair side by side)")
	flag.BoolVar(&opts.nestMemory, "nest-memory", true, "measure the RSS of 1,000,000 users in 100,000 groups nested 5 deep, and the bytes a nesting edge costs")
	flag.DurationVar(&opts.nestSettle, "nest-settle", 20*time.Second, "idle time before each RSS reading of the nesting memory")
	flag.BoolVar(&opts.smallGroups, "small-groups", true, "measure the bytes a membership of 100,000 groups of 10 and 1,000,000 groups of 3, each in a service of its own and in Redis")
	flag.Parse()
	if *only != "" {
		var err error
		if opts.only, err = regexp.Compile(*only); err != nil {
			fmt.Fprintln(os.Stderr, "bench: -only:", err)
			os.Exit(2)
		}
	}
	if err := run(opts); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(opts options) error {
	tmp, err := os.MkdirTemp("", "membership-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	luaPath := filepath.Join(tmp, "post.lua")
	if err := os.WriteFile(luaPath, loadtest.PostLua, 0o644); err != nil {
		return err
	}
	if opts.baseline != "" {
		return runOverhead(opts, luaPath, tmp)
	}
	for _, tool := range []string{"wrk", "redis-server", "redis-benchmark"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed: run `make bench`, which installs it", tool)
		}
	}
	h := &harness{opts: opts, tmp: tmp, luaPath: luaPath}
	defer h.stop()
	if err := h.start(); err != nil {
		return err
	}
	fmt.Printf("membership bench: %d rounds of %s per run, %d connections, %d client threads, GOMAXPROCS of the machine: %d cores\n",
		opts.rounds, opts.duration, opts.connections, opts.threads, loadtest.NumCPU())
	fmt.Printf("  load average before: %s\n", loadAverage())

	// Memory first, while the service's list cache is empty.
	var mem *memory
	if opts.memory {
		m, err := h.measureMemory()
		if err != nil {
			return err
		}
		mem = &m
	}
	var nestMem *nestMemory
	if opts.nestMemory {
		m, err := h.measureNestMemory(opts.nestSettle)
		if err != nil {
			return fmt.Errorf("nesting memory: %w", err)
		}
		nestMem = &m
	}
	var small []smallMemory
	if opts.smallGroups {
		if small, err = h.measureSmallGroups(); err != nil {
			return fmt.Errorf("small groups: %w", err)
		}
	}
	if err := h.fillLists(); err != nil {
		return err
	}
	// The bare and replay handlers serve what fillLists captured: they
	// start after it.
	if err := h.startBare(); err != nil {
		return err
	}
	if opts.nesting && nestRowsRun(opts.only) {
		if err := h.startNesting(); err != nil {
			return err
		}
	}
	if err := h.startTLSTwins(); err != nil {
		return fmt.Errorf("the HTTPS rows: %w", err)
	}
	results, err := h.runRounds()
	if err != nil {
		return err
	}
	fmt.Printf("  load average after the rows: %s\n", loadAverage())
	h.report(results, mem, nestMem, small)
	return nil
}

// runRounds runs every row (of -only) once a round, and returns the
// results of each.
func (h *harness) runRounds() (map[string][]loadtest.Result, error) {
	results := map[string][]loadtest.Result{}
	for round := 1; round <= h.opts.rounds; round++ {
		h.round = round
		for _, s := range h.scenarios() {
			if h.opts.only != nil && !h.opts.only.MatchString(s.name) {
				continue
			}
			r, err := s.run()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.name, err)
			}
			fmt.Printf("  round %d  %-22s %10.0f req/s  p99 %s\n", round, s.name, r.RPS, r.P99)
			results[s.name] = append(results[s.name], r)
		}
	}
	return results, nil
}

// harness is what the comparison runs against: the service (and, with
// quietRows, the same without its access log; the same with -data-dir; with
// opts.before, an earlier build), a bare handler, and Redis, each on its own
// loopback port.
type harness struct {
	opts    options
	round   int // the round scenarios are for, from 1
	tmp     string
	luaPath string
	stops   []func()

	svcBin                       string
	svcAddr, quietAddr, bareAddr string
	// dataDirAddr is the service with -data-dir, in a directory of tmp:
	// every change fsynced, by group commit, before it is answered.
	dataDirAddr string
	beforeAddr  string // the service opts.before names; "" without it
	timedAddr   string // the bare handler with the service's timeouts
	// replayAddr serves the service's own replies, captured by fillLists,
	// with the service's timeouts: what net/http allows for what the
	// service sends, with nothing computed.
	replayAddr string
	replies    replies
	// nullAddr is the service with a store whose adds keep nothing
	// (bench/nullstore): the ceiling of POST for a service that parses,
	// checks, logs and answers it as this one does.
	nullAddr string
	svcPid   int
	// nestAddr is the service the nesting rows load (startNesting), and
	// nestLua their POST script, to groups that each have 100 ancestors.
	// nestCheckLua and nestCheckTransitiveLua post the checks.
	nestAddr, nestLua                    string
	nestCheckLua, nestCheckTransitiveLua string
	redisPort                            string
	rc                                   *redisConn
	// httpTwin and httpsTwin are the services of the HTTPS rows
	// (startTLSTwins); "" when no such row runs.
	httpTwin, httpsTwin string
}

// start starts the services and Redis (the bare and replay handlers start
// once fillLists has captured what they send); stop stops whatever was
// started, even after an error.
func (h *harness) start() error {
	// The service, built and run as users run it (default flags, but for
	// limits that let the memory load send 1000 users a request), its log
	// in a file.
	bin, err := serviceBinary(h.opts, h.tmp)
	if err != nil {
		return err
	}
	h.svcBin = bin
	var stop func()
	if h.svcAddr, h.svcPid, stop, err = loadtest.StartService(bin, h.tmp, "service", h.opts.serviceArgs); err != nil {
		return err
	}
	h.stops = append(h.stops, stop)
	// The same service without its access log, to show what the log costs.
	if h.opts.quietRows {
		if h.quietAddr, _, stop, err = loadtest.StartService(bin, h.tmp, "quiet", h.opts.serviceArgs+" -access-log=false"); err != nil {
			return err
		}
		h.stops = append(h.stops, stop)
	}
	// The same service keeping its data in a directory of tmp, removed
	// at the end with the rest of tmp.
	if h.dataDirAddr, _, stop, err = loadtest.StartService(bin, h.tmp, "service-data-dir",
		h.opts.serviceArgs+" -data-dir "+filepath.Join(h.tmp, "data")); err != nil {
		return err
	}
	h.stops = append(h.stops, stop)
	if h.opts.before != "" {
		if h.beforeAddr, _, stop, err = loadtest.StartService(h.opts.before, h.tmp, "before", h.opts.serviceArgs); err != nil {
			return fmt.Errorf("-before: %w", err)
		}
		h.stops = append(h.stops, stop)
	}
	nullBin, err := build("bench", "./nullstore", "nullstore", h.tmp)
	if err != nil {
		return err
	}
	if h.nullAddr, _, stop, err = loadtest.StartService(nullBin, h.tmp, "nullstore", h.opts.serviceArgs); err != nil {
		return fmt.Errorf("%w (bench/nullstore takes -service-args too, but not the flags of a data directory)", err)
	}
	h.stops = append(h.stops, stop)
	return h.startRedis()
}

func (h *harness) stop() {
	for i := len(h.stops) - 1; i >= 0; i-- {
		h.stops[i]()
	}
}

// startBare starts the ceiling: a handler that does nothing but write a
// constant, or, for /group-user/list1000, the bytes the service gives for
// that group (set by fillLists); the same with the service's timeouts; and
// the replay of the service's replies.
func (h *harness) startBare() error {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/group-user/list1000" {
			w.Header().Set("Content-Length", strconv.Itoa(len(h.replies.list1000.body)))
			_, _ = w.Write(h.replies.list1000.body)
			return
		}
		_, _ = w.Write([]byte("[]"))
	})
	var err error
	if h.bareAddr, err = h.serve(handler, false); err != nil {
		return err
	}
	// The same handler with the service's timeouts: the deadlines they set
	// on every request are the part of the service's cost that no handler
	// can save.
	if h.timedAddr, err = h.serve(handler, true); err != nil {
		return err
	}
	// The replay of the service's replies, headers and body, with its
	// timeouts: the ceiling of each target for a service that sends what
	// this one sends.
	h.replayAddr, err = h.serve(http.HandlerFunc(h.replies.serve), true)
	return err
}

// serve serves handler on a free loopback port, with the service's
// timeouts or none, until stop, and returns its address.
func (h *harness) serve(handler http.Handler, timeouts bool) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: handler}
	if timeouts {
		server.SetTimeouts(srv)
	}
	go func() { _ = srv.Serve(ln) }()
	h.stops = append(h.stops, func() { srv.Close() })
	return ln.Addr().String(), nil
}

// replies are the service's replies to the three requests the targets
// measure, as the service sent them.
type replies struct {
	list10, list1000, post3 capturedReply
}

// capturedReply is a reply's header fields, but for Date, which net/http
// adds to every reply, and its body.
type capturedReply struct {
	fields []headerField
	body   []byte
}

type headerField struct {
	key    string
	values []string
}

// serve answers a POST with the POST's reply, after reading its body as the
// service must, and a GET with the list the path names.
func (rs *replies) serve(w http.ResponseWriter, r *http.Request) {
	reply := &rs.list10
	switch {
	case r.Method == http.MethodPost:
		_, _ = io.Copy(io.Discard, r.Body)
		reply = &rs.post3
	case r.URL.Path == "/group-user/list1000":
		reply = &rs.list1000
	}
	h := w.Header()
	for _, f := range reply.fields {
		h[f.key] = f.values
	}
	_, _ = w.Write(reply.body)
}

// captureClient gives up on a service that does not answer.
var captureClient = &http.Client{Timeout: 10 * time.Second}

// capture sends req to the service and keeps its reply, which must be 200.
func capture(req *http.Request) (capturedReply, error) {
	resp, err := captureClient.Do(req)
	if err != nil {
		return capturedReply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s %s: %s", req.Method, req.URL, resp.Status)
	}
	reply := capturedReply{body: body}
	for k, v := range resp.Header {
		if k != "Date" {
			reply.fields = append(reply.fields, headerField{k, v})
		}
	}
	return reply, err
}

// startRedis starts Redis, persistence off.
func (h *harness) startRedis() error {
	redisAddr, err := loadtest.FreeAddr()
	if err != nil {
		return err
	}
	_, h.redisPort, _ = net.SplitHostPort(redisAddr)
	redis := exec.Command("redis-server", "--port", h.redisPort, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := redis.Start(); err != nil {
		return err
	}
	h.stops = append(h.stops, func() { _ = redis.Process.Kill(); _ = redis.Wait() })
	if h.rc, err = dialRedis(redisAddr); err != nil {
		return fmt.Errorf("redis did not start: %w", err)
	}
	h.stops = append(h.stops, func() { h.rc.conn.Close() })
	return nil
}

// fillLists makes the groups and sets that the GET and SMEMBERS runs read.
func (h *harness) fillLists() error {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{10, 1000} {
		uids := loadtest.RandomUIDs(rng, size, 1e9)
		for _, addr := range []string{h.svcAddr, h.quietAddr, h.dataDirAddr, h.beforeAddr} {
			if addr == "" {
				continue
			}
			if err := loadtest.PostUsers("http://"+addr, fmt.Sprintf("list%d", size), uids); err != nil {
				return err
			}
		}
		if err := h.rc.sadd(fmt.Sprintf("list%d", size), uids); err != nil {
			return err
		}
	}
	// The replies the replay server sends: the service's own, for the
	// requests the targets measure (a POST as post.lua sends it).
	svcURL := "http://" + h.svcAddr
	for _, c := range []struct {
		reply              *capturedReply
		method, path, form string
	}{
		{&h.replies.list10, "GET", "/group-user/list10", ""},
		{&h.replies.list1000, "GET", "/group-user/list1000", ""},
		{&h.replies.post3, "POST", "/group-user/g1", "users=[1,2,3]"},
	} {
		req, err := http.NewRequest(c.method, svcURL+c.path, strings.NewReader(c.form))
		if err != nil {
			return err
		}
		if c.form != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if *c.reply, err = capture(req); err != nil {
			return err
		}
	}
	return nil
}

type scenario struct {
	name string
	run  func() (loadtest.Result, error)
}

// scenarios are the runs of one round, in order.
func (h *harness) scenarios() []scenario {
	wrk := func(url string, script string) func() (loadtest.Result, error) {
		return func() (loadtest.Result, error) {
			return loadtest.Load{Threads: h.opts.threads, Connections: h.opts.connections, Duration: h.opts.duration}.RunWrk(context.Background(), url, script)
		}
	}
	wrkClosing := func(url string) func() (loadtest.Result, error) {
		return func() (loadtest.Result, error) {
			return loadtest.Load{Threads: h.opts.threads, Connections: h.opts.connections, Duration: h.opts.duration,
				Headers: []string{"Connection: close"}}.RunWrk(context.Background(), url, "")
		}
	}
	redisBench := func(args ...string) func() (loadtest.Result, error) {
		return func() (loadtest.Result, error) { return runRedisBenchmark(h.opts, h.redisPort, args...) }
	}
	svcURL, quietURL, bareURL, timedURL, replayURL := "http://"+h.svcAddr, "http://"+h.quietAddr, "http://"+h.bareAddr, "http://"+h.timedAddr, "http://"+h.replayAddr
	scenarios := []scenario{
		{"bare GET", wrk(bareURL+"/group-user/list10", "")},
		{"bare POST", wrk(bareURL, h.luaPath)},
		{"bare GET 1000", wrk(bareURL+"/group-user/list1000", "")},
		{"timeouts GET", wrk(timedURL+"/group-user/list10", "")},
		{"timeouts POST", wrk(timedURL, h.luaPath)},
		{"timeouts GET 1000", wrk(timedURL+"/group-user/list1000", "")},
		{"replay GET", wrk(replayURL+"/group-user/list10", "")},
		{"replay POST", wrk(replayURL, h.luaPath)},
		{"replay GET 1000", wrk(replayURL+"/group-user/list1000", "")},
		{"no store POST", wrk("http://"+h.nullAddr, h.luaPath)},
		{"service POST 3 users", wrk(svcURL, h.luaPath)},
		{"data-dir POST 3 users", wrk("http://"+h.dataDirAddr, h.luaPath)},
		{"service GET 10", wrk(svcURL+"/group-user/list10", "")},
		{"service GET 1000", wrk(svcURL+"/group-user/list1000", "")},
		{"redis SADD 3", redisBench("SADD", "g:__rand_int__", "__rand_int__", "__rand_int__", "__rand_int__")},
		{"redis SMEMBERS 10", redisBench("SMEMBERS", "list10")},
		{"redis SMEMBERS 1000", redisBench("SMEMBERS", "list1000")},
	}
	scenarios = append(scenarios, h.nestScenarios(wrk)...)
	scenarios = append(scenarios, h.tlsScenarios(wrk, wrkClosing)...)
	if h.opts.quietRows {
		scenarios = append(scenarios,
			scenario{"no access log POST 3", wrk(quietURL, h.luaPath)},
			scenario{"no access log GET 10", wrk(quietURL+"/group-user/list10", "")},
		)
	}
	if h.beforeAddr == "" {
		return scenarios
	}
	// The earlier build's rows run right after this one's, so that each
	// pair meets the same moment of a shared machine.
	beforeURL := "http://" + h.beforeAddr
	before := map[string]scenario{
		"service POST 3 users": {"before POST 3 users", wrk(beforeURL, h.luaPath)},
		"service GET 10":       {"before GET 10", wrk(beforeURL+"/group-user/list10", "")},
		"service GET 1000":     {"before GET 1000", wrk(beforeURL+"/group-user/list1000", "")},
	}
	var paired []scenario
	for _, s := range scenarios {
		paired = append(paired, s)
		if b, ok := before[s.name]; ok {
			paired = append(paired, b)
		}
	}
	return paired
}

// report prints the medians, the ratios and the targets of one run. A row
// that did not run (-only) is left out, and so is every ratio and target
// that needs it; mem is nil when memory was not compared, small empty when
// small groups were not.
func (h *harness) report(results map[string][]loadtest.Result, mem *memory, nestMem *nestMemory, small []smallMemory) {
	m := medians(results)
	h.printRows(m)
	if h.opts.before != "" {
		fmt.Printf("  (before: %s)\n", h.opts.before)
	}
	if nestMem != nil {
		nestMem.print()
	}
	if mem != nil {
		opts := h.opts
		fmt.Printf("\nmemory for %d memberships (%d groups of %d), growth per membership:\n", opts.groups*opts.perGroup, opts.groups, opts.perGroup)
		fmt.Printf("  service (RSS, group and user indexes)        %6.1f B: -changes-keep 0\n", mem.service)
		fmt.Printf("  service (RSS, the same and the change feed)  %6.1f B: default flags, the feed keeps every change\n", mem.serviceWithFeed)
		fmt.Printf("  redis (used_memory, group sets)              %6.1f B: service / redis %.2f\n", mem.redis, mem.service/mem.redis)
		fmt.Printf("  redis (used_memory, group and per-user sets) %6.1f B: service / redis %.2f\n", mem.redisBoth, mem.service/mem.redisBoth)
	}
	if len(small) > 0 {
		printSmall(small, h.opts.before != "")
	}
	printTargets(m, mem, small)
}

// medians holds the results of each row of one run, by name.
type medians map[string][]loadtest.Result

func (m medians) med(name string) loadtest.Result { return loadtest.Median(m[name]) }

// ran reports whether every row named ran.
func (m medians) ran(names ...string) bool {
	for _, name := range names {
		if len(m[name]) == 0 {
			return false
		}
	}
	return true
}

func (m medians) ratio(a, b string) float64 { return m.med(a).RPS / m.med(b).RPS }

// ratioOf is a ratio a row is compared by.
type ratioOf struct {
	format string // with one %.2f, the ratio of a to b; without a, a note
	a, b   string
}

// ratios joins, of the ratios a row is compared by, those whose rows ran.
func (m medians) ratios(cs ...ratioOf) string {
	var parts []string
	for _, c := range cs {
		if c.a == "" {
			parts = append(parts, c.format) // a note, no ratio
		} else if m.ran(c.a, c.b) {
			parts = append(parts, fmt.Sprintf(c.format, m.ratio(c.a, c.b)))
		}
	}
	return strings.Join(parts, ", ")
}

// row prints the medians of the row name, if it ran, and its ratios.
func (m medians) row(name string, cs ...ratioOf) {
	if !m.ran(name) {
		return
	}
	r := m.med(name)
	fmt.Printf("%-22s %12.0f %10s   %s\n", name, r.RPS, r.P99.Round(time.Microsecond), m.ratios(cs...))
}

// printRows prints the table of the rows that ran, with their ratios.
func (h *harness) printRows(m medians) {
	fmt.Printf("\n%-22s %12s %10s   %s\n", "operation", "req/s", "p99", "ratios (medians of this run)")
	note := func(text string) ratioOf { return ratioOf{format: text} }
	m.row("bare GET", note("the ceiling for GETs"))
	m.row("bare POST", note("the ceiling for POSTs (same requests as the service's)"))
	m.row("bare GET 1000", note(fmt.Sprintf("the ceiling for GET 1000: the same %d bytes, pre-encoded", len(h.replies.list1000.body))),
		ratioOf{"%.2f x redis SMEMBERS 1000", "bare GET 1000", "redis SMEMBERS 1000"})
	m.row("timeouts GET", ratioOf{"%.2f x bare GET: the bare handler with the service's timeouts", "timeouts GET", "bare GET"})
	m.row("timeouts POST", ratioOf{"%.2f x bare POST: the same", "timeouts POST", "bare POST"})
	m.row("timeouts GET 1000", ratioOf{"%.2f x bare GET 1000: the same", "timeouts GET 1000", "bare GET 1000"})
	m.row("replay GET", ratioOf{"%.2f x bare GET: the service's reply (headers and body), replayed with its timeouts", "replay GET", "bare GET"})
	m.row("replay POST", ratioOf{"%.2f x bare POST: the same, after reading the body", "replay POST", "bare POST"})
	m.row("replay GET 1000", ratioOf{"%.2f x bare GET 1000: the same", "replay GET 1000", "bare GET 1000"})
	m.row("no store POST", ratioOf{"%.2f x bare POST: the service, its store's adds keeping nothing (bench/nullstore)", "no store POST", "bare POST"})
	for _, svc := range []string{"service", "before"} {
		post, get10, get1000 := svc+" POST 3 users", svc+" GET 10", svc+" GET 1000"
		m.row(post, ratioOf{"%.2f x bare POST", post, "bare POST"}, ratioOf{"%.2f x redis SADD", post, "redis SADD 3"})
		if svc == "service" {
			m.row("data-dir POST 3 users", ratioOf{"%.2f x service POST 3 users (memory only)", "data-dir POST 3 users", post},
				ratioOf{"%.2f x bare POST", "data-dir POST 3 users", "bare POST"})
		}
		m.row(get10, ratioOf{"%.2f x bare GET", get10, "bare GET"}, ratioOf{"%.2f x redis SMEMBERS 10", get10, "redis SMEMBERS 10"})
		m.row(get1000, ratioOf{"%.2f x bare GET 1000", get1000, "bare GET 1000"}, ratioOf{"%.2f x redis SMEMBERS 1000", get1000, "redis SMEMBERS 1000"})
		if svc == "service" {
			m.row("redis SADD 3")
			m.row("redis SMEMBERS 10")
			m.row("redis SMEMBERS 1000")
			m.row("no access log POST 3", ratioOf{"%.2f x bare POST: the service with -access-log=false", "no access log POST 3", "bare POST"})
			m.row("no access log GET 10", ratioOf{"%.2f x bare GET: the service with -access-log=false", "no access log GET 10", "bare GET"})
		}
	}
	for _, t := range nestTargets {
		m.row(t.direct)
		m.row(t.nested, ratioOf{"cost %.2f x the direct row's (its req/s / this row's)", t.direct, t.nested})
	}
	for _, t := range tlsRows {
		m.row(t.http, note("its HTTPS twin's HTTP: "+t.what))
		m.row(t.https, ratioOf{"%.2f x " + t.http + ": the same service over HTTPS, " + t.what, t.https, t.http})
	}
}

// printTargets prints each target whose rows ran, met or not, and how many
// are met.
func printTargets(m medians, mem *memory, small []smallMemory) {
	fmt.Printf("\ntargets:\n")
	met := 0
	var stated []string
	target := func(what string, got, want float64, ceiling string) {
		verdict := "met"
		if got < want {
			verdict = "NOT met"
		} else {
			met++
		}
		stated = append(stated, what)
		fmt.Printf("  %-48s %6.2f, want >= %.2f: %s%s\n", what, got, want, verdict, ceiling)
	}
	// The ceilings: what the service's timeouts alone allow, and what a
	// handler allows that sends the service's reply and computes nothing.
	ceilings := func(kind string, more ...ratioOf) string {
		c := m.ratios(append([]ratioOf{
			{"the timeouts alone %.2f", "timeouts " + kind, "bare " + kind},
			{"the service's reply replayed %.2f", "replay " + kind, "bare " + kind},
		}, more...)...)
		if c == "" {
			return ""
		}
		return fmt.Sprintf("\n  %48s ceilings: %s", "", c)
	}
	throughput := []struct {
		what, row, bare string
		want            float64
		ceilings        string
	}{
		{"POST 3 users / bare POST", "service POST 3 users", "bare POST", 0.75,
			ceilings("POST", ratioOf{"the service without its store %.2f", "no store POST", "bare POST"})},
		{"GET 10 / bare GET", "service GET 10", "bare GET", 0.88, ceilings("GET")},
		{"GET 1000 / bare GET 1000", "service GET 1000", "bare GET 1000", 0.95, ceilings("GET 1000")},
		{"-data-dir POST 3 / memory-only POST 3", "data-dir POST 3 users", "service POST 3 users", 0.8, ""},
	}
	for _, t := range throughput {
		if m.ran(t.row, t.bare) {
			target(t.what, m.ratio(t.row, t.bare), t.want, t.ceilings)
		}
	}
	if mem != nil {
		target("redis group-set bytes / service bytes", mem.redis/mem.service, 3, "") // both indexes in a third of Redis's one
		target("the same, the change feed on", mem.redis/mem.serviceWithFeed, 3, "")
	}
	for _, t := range nestTargets {
		if !m.ran(t.direct, t.nested) {
			continue
		}
		cost := m.ratio(t.direct, t.nested)
		verdict := "met"
		if cost > t.want {
			verdict = "NOT met"
		} else {
			met++
		}
		stated = append(stated, t.what)
		fmt.Printf("  %-48s %6.2f, want <= %.2f: %s\n", t.what, cost, t.want, verdict)
	}
	smallStated, smallMet := smallVerdicts(small)
	fmt.Printf("  %d of the %d targets measured are met\n", met+smallMet, len(stated)+smallStated)
}

// memory is the growth per membership measured by measureMemory.
type memory struct {
	// service is the RSS of a service with -changes-keep 0: the group and
	// user indexes alone. serviceWithFeed is that of the service as users
	// run it, whose change feed also keeps the latest changes.
	service, serviceWithFeed float64
	redis                    float64 // Redis's used_memory, the group sets alone
	// redisBoth adds the per-user sets a Redis user keeps to answer which
	// groups a user is in, as the service's reverse index does.
	redisBoth float64
}

// measureMemory loads the same memberships into the service, into a
// service with its change feed off, and into Redis, and returns the growth
// per membership: the services' RSS, Redis's used_memory (Redis's own
// accounting, which is smaller than its RSS). No list has been read, so the
// list cache holds nothing.
func (h *harness) measureMemory() (memory, error) {
	opts := h.opts
	rng := rand.New(rand.NewPCG(3, 4))
	groups := make([][]int64, opts.groups)
	for g := range groups {
		groups[g] = loadtest.RandomUIDs(rng, opts.perGroup, 1e9)
	}
	total := float64(opts.groups * opts.perGroup)
	var mem memory
	addr, pid, stop, err := loadtest.StartService(h.svcBin, h.tmp, "service-without-feed", opts.serviceArgs+" -changes-keep 0")
	if err != nil {
		return memory{}, err
	}
	growth, err := loadService(pid, "http://"+addr, groups)
	stop()
	if err != nil {
		return memory{}, err
	}
	mem.service = float64(growth) / total
	if growth, err = loadService(h.svcPid, "http://"+h.svcAddr, groups); err != nil {
		return memory{}, err
	}
	mem.serviceWithFeed = float64(growth) / total
	// The service with -data-dir, and the earlier build, serve the load
	// rows holding what the service holds.
	for _, addr := range []string{h.dataDirAddr, h.beforeAddr} {
		if addr == "" {
			continue
		}
		for g, uids := range groups {
			if err := loadtest.PostUsers("http://"+addr, fmt.Sprintf("mem%d", g), uids); err != nil {
				return memory{}, err
			}
		}
	}

	redisBefore, err := h.rc.usedMemory()
	if err != nil {
		return memory{}, err
	}
	var reverse [][]string // SADD user:<uid> <group>, loaded after
	for g, uids := range groups {
		group := fmt.Sprintf("mem%d", g)
		if err := h.rc.sadd(group, uids); err != nil {
			return memory{}, err
		}
		for _, uid := range uids {
			reverse = append(reverse, []string{"SADD", "user:" + strconv.FormatInt(uid, 10), group})
		}
	}
	redisAfter, err := h.rc.usedMemory()
	if err != nil {
		return memory{}, err
	}
	if err := h.rc.pipeline(reverse); err != nil {
		return memory{}, err
	}
	redisBoth, err := h.rc.usedMemory()
	if err != nil {
		return memory{}, err
	}
	fmt.Printf("  memory: redis used_memory %d -> %d bytes, %d with the per-user sets\n", redisBefore, redisAfter, redisBoth)
	mem.redis = float64(redisAfter-redisBefore) / total
	mem.redisBoth = float64(redisBoth-redisBefore) / total
	return mem, nil
}

// loadService adds groups "mem0", "mem1", ... to the service at svcURL,
// whose process is pid, and returns how much its RSS grew.
func loadService(pid int, svcURL string, groups [][]int64) (int64, error) {
	before, err := loadtest.RSS(pid)
	if err != nil {
		return 0, err
	}
	for g, uids := range groups {
		if err := loadtest.PostUsers(svcURL, fmt.Sprintf("mem%d", g), uids); err != nil {
			return 0, err
		}
	}
	time.Sleep(2 * time.Second) // let the service's runtime settle
	after, err := loadtest.RSS(pid)
	if err != nil {
		return 0, err
	}
	fmt.Printf("  memory: service (pid %d) RSS %d -> %d bytes\n", pid, before, after)
	return after - before, nil
}

// serviceBinary returns opts.serviceBin, or else builds this checkout's
// service into dir.
func serviceBinary(opts options, dir string) (string, error) {
	if opts.serviceBin != "" {
		return opts.serviceBin, nil
	}
	return build(".", ".", "membership", dir)
}

// build builds the command in pkg of the module in moduleDir, a directory
// of this checkout (the service's module is "."; the harnesses', "bench"),
// into dir/name, and returns that path.
func build(moduleDir, pkg, name, dir string) (string, error) {
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = moduleDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s in %s: %v\n%s", pkg, moduleDir, err, out)
	}
	return bin, nil
}

// redisRequests remembers each command's last rate, so that later rounds
// size their request count to last about opts.duration.
var redisRequests = map[string]int{}

func runRedisBenchmark(opts options, port string, command ...string) (loadtest.Result, error) {
	key := strings.Join(command, " ")
	n := redisRequests[key]
	if n == 0 {
		n = 20000
	}
	args := append([]string{"-p", port, "-c", strconv.Itoa(opts.connections), "--threads", strconv.Itoa(opts.threads),
		"-n", strconv.Itoa(n), "-r", "1000", "--csv"}, command...)
	out, err := exec.Command("redis-benchmark", args...).CombinedOutput()
	if err != nil {
		return loadtest.Result{}, fmt.Errorf("redis-benchmark: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	fields := strings.Split(strings.ReplaceAll(lines[len(lines)-1], `"`, ""), ",")
	if len(fields) < 8 {
		return loadtest.Result{}, fmt.Errorf("cannot read redis-benchmark's output:\n%s", out)
	}
	var r loadtest.Result
	r.RPS, _ = strconv.ParseFloat(fields[len(fields)-7], 64)
	p99ms, _ := strconv.ParseFloat(fields[len(fields)-2], 64)
	r.P99 = time.Duration(p99ms * float64(time.Millisecond))
	if r.RPS == 0 {
		return loadtest.Result{}, fmt.Errorf("cannot read redis-benchmark's output:\n%s", out)
	}
	if first := redisRequests[key] == 0; first {
		redisRequests[key] = max(1000, int(r.RPS*opts.duration.Seconds()))
		return runRedisBenchmark(opts, port, command...) // the sized run is the one that counts
	}
	return r, nil
}

// redisConn is just enough of a Redis client for loading sets and reading
// INFO: RESP commands written and their replies read one at a time.
type redisConn struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialRedis(addr string) (*redisConn, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			rc := &redisConn{conn: conn, r: bufio.NewReader(conn)}
			if _, err := rc.do("PING"); err == nil {
				return rc, nil
			}
			conn.Close()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no answer from redis at %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *redisConn) do(args ...string) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.conn.Write(b.Bytes()); err != nil {
		return nil, err
	}
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	switch line[0] {
	case '+', ':':
		return bytes.TrimSpace(line[1:]), nil
	case '$':
		n, _ := strconv.Atoi(string(bytes.TrimSpace(line[1:])))
		buf := make([]byte, n+2)
		_, err := io.ReadFull(c.r, buf)
		return buf[:n], err
	default:
		return nil, fmt.Errorf("redis: %s", bytes.TrimSpace(line))
	}
}

// pipeline sends cmds in batches, reading the replies of each batch after
// sending it, and fails on an error reply.
func (c *redisConn) pipeline(cmds [][]string) error {
	const batch = 10000
	for start := 0; start < len(cmds); start += batch {
		var b bytes.Buffer
		end := min(start+batch, len(cmds))
		for _, args := range cmds[start:end] {
			fmt.Fprintf(&b, "*%d\r\n", len(args))
			for _, a := range args {
				fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
			}
		}
		if _, err := c.conn.Write(b.Bytes()); err != nil {
			return err
		}
		for range end - start {
			line, err := c.r.ReadBytes('\n')
			if err != nil {
				return err
			}
			if line[0] == '-' {
				return fmt.Errorf("redis: %s", bytes.TrimSpace(line))
			}
		}
	}
	return nil
}

func (c *redisConn) sadd(key string, uids []int64) error {
	args := []string{"SADD", key}
	for _, uid := range uids {
		args = append(args, strconv.FormatInt(uid, 10))
	}
	n, err := c.do(args...)
	if err != nil {
		return err
	}
	if string(n) != strconv.Itoa(len(uids)) {
		return fmt.Errorf("redis SADD %s added %s members, want %d", key, n, len(uids))
	}
	return nil
}

func (c *redisConn) usedMemory() (int64, error) {
	info, err := c.do("INFO", "memory")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(info), "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("redis INFO memory has no used_memory")
}

// loadAverage returns /proc/loadavg's 1, 5 and 15 minute averages: the
// machine is shared, and what else ran moves every figure.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}
