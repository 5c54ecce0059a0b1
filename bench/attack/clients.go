package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"example.com/groupmembership/bench/loadtest"
)

const formType = "application/x-www-form-urlencoded"

// Three clients, so that each kind of traffic has its own connections: the
// load must not queue behind the probe nor the probe behind the load.
var (
	// loadClient carries the attacks' ordinary requests, many at once.
	loadClient = &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		MaxIdleConnsPerHost: 512,
		DisableCompression:  true,
	}}
	// probeClient opens a new connection for every request: the probe
	// stands for a new client, who must get through even when the service
	// holds thousands of connections.
	probeClient = &http.Client{Transport: &http.Transport{
		Proxy:              nil,
		DisableKeepAlives:  true,
		DisableCompression: true,
	}}
	// sideClient carries the harness's own reads: /metrics, /readyz.
	sideClient = &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		MaxIdleConnsPerHost: 8,
		DisableCompression:  true,
	}}
)

// reply is the outcome of one request.
type reply struct {
	status int
	header http.Header
	body   []byte // at most maxReplyBody bytes; the rest is read and dropped
	took   time.Duration
	err    error
}

const maxReplyBody = 4 << 20

func (r reply) timedOut() bool {
	var ne net.Error
	return errors.Is(r.err, context.DeadlineExceeded) || (errors.As(r.err, &ne) && ne.Timeout())
}

// outcome names the reply for a tally: the status, "timeout" or "error".
func (r reply) outcome() string {
	switch {
	case r.err == nil:
		return strconv.Itoa(r.status)
	case r.timedOut():
		return "timeout"
	default:
		return "error"
	}
}

// do sends one request with its own timeout and reads the whole reply, so
// that took covers the body as well.
func do(ctx context.Context, c *http.Client, method, url string, body []byte, ctype string, timeout time.Duration) reply {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return reply{err: err}
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return reply{err: err, took: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBody))
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b, took: time.Since(start), err: err}
}

func get(ctx context.Context, c *http.Client, url string, timeout time.Duration) reply {
	return do(ctx, c, http.MethodGet, url, nil, "", timeout)
}

// post is one POST of the users [from, from+n) to group.
type post struct {
	group   string
	from, n int64
}

// seed adds the users [from, from+n) to group in POSTs of at most 10,000
// (the service's default -max-users).
func seed(ctx context.Context, s *service, group string, from, n int64) error {
	const batch = 10000
	var posts []post
	for start := from; start < from+n; start += batch {
		posts = append(posts, post{group, start, min(batch, from+n-start)})
	}
	return seedPosts(ctx, s, posts)
}

// seedPosts sends the posts two at a time, which is as fast as two cores
// go, and stops at the first failure.
func seedPosts(ctx context.Context, s *service, posts []post) error {
	jobs := make(chan post)
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for range 2 {
		spawn(&wg, func() {
			for p := range jobs {
				rep := do(ctx, loadClient, http.MethodPost, s.base+"/group-user/"+p.group, loadtest.UsersBody(p.from, p.n), formType, 30*time.Second)
				if rep.err != nil || rep.status != http.StatusOK {
					errs <- fmt.Errorf("seeding %s at uid %d: %s %s", p.group, p.from, rep.outcome(), bytes.TrimSpace(rep.body))
					return
				}
			}
		})
	}
	var err error
feed:
	for _, p := range posts {
		select {
		case jobs <- p:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

// errorBody is the service's JSON error.
type errorBody struct {
	Error struct {
		Code           string `json:"code"`
		Message        string `json:"message"`
		OldestRevision uint64 `json:"oldest_revision"`
	} `json:"error"`
}

// reason is what a JSON body says about why: an error's code and message, or
// a top-level reason or status. "" when it says nothing readable.
func reason(body []byte) string {
	var v struct {
		errorBody
		Status string `json:"status"`
		Reason string `json:"reason"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	switch {
	case v.Error.Message != "":
		return v.Error.Code + ": " + v.Error.Message
	case v.Reason != "":
		return v.Reason
	default:
		return v.Status
	}
}

// saying is ": <reason>" for a body that gives one, else "".
func saying(body []byte) string {
	if why := reason(body); why != "" {
		return ": " + why
	}
	return ""
}

// rawRequest opens a connection and writes req on it, and leaves the reply
// unread: the harness's stand-in for a client that stalls. The caller owns
// the connection.
func rawRequest(ctx context.Context, addr string, req []byte) (net.Conn, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(req); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetWriteDeadline(time.Time{})
	return c, nil
}

// getRequest is a raw HTTP/1.1 GET.
func getRequest(addr, target string) []byte {
	return []byte("GET " + target + " HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: attack\r\n\r\n")
}

// rawConns holds connections that stalled clients opened.
type rawConns struct {
	mu      sync.Mutex
	conns   []net.Conn
	dialErr int
	cut     int // writes of writeAndHold the service cut short
	lastErr error
}

func (r *rawConns) add(c net.Conn, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.dialErr++
		r.lastErr = err
		return
	}
	r.conns = append(r.conns, c)
}

func (r *rawConns) count() (open, failed, cut int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.conns), r.dialErr, r.cut
}

// writeAndHold opens a connection to addr, writes b on it and holds it.
// Unlike rawRequest, it keeps a connection whose write the service cut
// short, and counts it: the service may have answered before it closed.
func (r *rawConns) writeAndHold(ctx context.Context, addr string, b []byte) {
	c, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		r.add(nil, err)
		return
	}
	_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	_, werr := c.Write(b)
	_ = c.SetWriteDeadline(time.Time{})
	r.add(c, nil)
	if werr != nil {
		r.mu.Lock()
		r.cut++
		r.mu.Unlock()
	}
}

// lastError is the last error of a dial, "" when none failed.
func (r *rawConns) lastError() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastErr == nil {
		return ""
	}
	return r.lastErr.Error()
}

// answered counts the connections the service has written something to,
// by status line, without waiting: a stalled client that got a 503 was
// refused early, one that got nothing is still held.
func (r *rawConns) answered() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := make(map[string]int)
	buf := make([]byte, 16)
	for _, c := range r.conns {
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		n, err := io.ReadFull(c, buf[:12])
		switch {
		case n == 12 && bytes.HasPrefix(buf, []byte("HTTP/1.1 ")):
			got[string(buf[9:12])]++
		case n > 0:
			got["other"]++
		case errors.Is(err, os.ErrDeadlineExceeded):
			got["nothing yet"]++
		default:
			got["closed"]++
		}
	}
	return got
}

// closeAll closes every connection; unread replies make the kernel reset
// them, so the service's writers fail at once instead of at their timeout.
func (r *rawConns) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

// peek looks at what the service sent on c, without waiting and without
// consuming it: up to len(buf) bytes, and whether the service has closed
// the connection (end of stream, or reset) with nothing left to read.
func peek(c net.Conn, buf []byte) (n int, closed bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var rerr error
	err = raw.Read(func(fd uintptr) bool {
		n, _, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	})
	switch {
	case err != nil:
		return 0, true
	case rerr == nil && n == 0:
		return 0, true
	case rerr == nil:
		return n, false
	case errors.Is(rerr, syscall.EAGAIN):
		return 0, false
	default:
		return 0, true
	}
}

// statusOf names what the service sent on c so far, without waiting: the
// status of its reply ("200", "503"), "nothing yet", or "closed" when it
// closed the connection without a reply.
func statusOf(c net.Conn) string {
	buf := make([]byte, 12)
	n, closed := peek(c, buf)
	switch {
	case n == 12 && bytes.HasPrefix(buf, []byte("HTTP/1.1 ")):
		return string(buf[9:12])
	case n > 0:
		return "other"
	case closed:
		return "closed"
	default:
		return "nothing yet"
	}
}

// statuses tallies statusOf over the connections held.
func (r *rawConns) statuses() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := make(map[string]int)
	for _, c := range r.conns {
		got[statusOf(c)]++
	}
	return got
}
