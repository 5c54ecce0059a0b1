package client_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/client"
	"example.com/groupmembership/membershiptest"
)

// exchange is a request's conditional headers and its reply's status.
type exchange struct {
	path, ifNoneMatch, minRevision string
	status                         int
}

// recorder records the exchanges of the service it wraps.
type recorder struct {
	mu        sync.Mutex
	exchanges []exchange
}

func (rec *recorder) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: 200}
		next.ServeHTTP(sw, r)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.exchanges = append(rec.exchanges, exchange{r.Method + " " + r.URL.RequestURI(), r.Header.Get("If-None-Match"), r.Header.Get("X-Min-Revision"), sw.status})
	})
}

func (rec *recorder) take() []exchange {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	ex := rec.exchanges
	rec.exchanges = nil
	return ex
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

func TestAListUnchangedIsServedFromTheCache(t *testing.T) {
	var rec recorder
	srv := membershiptest.NewServer(t, membershiptest.WithMiddleware(rec.middleware))
	c, ctx := srv.Client, t.Context()
	_, err := c.Add(ctx, "g", []client.User{client.NewUser(1).WithNickname("Al"), client.NewUser(2)})
	require.NoError(t, err)
	rec.take()

	first, err := c.ListPage(ctx, "g", client.ListOptions{})
	require.NoError(t, err)
	second, err := c.ListPage(ctx, "g", client.ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, first, second, "the page served from the cache is the page")
	ex := rec.take()
	require.Len(t, ex, 2)
	assert.Equal(t, exchange{"GET /group-user/g", "", "", 200}, ex[0])
	assert.Equal(t, exchange{"GET /group-user/g", first.ETag, "", 304}, ex[1])

	_, err = c.Add(ctx, "g", client.Users(3))
	require.NoError(t, err)
	third, err := c.ListPage(ctx, "g", client.ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 2, 3}, uidsOf(third.Items))
	assert.Equal(t, 200, rec.take()[1].status, "changed: the new list")

	groups, err := c.GroupsPage(ctx, client.PageOptions{})
	require.NoError(t, err)
	again, err := c.GroupsPage(ctx, client.PageOptions{})
	require.NoError(t, err)
	assert.Equal(t, groups, again)
	assert.Equal(t, 304, rec.take()[1].status, "/groups is cached too")

	// Pages are cached by their URL.
	p1, err := c.ListPage(ctx, "g", client.ListOptions{Limit: 1})
	require.NoError(t, err)
	p1again, err := c.ListPage(ctx, "g", client.ListOptions{Limit: 1})
	require.NoError(t, err)
	assert.Equal(t, p1, p1again)
	assert.Equal(t, "1", p1again.Next)
	assert.Equal(t, 3, p1again.Total)
	assert.Equal(t, 304, rec.take()[1].status)
}

func TestTheCacheIsBoundedInBytes(t *testing.T) {
	var rec recorder
	// A list of 10 members is 242 bytes, about 900 with its URL, ETag,
	// headers and the entry's overhead: two fit in 2000, three do not; one
	// of 200 members never does.
	srv := membershiptest.NewServer(t, membershiptest.WithMiddleware(rec.middleware),
		membershiptest.WithClientOptions(client.WithListCacheBytes(2000)))
	c, ctx := srv.Client, t.Context()
	for _, g := range []string{"a", "b", "c"} {
		_, err := c.Add(ctx, g, client.Users(1, 2, 3, 4, 5, 6, 7, 8, 9, 10))
		require.NoError(t, err)
	}
	var big []client.User
	for uid := range int64(200) {
		big = append(big, client.NewUser(100+uid))
	}
	_, err := c.Add(ctx, "big", big)
	require.NoError(t, err)
	rec.take()

	list := func(g string) {
		t.Helper()
		_, err := c.ListPage(ctx, g, client.ListOptions{})
		require.NoError(t, err)
	}
	list("a")
	list("b")
	entries, size := client.CacheStats(c)
	assert.Equal(t, 2, entries)
	assert.LessOrEqual(t, size, int64(2000))
	list("c") // a, the least recently used, goes
	entries, size = client.CacheStats(c)
	assert.Equal(t, 2, entries)
	assert.LessOrEqual(t, size, int64(2000))
	list("a")
	list("c")
	ex := rec.take()
	assert.Equal(t, []int{200, 200, 200, 200, 304}, statuses(ex), "a was dropped; c was kept")

	list("big") // over the bound alone: never cached
	list("big")
	assert.Equal(t, []int{200, 200}, statuses(rec.take()))
	entries, _ = client.CacheStats(c)
	assert.Equal(t, 2, entries)

	off, err := client.New(srv.URL, client.WithListCacheBytes(0))
	require.NoError(t, err)
	for range 2 {
		_, err = off.ListPage(ctx, "a", client.ListOptions{})
		require.NoError(t, err)
	}
	ex = rec.take()
	assert.Equal(t, []int{200, 200}, statuses(ex))
	assert.Empty(t, ex[1].ifNoneMatch)
}

func statuses(ex []exchange) []int {
	s := make([]int, len(ex))
	for i, e := range ex {
		s[i] = e.status
	}
	return s
}

// TestTheCacheIsSafeForConcurrentUse lists and writes from many
// goroutines at once, with a cache that holds only some of the lists:
// run under -race.
func TestTheCacheIsSafeForConcurrentUse(t *testing.T) {
	srv := membershiptest.NewServer(t, membershiptest.WithClientOptions(client.WithListCacheBytes(300)))
	c, ctx := srv.Client, t.Context()
	groups := []string{"a", "b", "c", "d"}
	for _, g := range groups {
		_, err := c.Add(ctx, g, client.Users(1, 2, 3))
		require.NoError(t, err)
	}
	const workers, rounds = 8, 25
	errs := make(chan error, workers*rounds)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				g := groups[(w+i)%len(groups)]
				if i%5 == 0 {
					if _, err := c.Add(ctx, g, client.Users(int64(100+w))); err != nil {
						errs <- err
					}
					continue
				}
				page, err := c.ListPage(ctx, g, client.ListOptions{})
				if err == nil && (len(page.Items) < 3 || page.Items[0].UID != 1) {
					err = fmt.Errorf("group %s: a list of %v", g, uidsOf(page.Items))
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	_, size := client.CacheStats(c)
	assert.LessOrEqual(t, size, int64(300))
	for _, g := range groups {
		page, err := c.ListPage(ctx, g, client.ListOptions{})
		require.NoError(t, err)
		assert.Len(t, page.Items, 3+workers, "group %s: every worker added itself", g)
	}
}

func TestReadYourWritesSendsXMinRevision(t *testing.T) {
	var rec recorder
	srv := membershiptest.NewServer(t, membershiptest.WithMiddleware(rec.middleware))
	ctx := t.Context()
	plain := srv.Client
	c, err := client.New(srv.URL, client.WithReadYourWrites())
	require.NoError(t, err)

	_, err = plain.Add(ctx, "g", client.Users(1))
	require.NoError(t, err)
	_, _, err = c.Member(ctx, "g", 1)
	require.NoError(t, err)
	assert.Empty(t, rec.take()[1].minRevision, "no write of its own yet")

	res, err := c.Add(ctx, "g", client.Users(2))
	require.NoError(t, err)
	assert.Equal(t, client.Revision(2), c.MinRevision())
	_, err = plain.Add(ctx, "h", client.Users(3)) // another client's write: revision 3
	require.NoError(t, err)

	_, err = c.ListPage(ctx, "g", client.ListOptions{})
	require.NoError(t, err)
	_, _, err = c.Member(ctx, "g", 2)
	require.NoError(t, err)
	_, err = c.Check(ctx, []client.Check{{Group: "g", UID: 2}})
	require.NoError(t, err)
	_, err = c.UserGroupsPage(ctx, 2, client.PageOptions{})
	require.NoError(t, err)
	_, err = c.GroupsPage(ctx, client.PageOptions{})
	require.NoError(t, err)
	_, err = c.Changes(ctx, client.ChangesOptions{})
	require.NoError(t, err)
	_, err = plain.ListPage(ctx, "g", client.ListOptions{})
	require.NoError(t, err)
	ex := rec.take()
	require.Len(t, ex, 9)
	want := fmt.Sprint(res.Revision)
	assert.Empty(t, ex[0].minRevision, "a write sends none")
	for _, e := range ex[2:7] {
		assert.Equal(t, want, e.minRevision, e.path)
		assert.Equal(t, 200, e.status, e.path)
	}
	assert.Empty(t, ex[7].minRevision, "/changes takes none")
	assert.Empty(t, ex[8].minRevision, "a client without the option sends none")

	// A lower revision never replaces a higher one.
	_, err = c.Remove(ctx, "h", []int64{99}) // changes nothing: the group's revision, 3
	require.NoError(t, err)
	assert.Equal(t, client.Revision(3), c.MinRevision())
	c.ForgetWrites()
	_, err = c.ListPage(ctx, "g", client.ListOptions{})
	require.NoError(t, err)
	ex = rec.take()
	assert.Empty(t, ex[len(ex)-1].minRevision)
}
