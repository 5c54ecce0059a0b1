package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"example.com/groupmembership/bench/loadtest"
)

// state is the memberships a service holds: each group's size, and its
// members, drawn again on demand.
type state struct {
	sizes   []int32
	members func(g int) []int64
}

func (st state) memberships() int64 {
	var n int64
	for _, s := range st.sizes {
		n += int64(s)
	}
	return n
}

// smallState is the service of 1,000 memberships that the large one is
// compared with: 50 groups of 10 members (g0000000 to g0000049), made of
// 50 users each in 10 of them, so that a user's groups are as many as a
// typical user's of the large service, and a largest group of 500
// (g0000050). Uids are drawn from 1..users, as the large service's are.
func smallState(users int) state {
	uids := loadtest.RandomUIDs(rand.New(rand.NewPCG(seedMembers, 1<<40)), 550, int64(users))
	groups := make([][]int64, 51)
	for j, uid := range uids[:50] {
		for t := range 10 {
			g := (10*j + t) % 50
			groups[g] = append(groups[g], uid)
		}
	}
	groups[50] = uids[50:]
	sizes := make([]int32, len(groups))
	for g := range groups {
		slices.Sort(groups[g])
		sizes[g] = int32(len(groups[g]))
	}
	return state{sizes: sizes, members: func(g int) []int64 { return groups[g] }}
}

// picks is how many different requests of each kind a load run cycles
// through, on either service.
const picks = 1000

// kind is one of the requests measured, with the paths of the requests
// sent on either service.
type kind struct {
	name  string
	paths [2][]string // on the large service, and on the small one
}

// get10Paths returns picks GETs of groups of 10 members.
func get10Paths(st state, rng *rand.Rand) ([]string, error) {
	var tens []int
	for g, s := range st.sizes {
		if s == 10 {
			tens = append(tens, g)
		}
	}
	if len(tens) == 0 {
		return nil, fmt.Errorf("no group has 10 members")
	}
	paths := make([]string, picks)
	for i := range paths {
		paths[i] = "/group-user/" + groupID(tens[rng.IntN(len(tens))])
	}
	return paths, nil
}

// pagePaths returns picks GETs of a page of 100 members of the largest
// group, each after a random member with 100 or more after it.
func pagePaths(st state, rng *rand.Rand) ([]string, error) {
	largest := 0
	for g, s := range st.sizes {
		if s > st.sizes[largest] {
			largest = g
		}
	}
	uids := st.members(largest)
	if len(uids) <= 100 {
		return nil, fmt.Errorf("the largest group has %d members: a page of 100 needs more", len(uids))
	}
	paths := make([]string, picks)
	for i := range paths {
		after := uids[rng.IntN(len(uids)-100)]
		paths[i] = fmt.Sprintf("/group-user/%s?limit=100&after=%d", groupID(largest), after)
	}
	return paths, nil
}

// randomMemberships returns n random memberships (group, uid), drawing
// each group's members once.
func randomMemberships(st state, rng *rand.Rand, n int) [][2]int64 {
	ends := make([]int64, len(st.sizes)) // ends[g]: memberships in groups 0..g
	var total int64
	for g, s := range st.sizes {
		total += int64(s)
		ends[g] = total
	}
	byGroup := map[int][]int64{} // group: the positions of its picks
	for range n {
		r := rng.Int64N(total)
		g := sort.Search(len(ends), func(i int) bool { return ends[i] > r })
		byGroup[g] = append(byGroup[g], r-(ends[g]-int64(st.sizes[g])))
	}
	out := make([][2]int64, 0, n)
	for _, g := range slices.Sorted(maps.Keys(byGroup)) {
		uids := st.members(g)
		for _, pos := range byGroup[g] {
			out = append(out, [2]int64{int64(g), uids[pos]})
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// checkPaths returns picks GETs of /group-user/{group}/{uid} of random
// memberships: is the user a member? (200 with the member, here always.)
func checkPaths(st state, rng *rand.Rand) []string {
	var paths []string
	for _, m := range randomMemberships(st, rng, picks) {
		paths = append(paths, fmt.Sprintf("/group-user/%s/%d", groupID(int(m[0])), m[1]))
	}
	return paths
}

// userGroupsPaths returns picks GETs of /user-group/{uid} of users in
// exactly want groups, found by asking the service how many groups each
// candidate is in. When none is in want (a shrunk run), it takes users in
// any number of groups but none, and says so.
func userGroupsPaths(ctx context.Context, s *service, candidates []int64, want int) ([]string, error) {
	var exact, other []string
	for _, uid := range candidates {
		if len(exact) == picks {
			break
		}
		n, err := userGroupCount(ctx, s, uid)
		if err != nil {
			return nil, err
		}
		path := "/user-group/" + strconv.FormatInt(uid, 10)
		switch {
		case n == want:
			exact = append(exact, path)
		case n > 0:
			other = append(other, path)
		}
	}
	if len(exact) == 0 {
		fmt.Printf("  note: no user of the %s service is in exactly %d groups; /user-group asks for users in any number\n", s.name, want)
		exact = other
	}
	if len(exact) == 0 {
		return nil, fmt.Errorf("no user of the %s service is in any group", s.name)
	}
	paths := make([]string, picks)
	for i := range paths {
		paths[i] = exact[i%len(exact)]
	}
	return paths, nil
}

// userGroupCount returns how many groups uid is in: X-Total-Count.
func userGroupCount(ctx context.Context, s *service, uid int64) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/user-group/"+strconv.FormatInt(uid, 10)+"?limit=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /user-group/%d: %s", uid, resp.Status)
	}
	return strconv.Atoi(resp.Header.Get("X-Total-Count"))
}

// writeScript writes a wrk script that sends paths in turn, and returns
// its file name.
func writeScript(dir, name string, paths []string) (string, error) {
	var b strings.Builder
	b.WriteString("local paths = {\n")
	for _, p := range paths {
		fmt.Fprintf(&b, "  %q,\n", p)
	}
	b.WriteString("}\nlocal i = 0\nrequest = function()\n  i = i % #paths + 1\n  return wrk.format(nil, paths[i])\nend\n")
	file := filepath.Join(dir, name+".lua")
	return file, os.WriteFile(file, []byte(b.String()), 0o600)
}

// measure runs each kind of request against both services, rounds times,
// alternating, with wrk -t2 -c50, and returns each run's result: results
// [kind][0 large, 1 small][round].
func measure(ctx context.Context, dir string, kinds []kind, large, small *service, rounds int, d time.Duration) ([][2][]loadtest.Result, error) {
	w := loadtest.Load{Threads: 2, Connections: 50, Duration: d}
	results := make([][2][]loadtest.Result, len(kinds))
	for round := 1; round <= rounds; round++ {
		for k, kd := range kinds {
			for i, s := range []*service{large, small} {
				script, err := writeScript(dir, fmt.Sprintf("%s-%d", s.name, k), kd.paths[i])
				if err != nil {
					return nil, err
				}
				r, err := w.RunWrk(ctx, s.base+"/", script)
				if err != nil {
					return nil, fmt.Errorf("%s on the %s service: %w", kd.name, s.name, err)
				}
				fmt.Printf("  round %d  %-34s %-5s %9.0f req/s  p99 %s\n", round, kd.name, s.name, r.RPS, r.P99.Round(10*time.Microsecond))
				results[k][i] = append(results[k][i], r)
			}
		}
	}
	return results, nil
}
