// Command groups measures the routes that work on a group as a whole, at
// a million groups and a million members: a page of GET /groups among a million groups,
// a PUT of 1,000 users into a group of 1,000 of which half change, and a
// DELETE /groups/{id} of a group of a million members, with the time it
// takes and how much the service's resident memory grows while it runs.
// The first two are compared, side by side in one run, with the same
// request on a service that holds a thousand groups, both with -data-dir;
// the deletion runs with -data-dir and memory-only.
//
// Run it with `make bench-groups` from the repository root: it builds the
// service from ".", writes a backup of the large state, restores it into a
// data directory in a temporary directory, and removes everything when it
// stops.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"example.com/groupmembership/bench/loadtest"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/membership"
)

type options struct {
	groups   int
	big      int
	rounds   int
	duration time.Duration
	puts     int
}

func main() {
	var opts options
	flag.IntVar(&opts.groups, "groups", 1_000_000, "groups of the large service")
	flag.IntVar(&opts.big, "big", 1_000_000, "members of the group that is deleted")
	flag.IntVar(&opts.rounds, "rounds", 3, "rounds of the GET load; the table shows medians")
	flag.DurationVar(&opts.duration, "duration", 5*time.Second, "length of each GET load run")
	flag.IntVar(&opts.puts, "puts", 200, "PUT requests timed one after another")
	flag.Parse()
	if err := run(opts); err != nil {
		fmt.Fprintln(os.Stderr, "bench-groups:", err)
		os.Exit(1)
	}
}

// service is one service under measure.
type service struct {
	name string
	base string
	pid  int
}

func run(opts options) error {
	if _, err := exec.LookPath("wrk"); err != nil {
		return fmt.Errorf("wrk is not installed: run `make bench-groups`, which installs it")
	}
	tmp, err := os.MkdirTemp("", "membership-bench-groups-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "membership")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return fmt.Errorf("building the service: %v\n%s", err, out)
	}
	fmt.Printf("bench-groups: %d groups and a group of %d members, against 1,000 groups; %d rounds of %s, 50 connections\n",
		opts.groups, opts.big, opts.rounds, opts.duration)

	start := time.Now()
	dataDir := filepath.Join(tmp, "data")
	if err := restoreLarge(bin, tmp, dataDir, opts); err != nil {
		return err
	}
	fmt.Printf("  wrote and restored the large state in %s\n", time.Since(start).Round(time.Millisecond))
	var stops []func()
	defer func() {
		for _, stop := range slices.Backward(stops) {
			stop()
		}
	}()
	startService := func(name, args string) (service, error) {
		addr, pid, stop, err := loadtest.StartService(bin, tmp, name, args)
		if err != nil {
			return service{}, err
		}
		stops = append(stops, stop)
		return service{name: name, base: "http://" + addr, pid: pid}, nil
	}
	large, err := startService("large", "-data-dir "+dataDir)
	if err != nil {
		return err
	}
	small, err := startService("small", "-data-dir "+filepath.Join(tmp, "small"))
	if err != nil {
		return err
	}
	for i := range 1000 {
		if err := loadtest.PostUsers(small.base, groupID(i), []int64{int64(i + 1)}); err != nil {
			return err
		}
	}
	gets, err := timeGets(large, small, opts)
	if err != nil {
		return err
	}
	var puts [2]latencies
	for i, s := range []service{large, small} {
		if puts[i], err = timePuts(s, opts.puts); err != nil {
			return err
		}
	}
	// The group to delete on a memory-only service too, loaded through
	// the API.
	mem, err := startService("memory", "")
	if err != nil {
		return err
	}
	if err := loadBig(mem.base, opts.big); err != nil {
		return err
	}
	var deletes []deletion
	for _, s := range []service{large, mem} {
		d, err := timeDelete(s, opts.big)
		if err != nil {
			return err
		}
		deletes = append(deletes, d)
	}

	printTables(gets, puts, deletes)
	return nil
}

// timeGets runs the GET /groups load on the large and the small service,
// round after round, and returns the results of each.
func timeGets(large, small service, opts options) ([2][]loadtest.Result, error) {
	load := loadtest.Load{Threads: 2, Connections: 50, Duration: opts.duration}
	var gets [2][]loadtest.Result
	for round := 1; round <= opts.rounds; round++ {
		for i, s := range []service{large, small} {
			after := groupID(opts.groups / 2)
			if s == small {
				after = groupID(500)
			}
			r, err := load.RunWrk(context.Background(), s.base+"/groups?limit=100&after="+url.QueryEscape(after), "")
			if err != nil {
				return gets, fmt.Errorf("GET /groups on the %s service: %w", s.name, err)
			}
			fmt.Printf("  round %d  GET /groups?limit=100  %-5s %9.0f req/s  p99 %s\n", round, s.name, r.RPS, r.P99)
			gets[i] = append(gets[i], r)
		}
	}
	return gets, nil
}

// loadBig adds big members to the group "big" of the service at base,
// 100,000 at a time.
func loadBig(base string, big int) error {
	for first := 0; first < big; first += 100_000 {
		uids := make([]int64, 0, 100_000)
		for uid := first; uid < min(first+100_000, big); uid++ {
			uids = append(uids, int64(3*uid+1))
		}
		if err := loadtest.PostUsers(base, "big", uids); err != nil {
			return err
		}
	}
	return nil
}

// printTables prints the tables of the GETs and PUTs, large against small,
// and of the deletions.
func printTables(gets [2][]loadtest.Result, puts [2]latencies, deletes []deletion) {
	g0, g1 := loadtest.Median(gets[0]), loadtest.Median(gets[1])
	fmt.Println()
	fmt.Println("| Request (both with -data-dir) | 1,000,000 groups | 1,000 groups | Speed, large ÷ small |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| GET /groups?limit=100, 50 connections | %.0f req/s, p99 %s | %.0f req/s, p99 %s | %.2f |\n",
		g0.RPS, g0.P99, g1.RPS, g1.P99, g0.RPS/g1.RPS)
	fmt.Printf("| PUT of 1,000 users into a group of 1,000, half changed, one at a time | median %s, p99 %s | median %s, p99 %s | %.2f |\n",
		puts[0].median, puts[0].p99, puts[1].median, puts[1].p99, float64(puts[1].median)/float64(puts[0].median))
	fmt.Println()
	fmt.Println("| DELETE /groups/big | Members | Time | RSS before | Peak RSS while it ran | Growth |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, d := range deletes {
		fmt.Printf("| %s | %d | %s | %s | %s | %s |\n", d.service, d.removed, d.took.Round(time.Millisecond),
			loadtest.MiB(d.before), loadtest.MiB(d.peak), loadtest.MiB(d.peak-d.before))
	}
}

func groupID(i int) string { return fmt.Sprintf("group-%07d", i) }

// restoreLarge writes a backup of the large state (opts.groups groups of 1
// to 3 members, a group "half" of 1,000 and one "big" of opts.big) and
// restores it into dataDir with the service's -restore.
func restoreLarge(bin, tmp, dataDir string, opts options) error {
	st := &snap.State{Nicknames: map[membership.UID]string{}}
	rev := membership.Revision(0)
	group := func(id string, uids []membership.UID) {
		rev++
		st.Groups = append(st.Groups, snap.Group{ID: id, Revision: rev, UIDs: uids})
	}
	for i := range opts.groups {
		n := 1 + i%3
		uids := make([]membership.UID, n)
		for j := range uids {
			uids[j] = membership.UID(i*3 + j + 1)
		}
		group(groupID(i), uids)
	}
	half := make([]membership.UID, 1000)
	for i := range half {
		half[i] = membership.UID(i + 1)
	}
	group("half", half)
	big := make([]membership.UID, opts.big)
	for i := range big {
		big[i] = membership.UID(3*i + 1)
	}
	group("big", big)
	st.LastRevision = rev
	var backup bytes.Buffer
	if _, err := snap.NewBackup(st).WriteTo(&backup); err != nil {
		return err
	}
	path := filepath.Join(tmp, "large.backup")
	if err := os.WriteFile(path, backup.Bytes(), 0o666); err != nil {
		return err
	}
	if out, err := exec.Command(bin, "-restore", path, "-data-dir", dataDir).CombinedOutput(); err != nil {
		return fmt.Errorf("restoring the large state: %v\n%s", err, out)
	}
	return nil
}

type latencies struct{ median, p99 time.Duration }

// timePuts replaces the group "half" (1,000 members: 1 to 1,000, or 501 to
// 1,500) n times, one request after another, alternating between the two
// sets, so that each PUT adds 500 and removes 500.
func timePuts(s service, n int) (latencies, error) {
	bodies := [2][]byte{loadtest.UsersBody(1, 1000), loadtest.UsersBody(501, 1000)}
	if err := put(s.base, bodies[0]); err != nil {
		return latencies{}, err
	}
	took := make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		if err := put(s.base, bodies[(i+1)%2]); err != nil {
			return latencies{}, err
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return latencies{median: took[len(took)/2], p99: took[len(took)*99/100]}, nil
}

func put(base string, body []byte) error {
	req, err := http.NewRequest(http.MethodPut, base+"/group-user/half", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT /group-user/half: %s %s", resp.Status, got)
	}
	return nil
}

type deletion struct {
	service      string
	removed      int
	took         time.Duration
	before, peak int64
}

// timeDelete deletes the group "big" of s, and measures the request's time
// and the service's peak resident memory while it ran (VmHWM, reset first
// through /proc/PID/clear_refs).
func timeDelete(s service, members int) (deletion, error) {
	d := deletion{service: map[string]string{"large": "with -data-dir (the large state)", "memory": "memory-only"}[s.name]}
	var err error
	if d.before, err = loadtest.RSS(s.pid); err != nil {
		return d, err
	}
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", s.pid), []byte("5"), 0); err != nil {
		return d, fmt.Errorf("resetting the peak RSS: %w", err)
	}
	req, err := http.NewRequest(http.MethodDelete, s.base+"/groups/big", nil)
	if err != nil {
		return d, err
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return d, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	d.took = time.Since(start)
	if resp.StatusCode != http.StatusOK {
		return d, fmt.Errorf("DELETE /groups/big on the %s service: %s %s", s.name, resp.Status, body)
	}
	if d.removed, err = strconv.Atoi(strings.TrimSpace(string(body))); err != nil || d.removed != members {
		return d, fmt.Errorf("DELETE /groups/big on the %s service removed %q, want %d", s.name, body, members)
	}
	d.peak, err = loadtest.PeakRSS(s.pid)
	return d, err
}
