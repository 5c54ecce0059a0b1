package main

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// acknowledged sends method to base+path with users as the form's users
// (none when nil), and reports whether the service acknowledged it.
func acknowledged(base, method, path string, users []int64) bool {
	var body io.Reader
	if users != nil {
		parts := make([]string, len(users))
		for i, uid := range users {
			parts[i] = fmt.Sprint(uid)
		}
		body = strings.NewReader(url.Values{"users": {"[" + strings.Join(parts, ",") + "]"}}.Encode())
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		return false
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err == nil && resp.StatusCode == http.StatusOK
}

// TestCrashKeepsEveryAcknowledgedWholeGroupWrite kills the program with
// SIGKILL while writers replace groups, delete them and remove users from
// every group, and checks after each restart that every group whose writes
// were all acknowledged is exactly what they left.
func TestCrashKeepsEveryAcknowledgedWholeGroupWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills the program")
	}
	dir := t.TempDir()
	args := []string{"-data-dir", dir, "-snapshot-bytes", "4096"}
	p := startProcess(t, args...)
	var mu sync.Mutex
	want := map[string][]int64{} // groups whose every write was acknowledged
	for round := range 3 {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int64(0); ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					base := int64(round)*10_000_000 + int64(w)*1_000_000 + i*10
					group := fmt.Sprintf("r%d-w%d-%d", round, w, i)
					path := "/group-user/" + group
					final := []int64{base + 1, base + 2, base + 3}
					ok := acknowledged(p.base, "PUT", path, final)
					if ok {
						final = []int64{base + 2, base + 4}
						ok = acknowledged(p.base, "PUT", path, final)
					}
					switch {
					case ok && i%3 == 0:
						ok = acknowledged(p.base, "DELETE", "/groups/"+group, nil)
						final = nil
					case ok && i%3 == 1:
						ok = acknowledged(p.base, "DELETE", fmt.Sprint("/user-group/", base+4), nil)
						final = final[:1]
					}
					if !ok {
						return // this group's state is unsure: stop here
					}
					mu.Lock()
					want[group] = final
					mu.Unlock()
				}
			}()
		}
		// Kill after a number of groups are done: progress, not time,
		// decides.
		target := (round + 1) * 60
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(want) >= target
		}, 60*time.Second, time.Millisecond, "the writers got too little acknowledged")
		if round == 2 {
			// The last restart must load a snapshot holding these writes:
			// wait for one to be written (a progress, not a time).
			require.Eventually(t, func() bool { return strings.Contains(p.logs.String(), "wrote a snapshot") },
				60*time.Second, time.Millisecond, "no snapshot was written")
		}
		require.NoError(t, p.cmd.Process.Kill())
		_ = p.cmd.Wait()
		close(stop)
		wg.Wait()

		p = startProcess(t, args...)
		mu.Lock()
		for _, group := range slices.Sorted(maps.Keys(want)) {
			got := slices.Sorted(maps.Keys(members(t, p.base, group)))
			if len(got) == 0 {
				got = nil
			}
			assert.Equal(t, want[group], got, "round %d, group %s", round, group)
		}
		mu.Unlock()
	}
	assert.Contains(t, p.logs.String(), "loaded snapshot", "the restarts must have loaded a snapshot too")
}
