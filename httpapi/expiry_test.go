package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/internal/expiry"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
)

// expiryTest is the API over a memory store whose expiries are validated
// and ended on a clock the test moves: t0, when it was made, and after. The
// store stamps its changes, and counts a ttl from them, on the wall clock,
// which runs on from t0 while the test does: the test moves its clock by
// hours, so a few milliseconds of that never decide anything.
type expiryTest struct {
	t       *testing.T
	h       http.Handler
	t0, now time.Time
	expirer *expiry.Expirer
}

func newExpiryTest(t *testing.T) *expiryTest {
	e := &expiryTest{t: t, t0: time.Now()}
	e.now = e.t0
	clock := func() time.Time { return e.now }
	st := memory.New()
	svc := membership.NewService(st, membership.ServiceOptions{MaxUsers: 100, Now: clock})
	e.h = httpapi.NewHandler(svc, httpapi.Options{MaxBodyBytes: 1 << 16, ListCacheBytes: 1 << 20})
	e.expirer = expiry.New(st, clock, nil)
	return e
}

// at returns t0+d as an expiry of users takes it, and as lists and the
// feed show it: RFC 3339 in UTC, three digits of milliseconds.
func (e *expiryTest) at(d time.Duration) string { return wireTime(e.t0.Add(d)) }

func wireTime(t time.Time) string {
	return t.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z")
}

// expireAt moves the clock to t0+d and ends what is due, as the server's
// expirer does every 100 ms; it returns how many memberships ended.
func (e *expiryTest) expireAt(d time.Duration) int {
	e.t.Helper()
	e.now = e.t0.Add(d)
	n, err := e.expirer.ExpireDue(context.Background())
	require.NoError(e.t, err)
	return n
}

// do sends one request and requires the status.
func (e *expiryTest) do(method, path, body, contentType string, wantStatus int) *httptest.ResponseRecorder {
	e.t.Helper()
	w := do(e.h, method, path, body, contentType)
	require.Equal(e.t, wantStatus, w.Code, "%s %s %s: %s", method, path, body, w.Body.String())
	return w
}

// post adds users (JSON text) to the group, and returns the reply.
func (e *expiryTest) post(group, users string) *httptest.ResponseRecorder {
	e.t.Helper()
	return e.do("POST", "/group-user/"+group, "users="+urlEncode(users), formType, http.StatusOK)
}

func (e *expiryTest) get(path string) string {
	e.t.Helper()
	return e.do("GET", path, "", "", http.StatusOK).Body.String()
}

// changesAfter returns the feed's changes after rev, decoded, and its body.
func (e *expiryTest) changesAfter(rev string) ([]feedChange, string) {
	e.t.Helper()
	body := e.get("/changes?after=" + rev)
	var changes []feedChange
	require.NoError(e.t, json.Unmarshal([]byte(body), &changes), body)
	return changes, body
}

type feedChange struct {
	Rev      int
	Op       string
	Time     string
	Actor    *int64
	Group    *string
	UIDs     []int64
	Expiries []struct {
		UID     int64
		Expires *string
	}
	Changes []feedChange
}

// Members without an expiry are listed exactly as they were before
// expiries; a member with one carries "expires" after its nickname, in
// every list: whole, cached, a page, a suffix, and the member's own.
func TestListsShowExpiriesAndOnlyThem(t *testing.T) {
	e := newExpiryTest(t)
	assert.Equal(t, "2", e.post("g", `[1,[2,"Bo"]]`).Body.String())
	const plain = `[{"uid":1,"nickname":""},{"uid":2,"nickname":"Bo"}]`
	assert.Equal(t, plain, e.get("/group-user/g"), "byte for byte as before expiries")
	assert.Equal(t, `{"uid":2,"nickname":"Bo"}`, e.get("/group-user/g/2"))
	_, feed := e.changesAfter("0")
	assert.NotContains(t, feed, "expir")

	// +02:30 is kept in UTC; the ttl counts from the change's commit.
	in90m := e.t0.Add(90 * time.Minute).In(time.FixedZone("", 2*3600+1800)).Format(time.RFC3339Nano)
	assert.Equal(t, "2", e.post("g", `[{"uid":3,"expires":"`+in90m+`"},{"uid":4,"nickname":"Di","ttl":"2h"}]`).Body.String())
	changes, _ := e.changesAfter("1")
	require.Len(t, changes, 1)
	committed, err := time.Parse(time.RFC3339, changes[0].Time)
	require.NoError(t, err)
	three := `{"uid":3,"nickname":"","expires":"` + e.at(90*time.Minute) + `"}`
	four := `{"uid":4,"nickname":"Di","expires":"` + wireTime(committed.Add(2*time.Hour)) + `"}`
	whole := `[{"uid":1,"nickname":""},{"uid":2,"nickname":"Bo"},` + three + "," + four + "]"

	assert.Equal(t, whole, e.get("/group-user/g"))
	assert.Equal(t, whole, e.get("/group-user/g"), "from the cache")
	assert.Equal(t, plain, e.get("/group-user/g?limit=2"), "a page of members without expiries")
	assert.Equal(t, "["+three+"]", e.get("/group-user/g?limit=1&after=2"))
	assert.Equal(t, "["+three+","+four+"]", e.get("/group-user/g?after=2"), "a suffix of the shared list")
	assert.Equal(t, "["+four+"]", e.get("/group-user/g?after=3"))
	assert.Equal(t, three, e.get("/group-user/g/3"))
	assert.Equal(t, `{"uid":1,"nickname":""}`, e.get("/group-user/g/1"))
	w := e.do("HEAD", "/group-user/g", "", "", http.StatusOK)
	assert.Equal(t, strconv.Itoa(len(whole)), w.Header().Get("Content-Length"))
	assert.Equal(t, "4", w.Header().Get("X-Total-Count"))
}

// When memberships expire, every read agrees: lists, counts, member
// checks, a user's groups, the groups' sizes, the ETags and the feed.
func TestExpiredMembershipsLeaveEveryRead(t *testing.T) {
	e := newExpiryTest(t)
	e.post("g", `[1,{"uid":2,"ttl":"1h"},{"uid":3,"expires":"`+e.at(time.Hour)+`"}]`)
	e.post("h", `[{"uid":2,"ttl":"1h"},4]`)
	e.post("k", `[{"uid":5,"nickname":"Eve","ttl":"30m"}]`)
	w := e.do("GET", "/group-user/g", "", "", http.StatusOK)
	etag, before := w.Header().Get("ETag"), w.Header().Get("X-Total-Count")
	assert.Equal(t, "3", before)
	assert.Equal(t, `[{"group":"g","members":3},{"group":"h","members":2},{"group":"k","members":1}]`, e.get("/groups"))
	latest := e.do("GET", "/changes?limit=1", "", "", http.StatusOK).Header().Get("X-Revision")
	assert.Equal(t, "3", latest)

	assert.Zero(t, e.expireAt(29*time.Minute), "nothing is due yet")
	assert.Equal(t, 1, e.expireAt(59*time.Minute), "user 5 in k")
	assert.Equal(t, 3, e.expireAt(61*time.Minute), "users 2 and 3 in g, 2 in h")

	w = e.do("GET", "/group-user/g", "", "", http.StatusOK)
	assert.Equal(t, `[{"uid":1,"nickname":""}]`, w.Body.String())
	assert.Equal(t, "1", w.Header().Get("X-Total-Count"))
	assert.NotEqual(t, etag, w.Header().Get("ETag"), "the group changed")
	assert.Equal(t, http.StatusOK, doWith(e.h, "GET", "/group-user/g", map[string]string{"If-None-Match": etag}).Code, "the old ETag no longer holds")
	assert.Equal(t, http.StatusNotModified, doWith(e.h, "GET", "/group-user/g", map[string]string{"If-None-Match": w.Header().Get("ETag")}).Code)
	assert.Equal(t, "1", e.do("HEAD", "/group-user/g", "", "", http.StatusOK).Header().Get("X-Total-Count"))
	assert.Equal(t, `[{"uid":1,"nickname":""}]`, e.get("/group-user/g?limit=10"))
	assert.Contains(t, e.do("GET", "/group-user/g/2", "", "", http.StatusNotFound).Body.String(), `"code":"not_member"`)
	assert.Contains(t, e.do("GET", "/group-user/h/2", "", "", http.StatusNotFound).Body.String(), `"code":"not_member"`)
	assert.Equal(t, `[{"uid":4,"nickname":""}]`, e.get("/group-user/h"))
	assert.Equal(t, `[]`, e.get("/group-user/k"))

	w = e.do("POST", "/check", `{"checks":[{"group":"g","uid":1},{"group":"g","uid":2},{"group":"g","uid":3},{"group":"h","uid":2},{"group":"h","uid":4},{"group":"k","uid":5}]}`,
		"application/json", http.StatusOK)
	assert.Equal(t, `{"results":[true,false,false,false,true,false]}`, w.Body.String())
	assert.Equal(t, "6", w.Header().Get("X-Revision"), "three writes, then the expiries of k, g and h")

	w = e.do("GET", "/user-group/2", "", "", http.StatusOK)
	assert.Equal(t, `[]`, w.Body.String())
	assert.Equal(t, "0", w.Header().Get("X-Total-Count"))
	assert.Equal(t, `["g"]`, e.get("/user-group/1"))
	w = e.do("GET", "/groups", "", "", http.StatusOK)
	assert.Equal(t, `[{"group":"g","members":1},{"group":"h","members":1}]`, w.Body.String(), "k, emptied, is no longer listed")
	assert.Equal(t, "2", w.Header().Get("X-Total-Count"))

	// The feed: one change of op expire per group, with its time, no
	// actor, its group and the uids that ended, in the feed's order.
	changes, body := e.changesAfter(latest)
	require.Len(t, changes, 3, body)
	for _, c := range changes {
		assert.Equal(t, "expire", c.Op)
		assert.Nil(t, c.Actor, "the service's own change has no actor")
		_, err := time.Parse(time.RFC3339, c.Time)
		assert.NoError(t, err, "an expiry's change has its time")
	}
	shape := regexp.MustCompile(`^\[\{"rev":4,"op":"expire","time":"[^"]+","group":"k","uids":\[5\],"nicknames":\[\{"uid":5,"nickname":""\}\]\},` +
		`\{"rev":5,"op":"expire","time":"[^"]+","group":"g","uids":\[2,3\]\},` +
		`\{"rev":6,"op":"expire","time":"[^"]+","group":"h","uids":\[2\]\}\]$`)
	assert.Regexp(t, shape, body, "user 5, in no group now, is forgotten as a remove forgets: its nickname is cleared")

	// A clock stepped back delays expiries, and revives none.
	assert.Zero(t, e.expireAt(-time.Hour))
	assert.Equal(t, `[{"uid":1,"nickname":""}]`, e.get("/group-user/g"))
	e.post("g", `[{"uid":6,"expires":"`+e.at(0)+`"}]`) // after the clock, which is at t0-1h
	assert.Zero(t, e.expireAt(-time.Minute), "due at t0: not yet on a clock set back")
	assert.Equal(t, 1, e.expireAt(0))
	assert.Equal(t, `[{"uid":1,"nickname":""}]`, e.get("/group-user/g"))
}

// An add with an expiry sets it, extending or shortening it; an add that
// names none leaves it as it is; null makes the membership permanent.
func TestAnAddSetsKeepsOrEndsAnExpiry(t *testing.T) {
	e := newExpiryTest(t)
	list := func() string { return e.get("/group-user/g") }
	revision := func(w *httptest.ResponseRecorder) string { return w.Header().Get("X-Revision") }

	w := e.post("g", `[{"uid":1,"expires":"`+e.at(2*time.Hour)+`"}]`)
	assert.Equal(t, "1", w.Body.String())
	first := revision(w)
	want2h := `[{"uid":1,"nickname":"","expires":"` + e.at(2*time.Hour) + `"}]`
	assert.Equal(t, want2h, list())

	w = e.post("g", `[1]`)
	assert.Equal(t, "0", w.Body.String())
	assert.Equal(t, first, revision(w), "an add without an expiry changes nothing")
	w = e.post("g", `[{"uid":1,"expires":"`+e.at(2*time.Hour)+`"}]`)
	assert.Equal(t, first, revision(w), "the same expiry changes nothing")
	assert.Equal(t, want2h, list())

	e.post("g", `[[1,"Al"]]`)
	assert.Equal(t, `[{"uid":1,"nickname":"Al","expires":"`+e.at(2*time.Hour)+`"}]`, list(), "a nickname keeps the expiry")

	w = e.post("g", `[{"uid":1,"expires":"`+e.at(3*time.Hour)+`"}]`)
	assert.Equal(t, "0", w.Body.String(), "no user newly added")
	extended := revision(w)
	assert.NotEqual(t, first, extended, "an extension is a change")
	assert.Equal(t, `[{"uid":1,"nickname":"Al","expires":"`+e.at(3*time.Hour)+`"}]`, list())
	changes, body := e.changesAfter(strconv.Itoa(mustAtoi(t, extended) - 1))
	require.Len(t, changes, 1)
	assert.Contains(t, body, `"group":"g","uids":[],"expiries":[{"uid":1,"expires":"`+e.at(3*time.Hour)+`"}]}]`)

	e.post("g", `[{"uid":1,"expires":"`+e.at(time.Hour)+`"}]`)
	assert.Equal(t, `[{"uid":1,"nickname":"Al","expires":"`+e.at(time.Hour)+`"}]`, list(), "shortened")

	w = e.post("g", `[{"uid":1,"expires":null}]`)
	permanent := revision(w)
	assert.Equal(t, `[{"uid":1,"nickname":"Al"}]`, list(), "permanent: as a member that never had an expiry")
	changes, body = e.changesAfter(strconv.Itoa(mustAtoi(t, permanent) - 1))
	require.Len(t, changes, 1)
	assert.Contains(t, body, `"expiries":[{"uid":1,"expires":null}]}]`)
	w = e.post("g", `[{"uid":1,"expires":null}]`)
	assert.Equal(t, permanent, revision(w), "a permanent membership made permanent again changes nothing")

	assert.Zero(t, e.expireAt(4*time.Hour))
	assert.Equal(t, `[{"uid":1,"nickname":"Al"}]`, list())

	// A new member with null has none; with a ttl, the feed reports it on
	// the add that brings it in.
	w = e.post("g", `[{"uid":2,"expires":null},{"uid":3,"ttl":"1h"}]`)
	changes, _ = e.changesAfter(strconv.Itoa(mustAtoi(t, revision(w)) - 1))
	require.Len(t, changes, 1)
	assert.Equal(t, []int64{2, 3}, changes[0].UIDs)
	require.Len(t, changes[0].Expiries, 1, "a new member made permanent has no expiry to report")
	assert.Equal(t, int64(3), changes[0].Expiries[0].UID)
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

// PUT and /batch take the same forms; the feed reports their expiries.
func TestPutAndBatchTakeExpiries(t *testing.T) {
	e := newExpiryTest(t)
	w := e.do("PUT", "/group-user/g", `{"users":[1,{"uid":2,"expires":"`+e.at(time.Hour)+`"}]}`, "application/json", http.StatusOK)
	assert.Equal(t, `{"added":2,"removed":0}`, w.Body.String())
	w = e.do("PUT", "/group-user/g", `{"users":[1,2]}`, "application/json", http.StatusOK)
	assert.Equal(t, `{"added":0,"removed":0}`, w.Body.String())
	assert.Equal(t, "1", w.Header().Get("X-Revision"), "a member kept without an expiry keeps its own: nothing changed")
	assert.Equal(t, `[{"uid":1,"nickname":""},{"uid":2,"nickname":"","expires":"`+e.at(time.Hour)+`"}]`, e.get("/group-user/g"))
	_, body := e.changesAfter("0")
	assert.Regexp(t, `^\[\{"rev":1,"op":"replace","time":"[^"]+","group":"g","uids":\[1,2\],"expiries":\[\{"uid":2,"expires":"`+regexp.QuoteMeta(e.at(time.Hour))+`"\}\]\}\]$`, body)

	w = e.do("POST", "/batch", `{"changes":[`+
		`{"op":"add","group":"h","users":[{"uid":3,"expires":"`+e.at(2*time.Hour)+`"},{"uid":4,"ttl":"3h"}]},`+
		`{"op":"replace","group":"g","users":[1,{"uid":2,"expires":null}]},`+
		`{"op":"remove","group":"g","users":[{"uid":1,"ttl":"1h"}]}]}`, "application/json", http.StatusOK)
	assert.Equal(t, `{"results":[{"added":2},{"added":0,"removed":0},{"removed":1}]}`, w.Body.String())
	changes, body := e.changesAfter("1")
	require.Len(t, changes, 1, body)
	subs := changes[0].Changes
	require.Len(t, subs, 3, body)
	require.Len(t, subs[0].Expiries, 2)
	assert.Equal(t, e.at(2*time.Hour), *subs[0].Expiries[0].Expires)
	assert.Contains(t, body, `{"op":"replace","group":"g","uids":[1,2],"expiries":[{"uid":2,"expires":null}]}`)
	assert.Contains(t, body, `{"op":"remove","group":"g","uids":[1]}`, "a remove ignores expiries")
	batchTime, err := time.Parse(time.RFC3339, changes[0].Time)
	require.NoError(t, err)
	assert.Equal(t, `[{"uid":3,"nickname":"","expires":"`+e.at(2*time.Hour)+`"},{"uid":4,"nickname":"","expires":"`+wireTime(batchTime.Add(3*time.Hour))+`"}]`,
		e.get("/group-user/h"), "the ttl counts from the batch's commit")
	assert.Equal(t, `[{"uid":2,"nickname":""}]`, e.get("/group-user/g"))

	assert.Equal(t, 1, e.expireAt(2*time.Hour+time.Minute))
	assert.Equal(t, 1, e.expireAt(3*time.Hour+time.Minute))
	assert.Equal(t, `[]`, e.get("/group-user/h"))
	assert.Equal(t, `[{"uid":2,"nickname":""}]`, e.get("/group-user/g"), "made permanent by the batch")
}

// An expiry in the past, or past the bound, is a 400 that names the
// element and changes nothing, in a POST, a PUT and a batch; a remove
// reads expiries and ignores them.
func TestBadExpiriesAreRefused(t *testing.T) {
	e := newExpiryTest(t)
	past := e.at(-time.Second)
	tooFar := wireTime(e.t0.Add(membership.MaxExpiryAhead + time.Second))
	refused := []struct {
		method, path, body, contentType, wantCode, wantMsg string
	}{
		{"POST", "/group-user/g", "users=" + urlEncode(`[1,{"uid":2,"expires":"`+past+`"}]`), formType,
			"invalid_users", `users element 1: the expiry ` + past + ` is not in the future`},
		{"POST", "/group-user/g", "users=" + urlEncode(`[{"uid":2,"expires":"`+tooFar+`"}]`), formType,
			"invalid_users", `users element 0: the expiry ` + tooFar + ` is more than 3660 days (87840h) ahead`},
		{"POST", "/group-user/g", `{"users":[{"uid":2,"ttl":"87841h"}]}`, "application/json",
			"invalid_users", `users element 0: the ttl 87841h0m0s is longer than 3660 days (87840h)`},
		{"POST", "/group-user/g", `{"users":[{"uid":2,"ttl":"1h","expires":null}]}`, "application/json",
			"invalid_users", `users element 0: \"expires\" and \"ttl\" are both given: give one`},
		{"PUT", "/group-user/g", `{"users":[1,{"uid":2,"expires":"` + past + `"}]}`, "application/json",
			"invalid_users", `users element 1: the expiry`},
		{"POST", "/batch", `{"changes":[{"op":"add","group":"h","users":[1]},{"op":"replace","group":"g","users":[{"uid":2,"expires":"` + past + `"}]}]}`, "application/json",
			"invalid_users", `changes element 1: users element 0: the expiry`},
		{"POST", "/batch", `{"changes":[{"op":"add","group":"g","users":[{"uid":2,"ttl":"soon"}]}]}`, "application/json",
			"invalid_users", `changes element 0: users element 0: ttl \"soon\" is not a duration`},
		{"DELETE", "/group-user/g", "users=" + urlEncode(`[{"uid":2,"expires":"yesterday"}]`), formType,
			"invalid_users", `users element 0: expires \"yesterday\" is not an RFC 3339 time`},
	}
	for _, r := range refused {
		w := e.do(r.method, r.path, r.body, r.contentType, http.StatusBadRequest)
		assert.Contains(t, w.Body.String(), `"code":"`+r.wantCode+`"`, "%s %s", r.method, r.body)
		assert.Contains(t, w.Body.String(), r.wantMsg, "%s %s", r.method, r.body)
	}
	changes, _ := e.changesAfter("0")
	assert.Empty(t, changes, "nothing was changed")

	// The bound itself is taken; a remove ignores what it is told of
	// expiries, a past one included.
	e.post("g", `[{"uid":2,"expires":"`+e.at(membership.MaxExpiryAhead)+`"}]`)
	w := e.do("DELETE", "/group-user/g", "users="+urlEncode(`[{"uid":2,"expires":"`+past+`"}]`), formType, http.StatusOK)
	assert.Equal(t, "1", w.Body.String())
}
