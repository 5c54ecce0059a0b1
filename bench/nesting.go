package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"example.com/groupmembership/bench/loadtest"
)

// The nesting rows: a service of its own (default flags) holds three shapes
// of groups in groups, loaded by POST /batch, and each transitive request is
// loaded beside its direct counterpart on the same service in the same round.
//
//   - check: chk-0 holds chk-1, which holds chk-2, ... down to chk-8 (8
//     nestings), and user 1 is in chk-8; each of chk-1 to chk-8 also holds
//     1,249 groups of one user, so 10,000 groups are below chk-0. The checks
//     are POST /check of user 1 in chk-0 with "transitive":true and in chk-8
//     without, and the member records GET /group-user/chk-0/1?transitive=true
//     (with its via) and GET /group-user/chk-8/1.
//   - page: pg holds pg-0000 to pg-0999, and pg-i holds the 1,000 users
//     i+1, i+1001, ... (1,000,000 distinct users, interleaved), and flat
//     holds the same users directly. The pages are of 100 users after uid
//     500,000: of pg transitively, and of flat.
//   - add: n1 to n1000 are each in the 100 groups anc-001 to anc-100 (the
//     service's default -max-depth of 32 allows no chain of 100); POST 3
//     random users to one of them, against the same POST to g1 to g1000,
//     which are in no group.
const (
	nestCheckLevels  = 8
	nestCheckBelow   = 10000
	nestPageGroups   = 1000
	nestPageEach     = 1000
	nestAncestors    = 100
	nestAddGroups    = 1000
	nestPageAfter    = 500000
	nestBatchChanges = 1000   // the service's -max-batch
	nestBatchItems   = 100000 // the -max-users loadtest.StartService gives
)

// batchChange is one change of a POST /batch.
type batchChange struct {
	Op     string   `json:"op"`
	Group  string   `json:"group"`
	Users  []int64  `json:"users,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// batcher sends changes to a service's /batch, as many in one request as
// its limits allow.
type batcher struct {
	url     string
	pending []batchChange
	items   int
	sent    int // requests sent
}

func (b *batcher) add(c batchChange) error {
	n := len(c.Users) + len(c.Groups)
	if len(b.pending) == nestBatchChanges || b.items+n > nestBatchItems {
		if err := b.flush(); err != nil {
			return err
		}
	}
	b.pending = append(b.pending, c)
	b.items += n
	return nil
}

func (b *batcher) flush() error {
	if len(b.pending) == 0 {
		return nil
	}
	body, err := json.Marshal(map[string]any{"changes": b.pending})
	if err != nil {
		return err
	}
	resp, err := http.Post(b.url+"/batch", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /batch of %d changes: %s %s", len(b.pending), resp.Status, reply)
	}
	b.pending, b.items = b.pending[:0], 0
	b.sent++
	return nil
}

// startNesting starts the service the nesting rows load and loads their
// groups, users and nestings into it.
func (h *harness) startNesting() error {
	addr, _, stop, err := loadtest.StartService(h.svcBin, h.tmp, "service-nesting", h.opts.serviceArgs)
	if err != nil {
		return err
	}
	h.stops = append(h.stops, stop)
	h.nestAddr = addr
	start := time.Now()
	b := &batcher{url: "http://" + addr}
	// Members before nestings, so that every nested group exists.
	if err := addNestingMembers(b); err != nil {
		return err
	}
	if err := addNestings(b); err != nil {
		return err
	}
	if err := b.flush(); err != nil {
		return err
	}
	svcURL := "http://" + addr
	if err := h.checkNestingRows(svcURL); err != nil {
		return err
	}
	fmt.Printf("  nesting: loaded the nesting rows' groups by %d POST /batch in %s\n", b.sent, time.Since(start).Round(time.Millisecond))
	return h.writeNestingScripts(svcURL)
}

// addNestingMembers adds the members of the nesting rows' groups: of the
// chk- groups, the pg- groups and flat.
func addNestingMembers(b *batcher) error {
	uid := int64(1000)
	for level := 1; level <= nestCheckLevels; level++ {
		for j := 0; j < nestCheckBelow/nestCheckLevels-1; j++ {
			uid++
			if err := b.add(batchChange{Op: "add", Group: fmt.Sprintf("chk-%d-%d", level, j), Users: []int64{uid}}); err != nil {
				return err
			}
		}
	}
	if err := b.add(batchChange{Op: "add", Group: fmt.Sprintf("chk-%d", nestCheckLevels), Users: []int64{1}}); err != nil {
		return err
	}
	for i := 0; i < nestPageGroups; i++ {
		users := make([]int64, nestPageEach)
		for k := range users {
			users[k] = int64(i + 1 + k*nestPageGroups)
		}
		if err := b.add(batchChange{Op: "add", Group: fmt.Sprintf("pg-%04d", i), Users: users}); err != nil {
			return err
		}
	}
	// flat holds the same million directly, in adds of 10,000.
	for first := 1; first <= nestPageGroups*nestPageEach; first += 10000 {
		users := make([]int64, 10000)
		for k := range users {
			users[k] = int64(first + k)
		}
		if err := b.add(batchChange{Op: "add", Group: "flat", Users: users}); err != nil {
			return err
		}
	}
	return nil
}

// addNestings nests the nesting rows' groups: the chk- chain, pg and the
// ancestors of the n groups.
func addNestings(b *batcher) error {
	// chk-8, at the bottom, holds its 1,249 groups of one user alone.
	for level := 0; level <= nestCheckLevels; level++ {
		var groups []string
		if level < nestCheckLevels {
			groups = append(groups, fmt.Sprintf("chk-%d", level+1))
		}
		for j := 0; level > 0 && j < nestCheckBelow/nestCheckLevels-1; j++ {
			groups = append(groups, fmt.Sprintf("chk-%d-%d", level, j))
		}
		if err := b.add(batchChange{Op: "add_groups", Group: fmt.Sprintf("chk-%d", level), Groups: groups}); err != nil {
			return err
		}
	}
	var pages []string
	for i := 0; i < nestPageGroups; i++ {
		pages = append(pages, fmt.Sprintf("pg-%04d", i))
	}
	if err := b.add(batchChange{Op: "add_groups", Group: "pg", Groups: pages}); err != nil {
		return err
	}
	var adds []string
	for i := 1; i <= nestAddGroups; i++ {
		adds = append(adds, fmt.Sprintf("n%d", i))
	}
	for a := 1; a <= nestAncestors; a++ {
		if err := b.add(batchChange{Op: "add_groups", Group: fmt.Sprintf("anc-%03d", a), Groups: adds}); err != nil {
			return err
		}
	}
	return nil
}

// checkNestingRows checks that what the rows read is there, as the rows
// expect it.
func (h *harness) checkNestingRows(svcURL string) error {
	for _, path := range []string{"/group-user/chk-0/1?transitive=true", "/group-user/chk-8/1", h.nestPagePath(true), h.nestPagePath(false)} {
		if _, err := loadtest.Get(context.Background(), http.DefaultClient, svcURL+path); err != nil {
			return fmt.Errorf("the nesting rows' service: %w", err)
		}
	}
	body, err := loadtest.Get(context.Background(), http.DefaultClient, svcURL+"/group-parents/n1?transitive=true&limit=1000")
	if err != nil {
		return err
	}
	var parents []struct{ Group string }
	if err := json.Unmarshal(body, &parents); err != nil || len(parents) != nestAncestors {
		return fmt.Errorf("n1 has %d ancestors, want %d (%v)", len(parents), nestAncestors, err)
	}
	return nil
}

// writeNestingScripts writes the wrk scripts of the nesting rows' POSTs
// and checks, each check once answered true.
func (h *harness) writeNestingScripts(svcURL string) error {
	h.nestLua = filepath.Join(h.tmp, "post-nested.lua")
	if err := os.WriteFile(h.nestLua, bytes.Replace(loadtest.PostLua, []byte(`"/group-user/g"`), []byte(`"/group-user/n"`), 1), 0o644); err != nil {
		return err
	}
	for _, c := range []struct {
		path *string
		body string
	}{
		{&h.nestCheckLua, fmt.Sprintf(`{"checks":[{"group":"chk-%d","uid":1}]}`, nestCheckLevels)},
		{&h.nestCheckTransitiveLua, `{"checks":[{"group":"chk-0","uid":1}],"transitive":true}`},
	} {
		reply, err := postJSON(svcURL+"/check", c.body)
		if err != nil || string(reply) != `{"results":[true]}` {
			return fmt.Errorf("POST /check %s: %q, want true (%v)", c.body, reply, err)
		}
		f, err := os.CreateTemp(h.tmp, "check-*.lua")
		if err != nil {
			return err
		}
		*c.path = f.Name()
		_, err = fmt.Fprintf(f, "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.body = '%s'\n", c.body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// postJSON posts body to url and returns the reply, an error unless 200.
func postJSON(url, body string) ([]byte, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("POST %s: %s %s", url, resp.Status, reply)
	}
	return bytes.TrimSpace(reply), err
}

func (h *harness) nestPagePath(transitive bool) string {
	if transitive {
		return fmt.Sprintf("/group-user/pg?transitive=true&limit=100&after=%d", nestPageAfter)
	}
	return fmt.Sprintf("/group-user/flat?limit=100&after=%d", nestPageAfter)
}

// nestScenarios are the nesting rows in pairs, each direct row right
// before its transitive one in odd rounds and right after it in even ones,
// so that neither always follows the same row (a transitive page leaves
// garbage for the next row's collections).
func (h *harness) nestScenarios(wrk func(url, script string) func() (loadtest.Result, error)) []scenario {
	if h.nestAddr == "" {
		return nil
	}
	u := "http://" + h.nestAddr
	rows := []scenario{
		{"nest check direct", wrk(u+"/check", h.nestCheckLua)},
		{"nest check 8 levels", wrk(u+"/check", h.nestCheckTransitiveLua)},
		{"nest member direct", wrk(u+"/group-user/chk-8/1", "")},
		{"nest member 8 levels", wrk(u+"/group-user/chk-0/1?transitive=true", "")},
		{"nest page direct", wrk(u+h.nestPagePath(false), "")},
		{"nest page transitive", wrk(u+h.nestPagePath(true), "")},
		{"nest POST 3 no nesting", wrk(u, h.luaPath)},
		{"nest POST 3 ancestors", wrk(u, h.nestLua)},
	}
	if h.round%2 == 0 {
		for i := 0; i+1 < len(rows); i += 2 {
			rows[i], rows[i+1] = rows[i+1], rows[i]
		}
	}
	return rows
}

// nestTargets are the nesting goals: a transitive request's cost (the
// direct row's req/s over its own) at most want times the direct one's.
var nestTargets = []struct {
	what, direct, nested string
	want                 float64
}{
	{"POST /check 8 levels / direct (cost)", "nest check direct", "nest check 8 levels", 2},
	{"GET member 8 levels, via / direct (cost)", "nest member direct", "nest member 8 levels", 2},
	{"transitive page / direct page (cost)", "nest page direct", "nest page transitive", 5},
	{"POST 3, 100 ancestors / none (cost)", "nest POST 3 no nesting", "nest POST 3 ancestors", 1.1},
}

// nestRowsRun says whether -only (nil: every row) selects a nesting row,
// so that a run without them loads no service for them.
func nestRowsRun(only *regexp.Regexp) bool {
	for _, t := range nestTargets {
		if only == nil || only.MatchString(t.direct) || only.MatchString(t.nested) {
			return true
		}
	}
	return false
}

// nestMemory is what measureNestMemory found.
type nestMemory struct {
	groups, edges, leaves  int
	users                  int
	empty, nested, settled int64 // RSS: empty, with the nestings, with the users too
	loadEdges, loadUsers   time.Duration
}

// measureNestMemory loads, into a service of its own with -changes-keep 0
// (its indexes alone, as the other RSS figures), a tree of fan-out 10 five
// nestings deep: one root, 10, 100, 1,000, 10,000 groups, and 100,000
// leaves of 10 distinct users each (1,000,000 users). The nestings go
// first, into an empty service: their RSS growth over the edges is the
// bytes an edge costs; then the users, whose every group above has them
// as transitive members. Each RSS is read after settle idle.
func (h *harness) measureNestMemory(settle time.Duration) (nestMemory, error) {
	addr, pid, stop, err := loadtest.StartService(h.svcBin, h.tmp, "service-nest-memory", h.opts.serviceArgs+" -changes-keep 0")
	if err != nil {
		return nestMemory{}, err
	}
	defer stop()
	var m nestMemory
	rss := func() (int64, error) {
		time.Sleep(settle)
		return loadtest.RSS(pid)
	}
	if m.empty, err = rss(); err != nil {
		return m, err
	}
	b := &batcher{url: "http://" + addr}
	name := func(level, i int) string { return fmt.Sprintf("t%d-%d", level, i) }
	start := time.Now()
	width := 1
	for level := 0; level < 5; level++ {
		for i := 0; i < width; i++ {
			children := make([]string, 10)
			for c := range children {
				children[c] = name(level+1, i*10+c)
			}
			if err := b.add(batchChange{Op: "add_groups", Group: name(level, i), Groups: children}); err != nil {
				return m, err
			}
			m.edges += 10
		}
		m.groups += width
		width *= 10
	}
	m.groups += width
	m.leaves = width
	if err := b.flush(); err != nil {
		return m, err
	}
	m.loadEdges = time.Since(start)
	if m.nested, err = rss(); err != nil {
		return m, err
	}
	start = time.Now()
	for i := 0; i < width; i++ {
		users := make([]int64, 10)
		for k := range users {
			users[k] = int64(i*10 + k + 1)
		}
		if err := b.add(batchChange{Op: "add", Group: name(5, i), Users: users}); err != nil {
			return m, err
		}
		m.users += 10
	}
	if err := b.flush(); err != nil {
		return m, err
	}
	m.loadUsers = time.Since(start)
	// The root's transitive count proves the tree is whole.
	resp, err := http.Get("http://" + addr + "/group-user/" + name(0, 0) + "?transitive=true&limit=1")
	if err != nil {
		return m, err
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Total-Count"); got != fmt.Sprint(m.users) {
		return m, fmt.Errorf("the tree's root has %s transitive members, want %d", got, m.users)
	}
	if m.settled, err = rss(); err != nil {
		return m, err
	}
	return m, nil
}

func (m nestMemory) print() {
	const mib = 1 << 20
	fmt.Printf("\nnesting memory, -changes-keep 0, a tree of fan-out 10 five nestings deep: %d groups, %d nesting edges, %d users in the %d leaves:\n",
		m.groups, m.edges, m.users, m.leaves)
	fmt.Printf("  RSS empty %.1f MiB; with the nestings %.1f MiB (%s to load); with the users too %.1f MiB (%s to load)\n",
		float64(m.empty)/mib, float64(m.nested)/mib, m.loadEdges.Round(time.Millisecond), float64(m.settled)/mib, m.loadUsers.Round(time.Millisecond))
	fmt.Printf("  bytes a nesting edge (RSS growth of the nestings / edges): %.1f B\n", float64(m.nested-m.empty)/float64(m.edges))
	fmt.Printf("  RSS growth of the users: %.1f B a user\n", float64(m.settled-m.nested)/float64(m.users))
}
