// Package loadtest holds what the harnesses of the bench module share:
// starting a service binary and waiting for it, loading it with wrk or
// requests, and reading the figures (throughput, p99, medians, /metrics,
// a process's memory).
package loadtest

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PostLua is the wrk script of the POST rows: 3 random users (uids 1 to
// 1e9) to one of 1000 groups, as a form body.
//
//go:embed post.lua
var PostLua []byte

// Load is how wrk loads a service: client threads, connections, how long
// each run lasts, and header fields to send ("Connection: close" makes a
// new connection for each request).
type Load struct {
	Threads     int
	Connections int
	Duration    time.Duration
	Headers     []string
}

// Result is one load run.
type Result struct {
	RPS float64       // requests per second
	P99 time.Duration // the 99th percentile of latency
}

// RandomUIDs returns n distinct uids drawn from 1 to upTo (all of them,
// in a random order, when n is more).
func RandomUIDs(rng *rand.Rand, n int, upTo int64) []int64 {
	n = int(min(int64(n), upTo))
	seen := make(map[int64]bool, n)
	uids := make([]int64, 0, n)
	for len(uids) < n {
		uid := rng.Int64N(upTo) + 1
		if !seen[uid] {
			seen[uid] = true
			uids = append(uids, uid)
		}
	}
	return uids
}

// StartService starts the service binary bin on a free loopback port, with
// extraArgs, its output in DIR/NAME.log, and waits until /readyz answers 200
// (over HTTPS when extraArgs has -tls-cert: http.DefaultClient must trust
// its certificate).
func StartService(bin, dir, name, extraArgs string) (addr string, pid int, stop func(), err error) {
	addr, err = FreeAddr()
	if err != nil {
		return "", 0, nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return "", 0, nil, err
	}
	args := append([]string{"-addr", addr, "-max-users", "100000", "-max-body", "16777216"}, strings.Fields(extraArgs)...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return "", 0, nil, err
	}
	stop = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
	}
	scheme := "http://"
	if slices.Contains(strings.Fields(extraArgs), "-tls-cert") {
		scheme = "https://"
	}
	if err := WaitHTTP(context.Background(), scheme+addr+"/readyz", 10*time.Second, nil); err != nil {
		stop()
		return "", 0, nil, fmt.Errorf("the %s did not start: %w", name, err)
	}
	return addr, cmd.Process.Pid, stop, nil
}

// Get returns the body of a GET of url by client, an error unless it
// answers 200.
func Get(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, err
}

// PostUsers adds uids to group on the service at base.
func PostUsers(base, group string, uids []int64) error {
	var b strings.Builder
	b.WriteString("[")
	for i, uid := range uids {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(strconv.FormatInt(uid, 10))
	}
	b.WriteString("]")
	resp, err := http.PostForm(base+"/group-user/"+group, url.Values{"users": {b.String()}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != strconv.Itoa(len(uids)) {
		return fmt.Errorf("adding %d users to %s: %s %s", len(uids), group, resp.Status, body)
	}
	return nil
}

// ParseMetrics reads a page of /metrics into its series (each name with
// its labels, as written) and their values.
func ParseMetrics(page []byte) map[string]float64 {
	m := map[string]float64{}
	for line := range strings.SplitSeq(string(page), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

// UsersBody is the form body users=[from,from+1,...,from+n-1]. The service
// reads '[', ']' and ',' unescaped, as curl -d would send them.
func UsersBody(from, n int64) []byte {
	b := make([]byte, 0, 8+n*9)
	b = append(b, "users=["...)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, from+i, 10)
	}
	return append(b, ']')
}

// What RunWrk reads of wrk's output.
var (
	wrkRPS     = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
	wrkP99     = regexp.MustCompile(`\n\s+99%\s+([\d.]+)(us|ms|s)`)
	wrkNon2xx  = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	wrkErrors  = regexp.MustCompile(`Socket errors: .*`)
	latencyDur = map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}
)

// RunWrk runs wrk against target (with the Lua script, if any), killed
// when ctx is done, and returns its throughput and p99. A reply that is
// not 2xx or 3xx fails the run.
func (l Load) RunWrk(ctx context.Context, target, script string) (Result, error) {
	args := []string{"-t", strconv.Itoa(l.Threads), "-c", strconv.Itoa(l.Connections),
		"-d", l.Duration.String(), "--latency"}
	if script != "" {
		args = append(args, "-s", script)
	}
	for _, h := range l.Headers {
		args = append(args, "-H", h)
	}
	out, err := exec.CommandContext(ctx, "wrk", append(args, target)...).CombinedOutput()
	if err != nil {
		return Result{}, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	if m := wrkNon2xx.FindSubmatch(out); m != nil {
		return Result{}, fmt.Errorf("wrk saw %s responses that were not 2xx:\n%s", m[1], out)
	}
	if m := wrkErrors.Find(out); m != nil {
		fmt.Printf("  note: wrk reports %s\n", m)
	}
	rps, p99 := wrkRPS.FindSubmatch(out), wrkP99.FindSubmatch(out)
	if rps == nil || p99 == nil {
		return Result{}, fmt.Errorf("cannot read wrk's output:\n%s", out)
	}
	r := Result{}
	r.RPS, _ = strconv.ParseFloat(string(rps[1]), 64)
	v, _ := strconv.ParseFloat(string(p99[1]), 64)
	r.P99 = time.Duration(v * float64(latencyDur[string(p99[2])]))
	return r, nil
}

// Median returns the median throughput and the median p99 of rs.
func Median(rs []Result) Result {
	rps := make([]float64, len(rs))
	p99 := make([]time.Duration, len(rs))
	for i, r := range rs {
		rps[i], p99[i] = r.RPS, r.P99
	}
	slices.Sort(rps)
	slices.Sort(p99)
	return Result{RPS: rps[len(rps)/2], P99: p99[len(p99)/2]}
}

// RSS returns the resident set size of process pid, in bytes.
func RSS(pid int) (int64, error) {
	return ProcBytes(fmt.Sprintf("/proc/%d/status", pid), "VmRSS")
}

// PeakRSS returns the peak resident set size of process pid (VmHWM), in
// bytes.
func PeakRSS(pid int) (int64, error) {
	return ProcBytes(fmt.Sprintf("/proc/%d/status", pid), "VmHWM")
}

// ProcBytes returns the field name of a /proc file of "name: N kB"
// lines, such as /proc/PID/status or /proc/meminfo, in bytes.
func ProcBytes(path, name string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in %s", name, path)
}

// MiB formats n bytes in mebibytes, to a tenth.
func MiB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// NumCPU returns the cores nproc reports, 0 when it cannot tell.
func NumCPU() int {
	out, err := exec.Command("nproc").Output()
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}

// FreeAddr returns a loopback address whose port was free a moment ago.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// WaitHTTP polls url every 10 ms until it answers 200, for at most wait,
// or until exited is closed (nil: never).
func WaitHTTP(ctx context.Context, url string, wait time.Duration, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s answers %s", url, resp.Status)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %s: %w", wait, err)
		case <-exited:
			return errors.New("it exited")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
