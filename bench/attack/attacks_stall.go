package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"example.com/groupmembership/bench/loadtest"
)

// Attacks that stall what the service writes to: its log, its disk.

// attackStalledStdout gives the service a stdout that nobody reads, as a
// wedged log collector would. Requests must still be served, the probes
// must still answer, and SIGTERM must still end the process.
func attackStalledStdout(ctx context.Context, h *harness, r *row) error {
	const (
		requests  = 5000
		clients   = 8
		loadFor   = 15 * time.Second
		reqLimit  = 2 * time.Second
		exitLimit = 20 * time.Second
		// minProbing is the least time the probe runs with the log stalled.
		minProbing = 5 * time.Second
	)
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	// The read end stays open, unread, until the service is gone: open, a
	// full pipe blocks the writer; closed, it would fail fast with EPIPE.
	closeRead := atExit("close the stalled stdout pipe", func() { pr.Close() })
	defer closeRead()
	s, err := startProbed(ctx, h.bin, serviceOptions{out: pw})
	pw.Close() // the service holds its own copy
	if err != nil {
		return err
	}
	defer s.kill()
	err = measure(ctx, h, s, r, exitLimit, func(ctx context.Context, sm *sampler) error {
		loadCtx, cancel := context.WithTimeout(ctx, loadFor)
		defer cancel()
		reqCtx := context.WithoutCancel(ctx)
		start := time.Now()
		reqs := getAndPost(loadCtx, reqCtx, s, requests, clients, reqLimit)
		r.notef("%d of %d requests (GETs, every 10th a POST) from %d clients in %s: %s; p50 %s p99 %s",
			reqs.n(), requests, clients, fmtDur(time.Since(start)), reqs.tally(), reqs.pctString(50), reqs.pctString(99))
		r.notef("the stdout pipe holds %d bytes unread (a pipe holds 65536 by default: full means the service's log writes block)", pipeUnread(pr))
		// A service that keeps up sends the 5000 in a fraction of a second;
		// the probe needs longer than that, with the log still stalled, to
		// say anything.
		if err := sleepCtx(ctx, time.Until(start.Add(minProbing))); err != nil {
			return err
		}

		hz := get(ctx, sideClient, s.base+"/healthz", time.Second)
		r.check("/healthz answers 200 within 1s", fmt.Sprintf("%s in %s", hz.outcome(), fmtDur(hz.took)), hz.err == nil && hz.status == http.StatusOK)
		// A stalled log may well be a reason to say not ready; what matters
		// is that the probe answers.
		rz := get(ctx, sideClient, s.base+"/readyz", time.Second)
		r.check("/readyz answers within 1s", fmt.Sprintf("%s in %s%s", rz.outcome(), fmtDur(rz.took), saying(rz.body)), rz.err == nil)
		return nil
	})
	took, exited := s.stop(exitLimit)
	status := "exit status 0"
	if s.waitErr != nil {
		status = s.waitErr.Error()
	}
	got := fmt.Sprintf("exited in %s (%s)", fmtDur(took), status)
	if !exited {
		got = fmt.Sprintf("still running after %s: killed", fmtDur(took))
	}
	r.check("exits within 20s of SIGTERM", got, exited)
	return err
}

// attackStalledDisk freezes the filesystem under -data-dir, as a hung
// network disk or a full-queue SSD would stall it. Writes cannot finish;
// what matters is that they are refused in bounded time, that reads go on,
// and that /readyz says why.
func attackStalledDisk(ctx context.Context, h *harness, r *row) error {
	const (
		frozenFor   = 15 * time.Second
		posters     = 200
		postLimit   = 2 * time.Second
		canaryLimit = 8 * time.Second // past the default 5 s commit timeout
	)
	fs, s, err := startOnLoopFS(ctx, h, 64)
	if err != nil {
		return err
	}
	defer fs.release()
	defer s.kill()
	r.notef("data dir on %s (%s, 64 MiB ext4), frozen with fsfreeze for %s", fs.mnt, fs.dev, frozenFor)
	return measure(ctx, h, s, r, 0, func(ctx context.Context, sm *sampler) error {
		if err := fs.freeze(ctx, frozenFor+30*time.Second); err != nil {
			return err
		}
		// Thawed on every way out; here, as soon as the window ends.
		defer fs.thawNow()
		frozenCtx, cancel := context.WithTimeout(ctx, frozenFor)
		defer cancel()
		reqCtx := context.WithoutCancel(ctx)
		var wg sync.WaitGroup

		posts := postWhileFrozen(frozenCtx, reqCtx, &wg, s, posters, postLimit)
		// One write that waits past the commit timeout, to see how the
		// service ends a write it cannot commit.
		var canary reply
		spawn(&wg, func() {
			canary = do(reqCtx, loadClient, http.MethodPost, s.base+"/group-user/frozen", loadtest.UsersBody(9_000_001, 1), formType, canaryLimit)
		})
		readyz := make(map[string]int)
		var sawReason string
		spawnEvery(frozenCtx, &wg, 500*time.Millisecond, func() {
			rep := get(reqCtx, sideClient, s.base+"/readyz", time.Second)
			readyz[rep.outcome()]++
			if rep.status == http.StatusServiceUnavailable && sawReason == "" {
				sawReason = reason(rep.body)
			}
		})
		// The POSTs in flight end on their own timeout, still frozen, so that
		// the tally is of the freeze alone; then thaw.
		<-frozenCtx.Done()
		wg.Wait()
		fs.thawNow()

		r.notef("%d clients POSTing while frozen (%s client timeout): %s; p50 %s p99 %s",
			posters, postLimit, posts.tally(), posts.pctString(50), posts.pctString(99))
		r.notef("one POST with an %s timeout, sent at the freeze: %s after %s%s", canaryLimit, canary.outcome(), fmtDur(canary.took), saying(canary.body))
		r.notef("/readyz every 500ms while frozen: %s; reason given: %q", fmtTally(readyz), sawReason)
		r.check("/readyz says 503 with a reason while the disk is frozen",
			fmt.Sprintf("%s; reason %q", fmtTally(readyz), sawReason), readyz["503"] > 0 && sawReason != "")

		// Once thawed, writes must work again.
		after := do(ctx, loadClient, http.MethodPost, s.base+"/group-user/frozen", loadtest.UsersBody(9_000_002, 1), formType, 10*time.Second)
		r.notef("after the thaw: a POST got %s in %s", after.outcome(), fmtDur(after.took))
		return nil
	})
}

// attackFullDisk fills the filesystem under -data-dir until ENOSPC, so that
// every write is refused, and checks that /readyz tells a load balancer, and
// that it recovers once there is room again.
func attackFullDisk(ctx context.Context, h *harness, r *row) error {
	const (
		fullFor      = 5 * time.Second
		recoverLimit = 10 * time.Second
	)
	fs, s, err := startOnLoopFS(ctx, h, 32)
	if err != nil {
		return err
	}
	defer fs.release()
	defer s.kill()
	return measure(ctx, h, s, r, 0, func(ctx context.Context, sm *sampler) error {
		filler := filepath.Join(fs.mnt, "filler")
		defer os.Remove(filler)
		n, err := fill(filler)
		if err != nil {
			return err
		}
		r.notef("data dir on %s (%s, 32 MiB ext4); filled with %s until ENOSPC", fs.mnt, fs.dev, loadtest.MiB(n))

		writeUntilRefused(ctx, s, r)
		posts := newRecorder()
		readyz := make(map[string]int)
		writable := make(map[string]int)
		var sawReason string
		end := time.Now().Add(fullFor)
		for i := int64(0); time.Now().Before(end); i++ {
			rep := do(ctx, loadClient, http.MethodPost, s.base+"/group-user/full", loadtest.UsersBody(8_000_000+i*1000, 1000), formType, 2*time.Second)
			posts.addReply(rep, 2*time.Second)
			rz := get(ctx, sideClient, s.base+"/readyz", time.Second)
			readyz[rz.outcome()]++
			if rz.status == http.StatusServiceUnavailable && sawReason == "" {
				sawReason = reason(rz.body)
			}
			if v, ok := s.gauge(ctx, "membership_store_writable", time.Second); ok {
				writable[fmt.Sprint(v)]++
			} else {
				writable["absent"]++
			}
			if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
				return err
			}
		}
		allRefused := posts.n() > 0 && posts.count("503") == posts.n()
		r.notef("while full: POSTs %s; /readyz %s (reason %q); membership_store_writable %s",
			posts.tally(), fmtTally(readyz), sawReason, fmtTally(writable))
		polls := 0
		for _, c := range readyz {
			polls += c
		}
		if accepted := posts.count("200"); accepted > 0 {
			r.notef("the disk was full, yet %d of %d writes of 1000 users were accepted", accepted, posts.n())
		}
		r.check("/readyz not 200 while every write gets 503",
			fmt.Sprintf("writes %s, /readyz %s", posts.tally(), fmtTally(readyz)), !allRefused || readyz["200"] < polls)

		return checkRecovers(ctx, s, r, filler, recoverLimit)
	})
}

// getAndPost sends up to requests requests from clients clients until
// loadCtx ends, GETs with every 10th a POST, each within reqLimit, and
// returns what they were answered.
func getAndPost(loadCtx, reqCtx context.Context, s *service, requests int64, clients int, reqLimit time.Duration) *recorder {
	reqs := newRecorder()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		spawn(&wg, func() {
			for loadCtx.Err() == nil {
				i := next.Add(1)
				if i > requests {
					return
				}
				var rep reply
				if i%10 == 0 {
					rep = do(reqCtx, loadClient, http.MethodPost, s.base+"/group-user/stdout", loadtest.UsersBody(i, 3), formType, reqLimit)
				} else {
					rep = get(reqCtx, loadClient, s.base+"/group-user/probe", reqLimit)
				}
				reqs.addReply(rep, reqLimit)
			}
		})
	}
	wg.Wait()
	return reqs
}

// postWhileFrozen starts, on wg, posters clients that POST until frozenCtx
// ends, each within postLimit, and returns what they are answered.
func postWhileFrozen(frozenCtx, reqCtx context.Context, wg *sync.WaitGroup, s *service, posters int, postLimit time.Duration) *recorder {
	posts := newRecorder()
	for i := range posters {
		spawn(wg, func() {
			for frozenCtx.Err() == nil {
				rep := do(reqCtx, loadClient, http.MethodPost, s.base+"/group-user/frozen", loadtest.UsersBody(int64(i)*3+1, 3), formType, postLimit)
				posts.addReply(rep, postLimit)
				if rep.err == nil && rep.status != http.StatusOK {
					// A refused client backs off a little, as a real one
					// would; a hot loop would only measure the harness.
					_ = sleepCtx(frozenCtx, 50*time.Millisecond)
				}
			}
		})
	}
	return posts
}

// writeUntilRefused writes 1000 users at a time, at most 50 times, until
// the first refusal. The log's last block has room for a few small
// records: larger ones fill it, so that what follows sees a disk with no
// room for any write.
func writeUntilRefused(ctx context.Context, s *service, r *row) {
	slack := 0
	for ; slack < 50; slack++ {
		rep := do(ctx, loadClient, http.MethodPost, s.base+"/group-user/full", loadtest.UsersBody(7_000_000+int64(slack)*1000, 1000), formType, 2*time.Second)
		if rep.err != nil || rep.status != http.StatusOK {
			r.notef("%d writes of 1000 users accepted before the first refusal (%s%s)", slack, rep.outcome(), saying(rep.body))
			break
		}
	}
	if slack == 50 {
		r.notef("all %d writes of 1000 users were accepted: the service never refused one", slack)
	}
}

// checkRecovers removes filler and checks that /readyz says 200 within
// recoverLimit, then tries a write.
func checkRecovers(ctx context.Context, s *service, r *row, filler string, recoverLimit time.Duration) error {
	if err := os.Remove(filler); err != nil {
		return err
	}
	freed := time.Now()
	back := false
	var last reply
	for time.Since(freed) < recoverLimit && ctx.Err() == nil {
		last = get(ctx, sideClient, s.base+"/readyz", time.Second)
		if last.status == http.StatusOK {
			back = true
			break
		}
		_ = sleepCtx(ctx, 100*time.Millisecond)
	}
	r.check("/readyz 200 within 10s of freeing the disk",
		fmt.Sprintf("%s after %s", last.outcome(), fmtDur(time.Since(freed))), back)
	after := do(ctx, loadClient, http.MethodPost, s.base+"/group-user/full", loadtest.UsersBody(8_999_999, 1), formType, 5*time.Second)
	r.notef("after freeing the disk: a POST got %s", after.outcome())
	return nil
}

// pipeUnread is how many bytes wait in the pipe that f reads; -1 when
// unknown.
func pipeUnread(f *os.File) int {
	var n int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); e != 0 {
		return -1
	}
	return int(n)
}

// fill writes path until the filesystem has no room left, and returns how
// much it wrote; anything but ENOSPC is an error.
func fill(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	// Large writes first, then small ones for the last partial blocks.
	for _, size := range []int{1 << 20, 4 << 10} {
		buf := make([]byte, size)
		for {
			m, err := f.Write(buf)
			n += int64(m)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				return n, fmt.Errorf("filling %s: %w", path, err)
			}
		}
	}
	// Delayed allocation may still hold blocks back; fsync makes them real
	// (and may itself report ENOSPC, which is what was asked for).
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		return n, fmt.Errorf("syncing %s: %w", path, err)
	}
	return n, nil
}

// startOnLoopFS mounts a loop filesystem of mib MiB and starts a service
// with its data directory there; the caller releases both.
func startOnLoopFS(ctx context.Context, h *harness, mib int64) (*loopFS, *service, error) {
	fs, err := mountLoopFS(ctx, mib)
	if err != nil {
		return nil, nil, err
	}
	s, err := startProbed(ctx, h.bin, serviceOptions{dataDir: filepath.Join(fs.mnt, "data")})
	if err != nil {
		fs.release()
		return nil, nil, err
	}
	return fs, s, nil
}
