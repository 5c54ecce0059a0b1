package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A holder is a child process of the harness that opens connections and
// holds them. Every process has the machine's limit of open descriptors
// (20,000 here, the hard limit, which only a privileged process may raise),
// and the harness needs a few of its own beside the connections of an
// attack: so the attack's connections are spread over children, each the
// harness's own binary run again with holderEnv set.
//
// A holder opens its connections, each with a GET, reads each reply, and
// prints a holderReport as one line of JSON. Then, on each line "check" of
// its stdin, it looks, without waiting, at what became of the connections
// it holds and prints another report; on "close", or at the end of its
// stdin, it closes them all and exits.

// holderEnv carries a holder's orders: "ADDR TARGET COUNT PERSECOND".
const holderEnv = "MEMBERSHIP_ATTACK_HOLDER"

// holderDialers is how many connections a holder opens at once.
const holderDialers = 32

// holderReport is what a holder says: how many connections it opened and
// what their GETs got, or what became of those it holds.
type holderReport struct {
	Opened int            `json:"opened"`
	Held   int            `json:"held"`
	Tally  map[string]int `json:"tally"`
	Took   time.Duration  `json:"took"`
	Err    string         `json:"err,omitempty"` // the last error, as a sample
}

// add adds the counts of o to r; r took as long as the longer.
func (r *holderReport) add(o holderReport) {
	if r.Tally == nil {
		r.Tally = make(map[string]int)
	}
	r.Opened += o.Opened
	r.Held += o.Held
	r.Took = max(r.Took, o.Took)
	for k, v := range o.Tally {
		r.Tally[k] += v
	}
	if o.Err != "" {
		r.Err = o.Err
	}
}

// runHolder is a holder's main.
func runHolder(orders string) int {
	f := strings.Fields(orders)
	if len(f) != 4 {
		fmt.Fprintf(os.Stderr, "holder: %s=%q: want ADDR TARGET COUNT PERSECOND\n", holderEnv, orders)
		return 2
	}
	addr, target := f[0], f[1]
	count, err := strconv.Atoi(f[2])
	perSecond, err2 := strconv.Atoi(f[3])
	if err := errors.Join(err, err2); err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		return 2
	}
	h := &holding{}
	h.open(addr, target, count, perSecond)
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(h.report()); err != nil {
		return 1
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "check":
			if err := out.Encode(h.check()); err != nil {
				return 1
			}
		case "close":
			h.closeAll()
			return 0
		}
	}
	h.closeAll()
	return 0
}

// holding is a holder's connections.
type holding struct {
	mu    sync.Mutex
	conns []net.Conn
	tally map[string]int
	last  error
	took  time.Duration
}

// open opens count connections to addr, at most perSecond a second (0: as
// fast as holderDialers go), each with a GET of target, and keeps those
// whose reply was a 200 and that the service keeps open.
func (h *holding) open(addr, target string, count, perSecond int) {
	h.tally = make(map[string]int)
	req := getRequest(addr, target)
	h.took = openAll(context.Background(), count, holderDialers, perSecond, func() {
		c, outcome, err := getAndHold(addr, req)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.tally[outcome]++
		if err != nil {
			h.last = err
		}
		if c != nil {
			h.conns = append(h.conns, c)
		}
	})
}

// getAndHold opens a connection, sends req and reads the reply. It returns
// the connection when the reply was a 200 that leaves it open, and names
// the outcome: the status ("200", "503"), "closed before a reply", or the
// step that failed.
func getAndHold(addr string, req []byte) (net.Conn, string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, "dial failed", err
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(req); err != nil {
		c.Close()
		return nil, "write failed", err
	}
	// The buffer is the connection's, read to the end of the reply: what
	// it holds beyond is nothing, as the service sends nothing unasked.
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 4096), nil)
	if err != nil {
		c.Close()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
			return nil, "closed before a reply", err
		}
		return nil, "read failed", err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	outcome := strconv.Itoa(resp.StatusCode)
	if err != nil || resp.Close || resp.StatusCode != http.StatusOK {
		c.Close()
		return nil, outcome, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, outcome, nil
}

func (h *holding) report() holderReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := holderReport{Held: len(h.conns), Tally: h.tally, Took: h.took}
	for _, n := range h.tally {
		r.Opened += n
	}
	if h.last != nil {
		r.Err = h.last.Error()
	}
	return r
}

// check says what became of the connections held: "open" (nothing came),
// "closed by the service" (end of stream or reset), or "sent something".
// Those closed are closed here too, which gives their descriptors back.
func (h *holding) check() holderReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	tally := make(map[string]int)
	kept := h.conns[:0]
	buf := make([]byte, 64)
	for _, c := range h.conns {
		n, closed := peek(c, buf)
		switch {
		case n > 0:
			tally["sent something"]++
			kept = append(kept, c)
		case closed:
			tally["closed by the service"]++
			c.Close()
		default:
			tally["open"]++
			kept = append(kept, c)
		}
	}
	h.conns = kept
	return holderReport{Held: len(kept), Tally: tally}
}

func (h *holding) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		c.Close()
	}
	h.conns = nil
}

// holder is the harness's side of a holder process.
type holder struct {
	*child
	in  io.WriteCloser
	out *bufio.Scanner
}

// startHolders starts n holders that open count connections to addr
// between them, at most perSecond a second in all, each with a GET of
// target, and returns once they have all opened theirs, with the sum of
// their reports.
func startHolders(ctx context.Context, n int, addr, target string, count, perSecond int) ([]*holder, holderReport, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, holderReport{}, err
	}
	var hs []*holder
	for i := range n {
		share := count / n
		if i < count%n {
			share++
		}
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d %d", holderEnv, addr, target, share, perSecond/n))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			closeHolders(hs)
			return nil, holderReport{}, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			closeHolders(hs)
			return nil, holderReport{}, err
		}
		c, err := startChild(cmd, "holder")
		if err != nil {
			closeHolders(hs)
			return nil, holderReport{}, fmt.Errorf("starting a holder: %w", err)
		}
		hs = append(hs, &holder{child: c, in: in, out: bufio.NewScanner(out)})
	}
	sum, err := readHolders(ctx, hs, 2*time.Minute)
	if err != nil {
		closeHolders(hs)
		return nil, holderReport{}, err
	}
	return hs, sum, nil
}

// checkHolders asks every holder what became of its connections.
func checkHolders(ctx context.Context, hs []*holder) (holderReport, error) {
	for _, h := range hs {
		if _, err := io.WriteString(h.in, "check\n"); err != nil {
			return holderReport{}, fmt.Errorf("asking a holder: %w", err)
		}
	}
	return readHolders(ctx, hs, 30*time.Second)
}

// readHolders reads one report of each holder and sums them.
func readHolders(ctx context.Context, hs []*holder, limit time.Duration) (holderReport, error) {
	type result struct {
		r   holderReport
		err error
	}
	results := make(chan result, len(hs))
	for _, h := range hs {
		go func() {
			defer guard()
			var r holderReport
			if !h.out.Scan() {
				results <- result{err: fmt.Errorf("a holder ended without a report: %v", h.out.Err())}
				return
			}
			err := json.Unmarshal(h.out.Bytes(), &r)
			results <- result{r, err}
		}()
	}
	sum := holderReport{Tally: make(map[string]int)}
	timeout := time.NewTimer(limit)
	defer timeout.Stop()
	for range hs {
		select {
		case res := <-results:
			if res.err != nil {
				return sum, res.err
			}
			sum.add(res.r)
		case <-timeout.C:
			return sum, fmt.Errorf("the holders did not report within %s", limit)
		case <-ctx.Done():
			return sum, ctx.Err()
		}
	}
	return sum, nil
}

// closeHolders tells the holders to close their connections and exit, and
// kills those that have not within a few seconds.
func closeHolders(hs []*holder) {
	var wg sync.WaitGroup
	for _, h := range hs {
		_, _ = io.WriteString(h.in, "close\n")
		h.in.Close()
		spawn(&wg, func() {
			select {
			case <-h.exited:
			case <-time.After(5 * time.Second):
			}
			h.kill()
		})
	}
	wg.Wait()
}
