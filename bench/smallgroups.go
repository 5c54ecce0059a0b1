package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"example.com/groupmembership/bench/loadtest"
)

// The small-groups rows: what a small group costs. Each shape of groups is
// loaded by POST /batch into a service of its own with -changes-keep 0 (its
// two indexes alone, as the other memory rows), and into Redis as one set a
// group (SADD, in a database of its own, emptied after), from the same
// random draw: users 1 to 100,000, distinct within a group. The service's
// RSS is read once it has given its free memory back (a collection, then
// every free page returned: its log says so), the bytes a membership being
// the growth over its RSS empty; Redis's is its used_memory growth.

// smallShapes are the shapes loaded: many groups of a few members.
var smallShapes = []struct{ groups, size int }{{100_000, 10}, {1_000_000, 3}}

// smallUsers is the users the members are drawn from.
const smallUsers = 100_000

// smallTargets are the goals of the small-groups rows: at most maxBytes a
// membership, and at most maxRatio times Redis's group sets (0: none).
var smallTargets = map[int]struct{ maxBytes, maxRatio float64 }{10: {24, 2}, 3: {40, 0}}

// releaseLine is what the service logs when it gives its free memory back
// (internal/server's releaser).
const releaseLine = "gave the free memory back"

// releaseWait is how long a loaded service is given to release: 30 s idle
// and its 5 s tick (internal/memrelease), with room for a busy machine.
const releaseWait = 3 * time.Minute

// smallMemory is what measureSmallGroups found for one shape.
type smallMemory struct {
	groups, size int
	// service and before (with -before) are the RSS growth a membership;
	// released is false when the service logged no release within
	// releaseWait (its RSS is then as it was).
	service, before float64
	released        bool
	beforeReleased  bool
	redis           float64 // used_memory growth a membership
	loadTime        time.Duration
}

// smallGroups returns the groups of one shape, drawn with a seed of their
// own, so that every run and every store loads the same.
func smallGroups(groups, size int) [][]int64 {
	rng := rand.New(rand.NewPCG(uint64(groups), uint64(size)))
	out := make([][]int64, groups)
	for g := range out {
		out[g] = loadtest.RandomUIDs(rng, size, smallUsers)
	}
	return out
}

// measureSmallGroups measures each shape in the service (and, with
// -before, in the earlier build) and in Redis.
func (h *harness) measureSmallGroups() ([]smallMemory, error) {
	var out []smallMemory
	for _, shape := range smallShapes {
		groups := smallGroups(shape.groups, shape.size)
		total := float64(shape.groups * shape.size)
		m := smallMemory{groups: shape.groups, size: shape.size}
		name := fmt.Sprintf("service-small-%d", shape.size)
		r, err := h.loadSmall(h.svcBin, name, groups)
		if err != nil {
			return nil, err
		}
		m.service, m.released, m.loadTime = float64(r.growth())/total, r.released, r.load
		if h.opts.before != "" {
			b, err := h.loadSmall(h.opts.before, "before-"+name, groups)
			if err != nil {
				return nil, fmt.Errorf("-before: %w", err)
			}
			m.before, m.beforeReleased = float64(b.growth())/total, b.released
		}
		growth, err := h.redisSmall(groups)
		if err != nil {
			return nil, err
		}
		m.redis = float64(growth) / total
		out = append(out, m)
	}
	return out, nil
}

// smallLoad is one service's RSS for one shape.
type smallLoad struct {
	empty, loaded int64
	released      bool
	load          time.Duration
}

func (r smallLoad) growth() int64 { return r.loaded - r.empty }

// loadSmall starts bin as a service of its own with -changes-keep 0, loads
// groups into it ("s0", "s1", ...), waits for it to give its free memory
// back, and returns its RSS empty and then.
func (h *harness) loadSmall(bin, name string, groups [][]int64) (smallLoad, error) {
	addr, pid, stop, err := loadtest.StartService(bin, h.tmp, name, h.opts.serviceArgs+" -changes-keep 0")
	if err != nil {
		return smallLoad{}, err
	}
	defer stop()
	var r smallLoad
	if r.empty, err = loadtest.RSS(pid); err != nil {
		return r, err
	}
	logPath := filepath.Join(h.tmp, name+".log")
	start := time.Now()
	b := &batcher{url: "http://" + addr}
	for g, uids := range groups {
		if err := b.add(batchChange{Op: "add", Group: "s" + strconv.Itoa(g), Users: uids}); err != nil {
			return r, err
		}
	}
	if err := b.flush(); err != nil {
		return r, err
	}
	r.load = time.Since(start)
	seen, err := countInFile(logPath, releaseLine)
	if err != nil {
		return r, err
	}
	fmt.Printf("  small groups: %d groups of %d loaded into %s in %s; waiting up to %s for it to give its free memory back\n",
		len(groups), len(groups[0]), name, r.load.Round(time.Millisecond), releaseWait)
	for deadline := time.Now().Add(releaseWait); time.Now().Before(deadline); time.Sleep(time.Second) {
		n, err := countInFile(logPath, releaseLine)
		if err != nil {
			return r, err
		}
		if n > seen {
			r.released = true
			break
		}
	}
	if !r.released {
		fmt.Printf("  note: %s logged no release within %s: its RSS is read as it is\n", name, releaseWait)
	}
	if r.loaded, err = loadtest.RSS(pid); err != nil {
		return r, err
	}
	fmt.Printf("  small groups: %s RSS %d -> %d bytes\n", name, r.empty, r.loaded)
	return r, nil
}

// countInFile returns how many lines of the file at path hold s.
func countInFile(path, s string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strings.Count(string(b), s), nil
}

// redisSmall loads groups into Redis's database 1, one set a group, and
// returns its used_memory growth; it empties the database after.
func (h *harness) redisSmall(groups [][]int64) (int64, error) {
	if _, err := h.rc.do("SELECT", "1"); err != nil {
		return 0, err
	}
	defer func() { _, _ = h.rc.do("SELECT", "0") }()
	before, err := h.rc.usedMemory()
	if err != nil {
		return 0, err
	}
	cmds := make([][]string, 0, len(groups))
	for g, uids := range groups {
		cmd := []string{"SADD", "s" + strconv.Itoa(g)}
		for _, uid := range uids {
			cmd = append(cmd, strconv.FormatInt(uid, 10))
		}
		cmds = append(cmds, cmd)
	}
	if err := h.rc.pipeline(cmds); err != nil {
		return 0, err
	}
	after, err := h.rc.usedMemory()
	if err != nil {
		return 0, err
	}
	if _, err := h.rc.do("FLUSHDB"); err != nil {
		return 0, err
	}
	return after - before, nil
}

// printSmall prints the small-groups rows.
func printSmall(ms []smallMemory, before bool) {
	fmt.Printf("\nsmall groups, users 1 to %d, growth a membership (service: RSS once it gave its free memory back, -changes-keep 0; redis: used_memory, group sets):\n", smallUsers)
	for _, m := range ms {
		note := ""
		if !m.released {
			note = " (no release seen: RSS as it was)"
		}
		fmt.Printf("  %d groups of %d: service %.1f B%s, redis %.1f B: service / redis %.2f; loaded in %s\n",
			m.groups, m.size, m.service, note, m.redis, m.service/m.redis, m.loadTime.Round(time.Millisecond))
		if before {
			note = ""
			if !m.beforeReleased {
				note = " (no release seen)"
			}
			fmt.Printf("  %d groups of %d: before %.1f B%s: this build / before %.2f\n", m.groups, m.size, m.before, note, m.service/m.before)
		}
	}
}

// smallVerdicts prints the small-groups targets, each as met or NOT met,
// and returns how many were stated and met.
func smallVerdicts(ms []smallMemory) (stated, met int) {
	verdict := func(what string, got, want float64) {
		v := "met"
		if got > want {
			v = "NOT met"
		} else {
			met++
		}
		stated++
		fmt.Printf("  %-48s %6.2f, want <= %.2f: %s\n", what, got, want, v)
	}
	for _, m := range ms {
		t := smallTargets[m.size]
		verdict(fmt.Sprintf("groups of %d: service bytes a membership", m.size), m.service, t.maxBytes)
		if t.maxRatio > 0 {
			verdict(fmt.Sprintf("groups of %d: service bytes / redis bytes", m.size), m.service/m.redis, t.maxRatio)
		}
	}
	return stated, met
}
