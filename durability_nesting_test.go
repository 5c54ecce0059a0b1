package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sendNesting sends method to base+path with body, a form when form is
// set and JSON otherwise, and returns the status, 0 when no answer came.
func sendNesting(base, method, path, body string, form bool) int {
	if form {
		return statusOf(base, method, path, body, "application/x-www-form-urlencoded")
	}
	return statusOf(base, method, path, body, "application/json")
}

// groupsForm returns the form of a nesting write of groups, each a JSON
// element.
func groupsForm(groups ...string) string {
	return url.Values{"groups": {"[" + strings.Join(groups, ",") + "]"}}.Encode()
}

// subgroupsOf returns the ids of group's direct subgroups, in byte order;
// nil for none.
func subgroupsOf(t *testing.T, base, group string) []string {
	t.Helper()
	resp, err := client.Get(base + "/group-group/" + url.PathEscape(group))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var list []struct{ Group string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	var ids []string
	for _, g := range list {
		ids = append(ids, g.Group)
	}
	return ids
}

// TestCrashKeepsEveryAcknowledgedNesting kills the program with SIGKILL
// while writers nest groups (some with a TTL), replace and remove their
// subgroups, delete groups and nest in batches, and try nestings that
// make a cycle; and checks after each restart that every group whose
// writes were all acknowledged has exactly the subgroups they left, and
// that no refused nesting came back.
func TestCrashKeepsEveryAcknowledgedNesting(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills the program")
	}
	args := []string{"-data-dir", t.TempDir(), "-snapshot-bytes", "4096"}
	var mu sync.Mutex
	want := map[string][]string{} // parents whose every write was acknowledged
	var refused []string          // groups a refused nesting named as parent
	done := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(want)
	}
	step := func(base string, round, w, i int) bool {
		parent := fmt.Sprintf("r%d-w%d-%d", round, w, i)
		path := "/group-group/" + parent
		child := func(k int) string { return fmt.Sprintf("%s-c%d", parent, k) }
		final := []string{child(1), child(2)}
		ok := sendNesting(base, "POST", path, groupsForm(`"`+child(1)+`"`, `{"group":"`+child(2)+`","ttl":"1h"}`), true) == http.StatusOK
		if ok {
			final = []string{child(2), child(3)}
			ok = sendNesting(base, "PUT", path, groupsForm(`"`+child(2)+`"`, `"`+child(3)+`"`), true) == http.StatusOK
		}
		if ok {
			// A cycle: refused, and so never applied, then or on a
			// replay.
			status := sendNesting(base, "POST", "/group-group/"+child(3), groupsForm(`"`+parent+`"`), true)
			if status == http.StatusConflict {
				mu.Lock()
				refused = append(refused, child(3))
				mu.Unlock()
			}
			ok = status == http.StatusConflict
		}
		switch {
		case ok && i%3 == 0:
			ok = sendNesting(base, "DELETE", path, groupsForm(`"`+child(2)+`"`), true) == http.StatusOK
			final = final[1:]
		case ok && i%3 == 1:
			ok = sendNesting(base, "DELETE", "/groups/"+parent, "", false) == http.StatusOK
			final = nil
		case ok:
			batch := fmt.Sprintf(`{"changes":[{"op":"add","group":%q,"users":[%d]},{"op":"add_groups","group":%q,"groups":[%q]}]}`,
				child(4), i+1, parent, child(4))
			ok = sendNesting(base, "POST", "/batch", batch, false) == http.StatusOK
			final = append(final, child(4))
		}
		if !ok {
			return false // this group's state is unsure: stop here
		}
		mu.Lock()
		want[parent] = final
		mu.Unlock()
		return true
	}
	check := func(killed, p *process, round int) {
		assert.NotContains(t, killed.logs.String(), "snapshot failed", "round %d", round)
		assert.NotContains(t, killed.logs.String(), "does not read back", "round %d", round)
		mu.Lock()
		defer mu.Unlock()
		for _, parent := range slices.Sorted(maps.Keys(want)) {
			assert.Equal(t, want[parent], subgroupsOf(t, p.base, parent), "round %d, group %s", round, parent)
		}
		for _, group := range refused {
			assert.Empty(t, subgroupsOf(t, p.base, group), "round %d: the refused nesting in %s", round, group)
		}
	}
	p := killWhileWriting(t, args, 3, 4, 40, done, step, check)
	assert.Contains(t, p.logs.String(), "loaded snapshot", "the restarts must have loaded a snapshot too")
}

// A backup of the binary holds the groups in groups, their ends and the
// groups that have subgroups only: -restore writes a data directory on
// which every direct and transitive answer is what it was.
func TestBackupAndRestoreTheBinaryKeepNestings(t *testing.T) {
	p := startProcess(t, "-data-dir", t.TempDir())
	for _, w := range []struct{ method, path, body string }{
		{"POST", "/group-user/backend", `users=[1,[2,"Bo"]]`},
		{"POST", "/group-user/frontend", `users=[3]`},
		{"POST", "/group-group/engineering", groupsForm(`"backend"`, `{"group":"frontend","ttl":"1h"}`)},
		{"POST", "/group-group/all-staff", groupsForm(`"engineering"`)},
	} {
		require.Equal(t, http.StatusOK, sendNesting(p.base, w.method, w.path, w.body, true), "%s %s", w.method, w.path)
	}
	reads := []string{"/group-group/engineering", "/group-parents/engineering", "/group-group/all-staff?transitive=true",
		"/group-user/all-staff?transitive=true", "/group-user/all-staff/2?transitive=true", "/user-group/3?transitive=true", "/groups"}
	answers := func(base string) map[string]string {
		out := map[string]string{}
		for _, path := range reads {
			status, body := send(t, "GET", base+path, "")
			require.Equal(t, http.StatusOK, status, "%s: %s", path, body)
			out[path] = body
		}
		return out
	}
	want := answers(p.base)
	assert.Contains(t, want["/group-group/engineering"], `"expires"`, "a nesting that ends")
	assert.Contains(t, want["/groups"], `"subgroups":1`, "a group of subgroups only")

	resp, err := client.Get(p.base + "/backup")
	require.NoError(t, err)
	backup, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	file := filepath.Join(t.TempDir(), "membership.backup")
	require.NoError(t, os.WriteFile(file, backup, 0o600))
	restored := filepath.Join(t.TempDir(), "restored")
	cmd := exec.Command(os.Args[0], "-restore", file, "-data-dir", restored)
	cmd.Env = append(os.Environ(), "MEMBERSHIP_RUN_MAIN=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	q := startProcess(t, "-data-dir", restored)
	assert.Equal(t, want, answers(q.base))
}
