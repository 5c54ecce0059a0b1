package main

import (
	"fmt"
	"strings"
	"time"

	"example.com/groupmembership/bench/loadtest"
)

// report is what a run measured.
type report struct {
	memberships int64
	groups      int

	rssEmpty, rssLoaded, peakLoaded int64
	rssSettled                      int64   // after -settle idle
	keysBytes                       float64 // the Idempotency-Keys of the loading, by /metrics
	load                            loaded
	snapshots, lastSnapshot         float64 // written during the loading; the last one's seconds
	stop                            time.Duration
	files                           []file

	restart                     time.Duration
	snapshotLoad, replay        time.Duration // the restart's phases, by its log's times
	rssRestarted, peakRestarted int64

	kinds   []kind
	results [][2][]loadtest.Result
	profile string
}

// bytesPerMembership is the growth of the RSS per membership, from the
// empty service to the loaded one once idle for -settle: what holding the
// memberships costs, without the garbage of loading them.
func (r *report) bytesPerMembership() float64 {
	return perMembership(r.rssSettled-r.rssEmpty, r.memberships)
}

func perMembership(n, memberships int64) float64 { return float64(n) / float64(memberships) }

// snapshotsWritten says how many snapshots the loading wrote, and how long
// the last one took, when there was one.
func (r *report) snapshotsWritten() string {
	if r.snapshots == 0 {
		return "no snapshot written"
	}
	return fmt.Sprintf("%.0f snapshots written, the last in %.1f s", r.snapshots, r.lastSnapshot)
}

func (r *report) print() {
	fmt.Println()
	fmt.Println("| Large service | |")
	fmt.Println("|---|---|")
	fmt.Printf("| memberships, groups | %d, %d |\n", r.memberships, r.groups)
	fmt.Printf("| load (POST /batch, %d requests) | %s, %.2f M memberships/s |\n", r.load.requests, r.load.took.Round(100*time.Millisecond), float64(r.memberships)/r.load.took.Seconds()/1e6)
	fmt.Printf("| load: the slowest request; sent again after a 503, a 409; replayed | %s; %d, %d; %d |\n",
		r.load.slowest.Round(time.Millisecond), r.load.unavailable, r.load.inFlight, r.load.replayed)
	fmt.Printf("| RSS: empty; loaded (peak while loading); then idle for -settle | %s; %s (%s); %s |\n", loadtest.MiB(r.rssEmpty), loadtest.MiB(r.rssLoaded), loadtest.MiB(r.peakLoaded), loadtest.MiB(r.rssSettled))
	fmt.Printf("| RSS growth per membership: loaded (peak); idle | %.2f B (%.2f B); %.2f B |\n", perMembership(r.rssLoaded-r.rssEmpty, r.memberships),
		perMembership(r.peakLoaded-r.rssEmpty, r.memberships), r.bytesPerMembership())
	fmt.Printf("| of it, the loading's Idempotency-Keys (/metrics); the growth without them, idle | %s, %.2f B a membership; %.2f B |\n",
		loadtest.MiB(int64(r.keysBytes)), r.keysBytes/float64(r.memberships), r.bytesPerMembership()-r.keysBytes/float64(r.memberships))
	fmt.Printf("| snapshots written while loading | %s |\n", r.snapshotsWritten())
	fmt.Printf("| stop (SIGTERM to exit) | %s |\n", r.stop.Round(time.Millisecond))
	var total int64
	for _, f := range sortedFiles(r.files) {
		if strings.HasSuffix(f.name, ".snap") || strings.HasSuffix(f.name, ".wal") {
			fmt.Printf("| %s | %s (%.2f B a membership) |\n", f.name, loadtest.MiB(f.onDisk), float64(f.onDisk)/float64(r.memberships))
		}
		total += f.onDisk
	}
	fmt.Printf("| the data directory on disk | %s |\n", loadtest.MiB(total))
	fmt.Printf("| restart: process start to /readyz 200 (of which, by the service's log: the snapshot read and loaded; the log after it replayed) | %s (%s; %s) |\n",
		r.restart.Round(time.Millisecond), r.snapshotLoad, r.replay)
	fmt.Printf("| RSS after the restart (peak) | %s (%s) |\n", loadtest.MiB(r.rssRestarted), loadtest.MiB(r.peakRestarted))

	fmt.Println()
	fmt.Println("| Request, wrk -t2 -c50 (medians) | large | 1,000 memberships | large ÷ small | each round's |")
	fmt.Println("|---|---|---|---|---|")
	ratios := make([]float64, len(r.kinds))
	for k, kd := range r.kinds {
		l, s := loadtest.Median(r.results[k][0]), loadtest.Median(r.results[k][1])
		ratios[k] = l.RPS / s.RPS
		var rounds []string
		for i := range r.results[k][0] {
			rounds = append(rounds, fmt.Sprintf("%.2f", r.results[k][0][i].RPS/r.results[k][1][i].RPS))
		}
		fmt.Printf("| %s | %.0f req/s, p99 %s | %.0f req/s, p99 %s | %.2f | %s |\n", kd.name, l.RPS, l.P99.Round(10*time.Microsecond),
			s.RPS, s.P99.Round(10*time.Microsecond), ratios[k], strings.Join(rounds, ", "))
	}
	if r.profile != "" {
		fmt.Println()
		fmt.Print(r.profile)
	}

	fmt.Printf("\ntargets:\n")
	verdict := func(met bool) string {
		if met {
			return "met"
		}
		return "NOT met"
	}
	fmt.Printf("  %-44s %6.2f B, want <= %d: %s\n", "RSS growth per membership, feed off, idle", r.bytesPerMembership(), targetBytesPerMembership,
		verdict(r.bytesPerMembership() <= targetBytesPerMembership))
	restart := verdict(r.restart <= targetRestart)
	if r.snapshots == 0 {
		// A run too small to fill -snapshot-bytes of log replays the log.
		restart = "not measured: no snapshot was written (the restart replayed the log)"
	}
	fmt.Printf("  %-44s %6.2f s, want <= %.0f: %s\n", "restart from the snapshot to /readyz 200", r.restart.Seconds(), targetRestart.Seconds(), restart)
	for k, kd := range r.kinds {
		fmt.Printf("  %-44s %6.2f, want >= %.2f: %s\n", kd.name+", large / small", ratios[k], targetRatio, verdict(ratios[k] >= targetRatio))
	}
}
