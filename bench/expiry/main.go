// Command expiry measures memberships that end by themselves at the size
// the service's 1 s bound is stated for: a million memberships (1,000
// groups of 1,000 random users) all due in the same second, while clients
// read and write.
// It loads them into the service built from this checkout, each with the
// same "expires" a few seconds ahead, then runs a load of reads and writes
// across the expiry, and probes, back to back, whether the memberships are
// still visible: POST /check of one member of every group (all 1,000 at
// one revision), and GET /group-user/{g}?limit=1 of every group in turn
// (its X-Total-Count). It prints the lag from the expiry until the
// memberships were gone, as /metrics' membership_expiry_lag_seconds
// measured it and as the probes saw it, whether any probe saw a membership
// more than 1 s after its expiry, and the p99 latency of the probes and of
// the load before the expiry and during it.
//
// Run it with `make bench-expiry` from the repository root: it builds the
// service from ".", starts it on a free loopback port (memory-only), stops
// it and removes its temporary directory when it is done, in about a
// minute.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/bench/loadtest"
)

type options struct {
	groups, members int
	connections     int
	ahead           time.Duration // from the end of the loading to the expiry, at least
	before, after   time.Duration // the load runs from before the expiry to after it
	writeShare      float64
	dataDir         bool // the service with -data-dir (a directory of the run's own)
}

func main() {
	var opts options
	flag.IntVar(&opts.groups, "groups", 1000, "groups whose members expire")
	flag.IntVar(&opts.members, "members", 1000, "members of each (random uids up to 1e9)")
	flag.IntVar(&opts.connections, "connections", 50, "connections of the load of reads and writes")
	flag.DurationVar(&opts.ahead, "ahead", 6*time.Second, "the expiry is at least this long after the loading ends (the load measures 'before' in it)")
	flag.DurationVar(&opts.after, "after", 4*time.Second, "the load runs on this long after the expiry")
	flag.Float64Var(&opts.writeShare, "writes", 0.2, "share of the load's requests that are writes (POST of 3 users)")
	flag.BoolVar(&opts.dataDir, "data-dir", false, "run the service with -data-dir, in a directory of the run's own (removed at the end), so that every expiry is logged")
	flag.Parse()
	opts.before = opts.ahead - time.Second
	if err := run(opts); err != nil {
		fmt.Fprintln(os.Stderr, "bench-expiry:", err)
		os.Exit(1)
	}
}

func run(opts options) error {
	tmp, err := os.MkdirTemp("", "membership-bench-expiry-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "membership")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return fmt.Errorf("building the service: %v\n%s", err, out)
	}
	var serviceArgs string
	if opts.dataDir {
		serviceArgs = "-data-dir " + filepath.Join(tmp, "data")
	}
	addr, pid, stop, err := loadtest.StartService(bin, tmp, "service", serviceArgs)
	if err != nil {
		return err
	}
	defer stop()
	base := "http://" + addr
	total := opts.groups * opts.members
	store := "memory-only"
	if opts.dataDir {
		store = "-data-dir"
	}
	fmt.Printf("bench-expiry: %d memberships (%d groups of %d) due in the same second; %d connections of reads and writes (%.0f%% writes) across it; %s; %d cores\n",
		total, opts.groups, opts.members, opts.connections, 100*opts.writeShare, store, loadtest.NumCPU())

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: opts.connections + 8, MaxConnsPerHost: opts.connections + 8}, Timeout: 30 * time.Second}
	members, expires, err := loadMemberships(client, base, opts)
	if err != nil {
		return err
	}
	r, err := measure(client, base, pid, opts, members, expires)
	if err != nil {
		return err
	}
	printLag(opts, r)
	printLatencies(opts, r)
	return nil
}

// loadMemberships loads the memberships, all with the same expiry, and
// returns them and the expiry. The expiry is set from a measure of the
// loading: a first group is timed, and the expiry falls opts.ahead after
// the whole loading would end, rounded up to a second.
func loadMemberships(client *http.Client, base string, opts options) ([][]int64, time.Time, error) {
	total := opts.groups * opts.members
	rng := rand.New(rand.NewPCG(28, 1))
	members := make([][]int64, opts.groups)
	for g := range members {
		members[g] = loadtest.RandomUIDs(rng, opts.members, 1e9)
	}
	started := time.Now()
	estimate := 3 * time.Second * time.Duration(max(total/1_000_000, 1)) // until the first group is timed
	expires := time.Now().Add(estimate + opts.ahead + 5*time.Second).Truncate(time.Second).Add(time.Second)
	if err := post(client, base, expGroup(0), usersWithExpiry(members[0], expires)); err != nil {
		return nil, time.Time{}, err
	}
	loading := time.Since(started)
	expires = time.Now().Add(time.Duration(opts.groups)*loading/2 + opts.ahead).Truncate(time.Second).Add(time.Second)
	// The first group again, with the expiry of all: the same second for
	// every membership.
	if err := post(client, base, expGroup(0), usersWithExpiry(members[0], expires)); err != nil {
		return nil, time.Time{}, err
	}
	if err := loadAll(client, base, members, expires); err != nil {
		return nil, time.Time{}, err
	}
	loaded := time.Now()
	fmt.Printf("  loaded in %s; every membership expires at %s, %s after the loading\n",
		loaded.Sub(started).Round(time.Millisecond), expires.UTC().Format(time.RFC3339Nano), expires.Sub(loaded).Round(time.Millisecond))
	if expires.Sub(loaded) < opts.ahead/2 {
		return nil, time.Time{}, fmt.Errorf("the loading took too long: the expiry is only %s after it; raise -ahead", expires.Sub(loaded).Round(time.Millisecond))
	}
	return members, expires, nil
}

// result is what a run measured across the expiry.
type result struct {
	expires, loadStart, loadEnd time.Time
	before, after               metricsPage
	rssBefore, rssAfter         int64
	loads                       [][]sample
	checks                      []checkProbe
	lists                       []listProbe
	left                        float64       // memberships still to end when the load ended
	drained                     time.Duration // from the expiry until none was left
}

// measure runs the load and the probes from opts.before ahead of the
// expiry to opts.after past it, then waits for every membership to end
// and checks that each ended once.
func measure(client *http.Client, base string, pid int, opts options, members [][]int64, expires time.Time) (*result, error) {
	total := opts.groups * opts.members
	before, err := scrape(client, base)
	if err != nil {
		return nil, err
	}
	if got := before["membership_expiring_members"]; got != float64(total) {
		return nil, fmt.Errorf("membership_expiring_members is %v, want %d", got, total)
	}
	r := &result{expires: expires, before: before}
	r.rssBefore, _ = loadtest.RSS(pid)

	r.loadStart = expires.Add(-opts.before)
	r.loadEnd = expires.Add(opts.after)
	time.Sleep(time.Until(r.loadStart))
	ctx, cancel := context.WithDeadline(context.Background(), r.loadEnd)
	defer cancel()
	var wg sync.WaitGroup
	r.loads = make([][]sample, opts.connections)
	for i := range opts.connections {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.loads[i] = loadWorker(ctx, client, base, opts, uint64(i), members)
		}()
	}
	wg.Add(2)
	go func() { defer wg.Done(); r.checks = probeChecks(ctx, client, base, members) }()
	go func() { defer wg.Done(); r.lists = probeLists(ctx, client, base, opts.groups) }()
	wg.Wait()
	if r.after, err = scrape(client, base); err != nil {
		return nil, err
	}
	r.rssAfter, _ = loadtest.RSS(pid)
	return r, r.waitAllEnded(client, base, total)
}

// waitAllEnded checks the end state: every membership ended, each once.
// When the load ended first, the expirer is left to finish, for at most a
// minute.
func (r *result) waitAllEnded(client *http.Client, base string, total int) error {
	r.left = r.after["membership_expiring_members"]
	for r.left > 0 && time.Since(r.loadEnd) < time.Minute {
		time.Sleep(50 * time.Millisecond)
		page, err := scrape(client, base)
		if err != nil {
			return err
		}
		if page["membership_expiring_members"] == 0 {
			r.after = page
			break
		}
	}
	r.drained = time.Since(r.expires)
	if got := r.after["membership_expiring_members"]; got != 0 {
		return fmt.Errorf("a minute after the load, membership_expiring_members is %v, want 0", got)
	}
	ended := r.after["membership_expiries_total"] - r.before["membership_expiries_total"]
	if ended != float64(total) {
		return fmt.Errorf("membership_expiries_total grew by %v, want %d", ended, total)
	}
	if body, err := loadtest.Get(context.Background(), client, base+"/groups?prefix=exp-&limit=1"); err != nil || string(body) != "[]" {
		return fmt.Errorf("groups with members left after the expiry: %s %v", body, err)
	}
	return nil
}

// goneAfter returns the lag as the probes saw it, sorted: for each group's
// probed member, the first /check sent after which it was never seen
// again.
func (r *result) goneAfter(groups int) []time.Duration {
	gone := make([]time.Duration, groups)
	lastSeen := make([]time.Time, groups)
	for _, p := range r.checks {
		for g, in := range p.found {
			if in && p.sent.After(lastSeen[g]) {
				lastSeen[g] = p.sent
			}
		}
	}
	for g := range gone {
		first := time.Time{}
		for _, p := range r.checks {
			if p.sent.After(lastSeen[g]) && !p.found[g] {
				first = p.sent.Add(p.took) // it was gone by the reply
				break
			}
		}
		if first.IsZero() { // gone after the load, when the probes had stopped
			first = r.loadEnd.Add(r.drained - r.loadEnd.Sub(r.expires))
		}
		gone[g] = max(first.Sub(r.expires), 0)
	}
	slices.Sort(gone)
	return gone
}

// printLag prints the lag from the expiry until the memberships were
// gone, and the probes that saw a membership more than 1 s after it.
func printLag(opts options, r *result) {
	// The lag, as the service measured it: one observation per change of
	// expiries (a group's), from its expiry to the change.
	lag := r.after.histogram("membership_expiry_lag_seconds").minus(r.before.histogram("membership_expiry_lag_seconds"))
	gone := r.goneAfter(opts.groups)
	expires := r.expires
	// Visible more than 1 s after the expiry: probes sent then that still
	// saw a membership.
	lateChecks, lateLists := 0, 0
	checksAfter, listsAfter := 0, 0
	for _, p := range r.checks {
		if p.sent.Sub(expires) > time.Second {
			checksAfter++
			if slices.Contains(p.found, true) {
				lateChecks++
			}
		}
	}
	var listsGone time.Time
	for _, p := range r.lists {
		if p.sent.Sub(expires) > time.Second {
			listsAfter++
			if p.total > 0 {
				lateLists++
			}
		}
		if p.total > 0 && p.sent.After(listsGone) {
			listsGone = p.sent
		}
	}

	fmt.Println()
	fmt.Println("| Expiry lag | p50 | p99 | max |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| `membership_expiry_lag_seconds`, %d changes of op expire (from the earliest expiry of each to the change; bucket bounds) | <= %s | <= %s | <= %s |\n",
		int(lag.count), lag.quantile(0.5), lag.quantile(0.99), lag.quantile(1))
	fmt.Printf("| the probes: from the expiry to the reply of the first POST /check after which a group's member was never seen again, %d groups | %s | %s | %s |\n",
		len(gone), gone[len(gone)/2].Round(time.Millisecond), gone[min(len(gone)-1, len(gone)*99/100)].Round(time.Millisecond), gone[len(gone)-1].Round(time.Millisecond))
	fmt.Printf("| the probes: GET /group-user/{g}?limit=1 of each group in turn, the last seen with members | | | %s |\n", sinceOrNone(listsGone, expires))
	fmt.Println()
	if r.left > 0 {
		fmt.Printf("When the load ended, %s after the expiry, %.0f memberships were still to end; the last ended within %s of the expiry.\n",
			opts.after, r.left, r.drained.Round(100*time.Millisecond))
	}
	fmt.Printf("Probes sent more than 1 s after the expiry that still saw a membership: %d of %d POST /check, %d of %d GET.\n",
		lateChecks, checksAfter, lateLists, listsAfter)
}

// printLatencies prints the p99 latency of the probes and of the load
// before the expiry, during it and after it, the failed requests and the
// memory.
func printLatencies(opts options, r *result) {
	expires := r.expires
	fmt.Println()
	fmt.Println("| p99 latency (requests / p99) | before the expiry (its last " + opts.before.String() + ") | during it (its first 2 s) | after (the rest) |")
	fmt.Println("|---|---|---|---|")
	windows := [3][2]time.Time{{r.loadStart, expires}, {expires, expires.Add(2 * time.Second)}, {expires.Add(2 * time.Second), r.loadEnd}}
	row := func(name string, s []sample) {
		fmt.Printf("| %s |", name)
		for _, w := range windows {
			n, p99 := p99Within(s, w[0], w[1])
			fmt.Printf(" %d / %s |", n, p99)
		}
		fmt.Println()
	}
	var checkSamples, listSamples []sample
	for _, p := range r.checks {
		checkSamples = append(checkSamples, p.sample)
	}
	for _, p := range r.lists {
		listSamples = append(listSamples, p.sample)
	}
	row(fmt.Sprintf("probe POST /check of %d", opts.groups), checkSamples)
	row("probe GET /group-user/{g}?limit=1", listSamples)
	var reads, writes []sample
	for _, l := range r.loads {
		for _, s := range l {
			if s.write {
				writes = append(writes, s)
			} else {
				reads = append(reads, s)
			}
		}
	}
	row(fmt.Sprintf("load: reads (%d connections in all)", opts.connections), reads)
	row("load: writes, POST of 3 users", writes)
	errs := 0
	for _, s := range append(append(append(reads, writes...), checkSamples...), listSamples...) {
		if s.failed {
			errs++
		}
	}
	fmt.Println()
	fmt.Printf("Failed requests: %d. RSS %s before the load, %s after it.\n", errs, loadtest.MiB(r.rssBefore), loadtest.MiB(r.rssAfter))
}

func expGroup(g int) string { return fmt.Sprintf("exp-%04d", g) }

func sinceOrNone(t, from time.Time) string {
	if t.IsZero() {
		return "none seen"
	}
	return t.Sub(from).Round(time.Millisecond).String() + " after the expiry"
}

// usersWithExpiry returns {"users":[{"uid":…,"expires":…},…]}.
func usersWithExpiry(uids []int64, expires time.Time) []byte {
	at := expires.UTC().Format(time.RFC3339)
	var b bytes.Buffer
	b.WriteString(`{"users":[`)
	for i, uid := range uids {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"uid":%d,"expires":%q}`, uid, at)
	}
	b.WriteString("]}")
	return b.Bytes()
}

func post(client *http.Client, base, group string, body []byte) error {
	resp, err := client.Post(base+"/group-user/"+group, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST to %s: %s %s", group, resp.Status, reply)
	}
	return nil
}

// loadAll adds every group's members with the expiry, four requests at a
// time.
func loadAll(client *http.Client, base string, members [][]int64, expires time.Time) error {
	var next atomic.Int64
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for {
				g := int(next.Add(1)) - 1
				if g >= len(members) {
					errs <- nil
					return
				}
				if err := post(client, base, expGroup(g), usersWithExpiry(members[g], expires)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var first error
	for range 4 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// sample is one request: when it was sent, how long it took.
type sample struct {
	sent   time.Time
	took   time.Duration
	write  bool
	failed bool
}

// send sends req by client and reads the whole reply. It returns the
// sample it makes (failed unless the reply is a 200), the reply's header
// and body, and whether ctx ended first: a request cut short by the end
// of the load is not a sample.
func send(ctx context.Context, client *http.Client, req *http.Request) (s sample, header http.Header, body []byte, cut bool) {
	s.sent = time.Now()
	resp, err := client.Do(req)
	if err == nil {
		header = resp.Header
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = errors.New(resp.Status)
		}
	}
	s.took, s.failed = time.Since(s.sent), err != nil
	return s, header, body, ctx.Err() != nil
}

// loadWorker sends requests back to back on one connection until ctx is
// done: reads of the expiring groups (a page of 100) and of groups of its
// own, and writes of 3 random users to groups of its own (no expiry).
func loadWorker(ctx context.Context, client *http.Client, base string, opts options, seed uint64, members [][]int64) []sample {
	rng := rand.New(rand.NewPCG(seed, 99))
	var out []sample
	for ctx.Err() == nil {
		var req *http.Request
		write := rng.Float64() < opts.writeShare
		switch {
		case write:
			users := fmt.Sprintf("users=[%d,%d,%d]", rng.Int64N(1e9)+1, rng.Int64N(1e9)+1, rng.Int64N(1e9)+1)
			req, _ = http.NewRequestWithContext(ctx, http.MethodPost, base+"/group-user/load-"+strconv.Itoa(rng.IntN(1000)), strings.NewReader(users))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		case rng.IntN(2) == 0:
			g := rng.IntN(len(members))
			req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/group-user/"+expGroup(g)+"?limit=100", nil)
		default:
			req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/group-user/load-"+strconv.Itoa(rng.IntN(1000)), nil)
		}
		s, _, _, cut := send(ctx, client, req)
		if cut {
			break
		}
		s.write = write
		out = append(out, s)
	}
	return out
}

// checkProbe is one POST /check of a member of every group: which it found.
type checkProbe struct {
	sample
	found []bool
}

// probeChecks sends POST /check of the first member of every group, back
// to back, until ctx is done.
func probeChecks(ctx context.Context, client *http.Client, base string, members [][]int64) []checkProbe {
	var b strings.Builder
	b.WriteString(`{"checks":[`)
	for g := range members {
		if g > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"group":%q,"uid":%d}`, expGroup(g), members[g][0])
	}
	b.WriteString("]}")
	body := b.String()
	var out []checkProbe
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/check", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		s, _, reply, cut := send(ctx, client, req)
		if cut {
			break
		}
		p := checkProbe{sample: s}
		if p.failed {
			out = append(out, p)
			continue
		}
		// {"results":[true,false,…]}
		list := strings.TrimSuffix(strings.TrimPrefix(string(reply), `{"results":[`), "]}")
		for _, v := range strings.Split(list, ",") {
			p.found = append(p.found, v == "true")
		}
		if len(p.found) != len(members) {
			p.failed, p.found = true, nil
		}
		out = append(out, p)
	}
	// A failed probe says nothing of what is visible: keep the others.
	return slices.DeleteFunc(out, func(p checkProbe) bool { return p.found == nil })
}

// listProbe is one GET /group-user/{g}?limit=1: the group's size.
type listProbe struct {
	sample
	total int
}

// probeLists reads every group in turn, a page of one, until ctx is done.
func probeLists(ctx context.Context, client *http.Client, base string, groups int) []listProbe {
	var out []listProbe
	for i := 0; ctx.Err() == nil; i++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/group-user/"+expGroup(i%groups)+"?limit=1", nil)
		s, header, _, cut := send(ctx, client, req)
		if cut {
			break
		}
		p := listProbe{sample: s, total: -1}
		if !p.failed {
			p.total, _ = strconv.Atoi(header.Get("X-Total-Count"))
		}
		out = append(out, p)
	}
	return out
}

// p99Within returns how many of samples were sent in [from, to), and
// their 99th percentile latency.
func p99Within(samples []sample, from, to time.Time) (int, time.Duration) {
	var took []time.Duration
	for _, s := range samples {
		if !s.sent.Before(from) && s.sent.Before(to) {
			took = append(took, s.took)
		}
	}
	if len(took) == 0 {
		return 0, 0
	}
	slices.Sort(took)
	return len(took), took[min(len(took)-1, int(math.Ceil(0.99*float64(len(took))))-1)].Round(10 * time.Microsecond)
}

// metricsPage is a scrape of /metrics.
type metricsPage map[string]float64

func scrape(client *http.Client, base string) (metricsPage, error) {
	body, err := loadtest.Get(context.Background(), client, base+"/metrics")
	return loadtest.ParseMetrics(body), err
}

// histogram is a histogram's cumulative buckets (by upper bound) and count.
type histogram struct {
	bounds []float64
	counts []float64
	count  float64
}

func (p metricsPage) histogram(name string) histogram {
	var h histogram
	buckets := map[float64]float64{}
	for key, v := range p {
		le, ok := strings.CutPrefix(key, name+`_bucket{le="`)
		if !ok {
			continue
		}
		bound, err := strconv.ParseFloat(strings.TrimSuffix(le, `"}`), 64)
		if err != nil || math.IsInf(bound, 1) {
			continue // +Inf: the count
		}
		buckets[bound] = v
		h.bounds = append(h.bounds, bound)
	}
	slices.Sort(h.bounds)
	for _, b := range h.bounds {
		h.counts = append(h.counts, buckets[b])
	}
	h.count = p[name+"_count"]
	return h
}

func (h histogram) minus(o histogram) histogram {
	out := histogram{bounds: h.bounds, counts: slices.Clone(h.counts), count: h.count - o.count}
	for i := range out.counts {
		if i < len(o.counts) {
			out.counts[i] -= o.counts[i]
		}
	}
	return out
}

// quantile returns the upper bound of the bucket the q-quantile falls in.
func (h histogram) quantile(q float64) string {
	if h.count == 0 {
		return "none"
	}
	for i, c := range h.counts {
		if c >= q*h.count {
			return (time.Duration(h.bounds[i] * float64(time.Second))).String()
		}
	}
	return "+Inf"
}
