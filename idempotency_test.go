package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyedAddRequest is the request these tests retry: an add of two users to g, by
// user 42, with the Idempotency-Key key. Applied to an empty g, its reply
// is 2, and a repeat applied again would add only what is missing since.
func keyedAddRequest(t *testing.T, base, key string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/group-user/g", strings.NewReader(`users=[1,[2,"Bo"]]&uid=42`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Idempotency-Key", key)
	return req
}

// writeReply is what a client gets of a write.
type writeReply struct {
	status int
	body   string
	header http.Header
}

// sendOnANewConnection sends req on a connection of its own, and returns
// the reply.
func sendOnANewConnection(t *testing.T, req *http.Request) writeReply {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return writeReply{status: resp.StatusCode, body: string(body), header: resp.Header}
}

// assertReplay asserts that retry is a replay of first: the same status,
// body, X-Revision and other headers but the date and the request's id,
// with Idempotent-Replayed: true.
func assertReplay(t *testing.T, first, retry writeReply) {
	t.Helper()
	assert.Equal(t, first.status, retry.status, "the status of the first reply")
	assert.Equal(t, first.body, retry.body, "the body of the first reply")
	assert.Equal(t, first.header.Get("X-Revision"), retry.header.Get("X-Revision"), "the X-Revision of the first reply")
	assert.Equal(t, []string{"true"}, retry.header.Values("Idempotent-Replayed"), "a replay says so")
	own := func(h http.Header) http.Header {
		h = h.Clone()
		for _, name := range []string{"Date", "X-Request-Id", "Idempotent-Replayed"} {
			h.Del(name)
		}
		return h
	}
	assert.Equal(t, own(first.header), own(retry.header), "the headers of the first reply")
}

// feed returns the changes after after, waiting for one if there is none
// yet.
func feed(t *testing.T, base string, after int) []map[string]any {
	t.Helper()
	status, body := send(t, "GET", base+"/changes?wait=30s&after="+strconv.Itoa(after), "")
	require.Equal(t, http.StatusOK, status, body)
	var changes []map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &changes))
	return changes
}

// A client that loses its connection after sending a keyed write, before
// any of the reply, sends it again on a new connection: the retry is a
// replay of the first, which was applied, with the first's reply.
func TestARetryAfterALostConnectionIsAReplay(t *testing.T) {
	p := startProcess(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.base, "http://"))
	require.NoError(t, err)
	require.NoError(t, keyedAddRequest(t, p.base, "lost-1").Write(conn))
	require.NoError(t, conn.Close(), "closed before a byte of the reply is read")

	// The first is applied though its client went away: the feed shows it
	// (and waits for it). Its reply, lost, was 200 with 2 (two users
	// added to an empty group) and X-Revision 1.
	changes := feed(t, p.base, 0)
	require.Len(t, changes, 1)
	assert.Equal(t, 1.0, changes[0]["rev"])
	assert.Equal(t, "add", changes[0]["op"])
	assert.Equal(t, []any{1.0, 2.0}, changes[0]["uids"])
	// Another client's change: applying the first again would undo it.
	require.True(t, change(p.base, "DELETE", "g", 1))

	retry := sendOnANewConnection(t, keyedAddRequest(t, p.base, "lost-1"))
	assert.Equal(t, http.StatusOK, retry.status)
	assert.Equal(t, `2`, retry.body)
	assert.Equal(t, "1", retry.header.Get("X-Revision"))
	assert.Equal(t, "true", retry.header.Get("Idempotent-Replayed"))
	assert.Equal(t, map[int64]bool{2: true}, members(t, p.base, "g"), "nothing applied again")
	assertReplay(t, retry, sendOnANewConnection(t, keyedAddRequest(t, p.base, "lost-1")))
	assert.Len(t, feed(t, p.base, 0), 2, "no change but the first and the other client's")

	other := keyedAddRequest(t, p.base, "lost-1")
	other.Body = io.NopCloser(strings.NewReader(`users=[3]`))
	other.ContentLength = int64(len(`users=[3]`))
	reused := sendOnANewConnection(t, other)
	assert.Equal(t, http.StatusUnprocessableEntity, reused.status, reused.body)
	assert.Contains(t, reused.body, `"code":"idempotency_key_reused"`)
	assert.Equal(t, map[int64]bool{2: true}, members(t, p.base, "g"), "nothing applied")
}

// With -data-dir, a keyed write acknowledged before a kill -9 is replayed
// after the restart: its key is kept with the data, in the log or in a
// snapshot.
func TestARetryAfterAKillIsAReplay(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"from the log", nil},
		{"from a snapshot", []string{"-snapshot-bytes", "1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"-data-dir", dir}, tt.args...)
			p := startProcess(t, args...)
			first := sendOnANewConnection(t, keyedAddRequest(t, p.base, "killed-1"))
			require.Equal(t, http.StatusOK, first.status, first.body)
			require.Equal(t, `2`, first.body)
			require.True(t, change(p.base, "DELETE", "g", 1), "another client's change, that applying the first again would undo")
			if tt.args != nil {
				require.Eventually(t, func() bool { return strings.Contains(p.logs.String(), "wrote a snapshot") },
					30*time.Second, 5*time.Millisecond, "no snapshot was written; output:\n%s", p.logs.String())
			}
			require.NoError(t, p.cmd.Process.Kill()) // SIGKILL: no flush, no goodbye
			_ = p.cmd.Wait()

			p = startProcess(t, args...)
			retry := sendOnANewConnection(t, keyedAddRequest(t, p.base, "killed-1"))
			assertReplay(t, first, retry)
			assert.Equal(t, map[int64]bool{2: true}, members(t, p.base, "g"), "nothing applied again")
			assert.Len(t, feed(t, p.base, 0), 2, "no change but the first and the other client's")
		})
	}
}
