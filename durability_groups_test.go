package main

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCrashKeepsEveryAcknowledgedWholeGroupWrite kills the program with
// SIGKILL while writers replace groups, delete them and remove users from
// every group, and checks after each restart that every group whose writes
// were all acknowledged is exactly what they left.
func TestCrashKeepsEveryAcknowledgedWholeGroupWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills the program")
	}
	args := []string{"-data-dir", t.TempDir(), "-snapshot-bytes", "4096"}
	var mu sync.Mutex
	want := map[string][]int64{} // groups whose every write was acknowledged
	done := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(want)
	}
	const form = "application/x-www-form-urlencoded"
	acknowledged := func(base, method, path, body string) bool {
		return statusOf(base, method, path, body, form) == http.StatusOK
	}
	step := func(base string, round, w, i int) bool {
		first := int64(round)*10_000_000 + int64(w)*1_000_000 + int64(i)*10
		group := fmt.Sprintf("r%d-w%d-%d", round, w, i)
		path := "/group-user/" + group
		final := []int64{first + 1, first + 2, first + 3}
		ok := acknowledged(base, "PUT", path, usersForm(final...))
		if ok {
			final = []int64{first + 2, first + 4}
			ok = acknowledged(base, "PUT", path, usersForm(final...))
		}
		switch {
		case ok && i%3 == 0:
			ok = statusOf(base, "DELETE", "/groups/"+group, "", "") == http.StatusOK
			final = nil
		case ok && i%3 == 1:
			ok = statusOf(base, "DELETE", fmt.Sprint("/user-group/", first+4), "", "") == http.StatusOK
			final = final[:1]
		}
		if !ok {
			return false // this group's state is unsure: stop here
		}
		mu.Lock()
		want[group] = final
		mu.Unlock()
		return true
	}
	check := func(_, p *process, round int) {
		mu.Lock()
		defer mu.Unlock()
		for _, group := range slices.Sorted(maps.Keys(want)) {
			got := slices.Sorted(maps.Keys(members(t, p.base, group)))
			if len(got) == 0 {
				got = nil
			}
			assert.Equal(t, want[group], got, "round %d, group %s", round, group)
		}
	}
	p := killWhileWriting(t, args, 3, 4, 60, done, step, check)
	assert.Contains(t, p.logs.String(), "loaded snapshot", "the restarts must have loaded a snapshot too")
}
