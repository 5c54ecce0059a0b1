package postgres

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/postgres/internal/pgtest"
)

// Instances that start together on a new database apply each migration
// once, and agree on the epoch.
func TestInstancesStartingTogetherMigrateOnce(t *testing.T) {
	url := pgtest.NewDatabase(t)
	const n = 6
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = Open(context.Background(), url, Options{}) })
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		t.Cleanup(func() { _ = stores[i].Close() })
		assert.Equal(t, stores[0].Epoch(), stores[i].Epoch(), "one epoch for every instance")
	}
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var versions, applied int
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT version) FROM membership_schema").Scan(&applied, &versions))
	ms, err := readMigrations()
	require.NoError(t, err)
	assert.Equal(t, len(ms), versions)
	assert.Equal(t, len(ms), applied, "each version applied once")
}

// A database migrated by a newer build is refused, naming the way forward.
func TestASchemaNewerThanTheBuildIsRefused(t *testing.T) {
	url := pgtest.NewDatabase(t)
	s := openOn(t, url, 0)
	require.NoError(t, s.Close())
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), "INSERT INTO membership_schema (version, name) VALUES (9999, '9999_future.sql')")
	require.NoError(t, err)
	_, err = Open(context.Background(), url, Options{})
	require.Error(t, err)
	var permanent *ConfigError
	assert.ErrorAs(t, err, &permanent)
	assert.Contains(t, err.Error(), "the database's schema is at version 9999")
	assert.Contains(t, err.Error(), "run a build at least as new")
}

// Two instances on one database behave as one: under concurrent writers on
// both, every change gets one revision on both, the feeds are the same, and
// every list agrees, ETags included; a third instance started afterwards
// rebuilds the same state from the log.
func TestTwoInstancesAreOne(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	since := time.Now()
	groups := []string{"a", "b", "c"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var acked []membership.Revision
	for w := range 6 {
		s := []*Store{a, b}[w%2]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range 60 {
				group := groups[rng.IntN(len(groups))]
				uid := membership.UID(1 + rng.IntN(20))
				// Half the writes name their writer as actor.
				actor := membership.UID(w+1) * membership.UID(rng.IntN(2))
				var res membership.Result
				var err error
				if rng.IntN(3) == 0 {
					res, err = s.Write(ctx, membership.Write{Op: membership.OpRemove, GroupID: group, UIDs: []membership.UID{uid}, Actor: actor})
				} else {
					u := membership.User{UID: uid}
					if rng.IntN(3) == 0 {
						u.Nickname, u.HasNickname = fmt.Sprint("n", rng.IntN(4)), true
					}
					res, err = s.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: group, Users: []membership.User{u, {UID: uid + 100}}, Actor: actor})
				}
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				acked = append(acked, res.Revision)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var latest membership.Revision
	for _, r := range acked {
		latest = max(latest, r)
	}
	for _, s := range []*Store{a, b} {
		untilApplied(t, s, latest) // each instance reaches the latest revision acknowledged
	}
	c := openOn(t, url, membership.DefaultChangesKeep) // a newcomer reads the whole log
	feed := storetest.AllChanges(t, a, 0)
	require.NotEmpty(t, feed)
	for _, s := range []*Store{b, c} {
		assert.Equal(t, feed, storetest.AllChanges(t, s, 0), "one feed: every change with one time and one actor")
	}
	storetest.Untimed(t, feed, since)
	actors := map[membership.UID]bool{}
	for _, ch := range feed {
		actors[ch.Actor] = true
	}
	assert.Equal(t, map[membership.UID]bool{0: true, 1: true, 2: true, 3: true, 4: true, 5: true, 6: true}, actors,
		"the changes carry their writers' actors, or none")
	for _, g := range groups {
		want, wantRev := storetest.ListAll(t, a, g)
		for _, s := range []*Store{b, c} {
			got, rev := storetest.ListAll(t, s, g)
			assert.Equal(t, want, got, "group %s", g)
			assert.Equal(t, wantRev, rev, "group %s: one revision, one ETag", g)
		}
	}
	f := storetest.NewFollower()
	for _, ch := range feed {
		f.Apply(ch)
	}
	for _, g := range groups {
		got, _ := storetest.ListAll(t, c, g)
		assert.Equal(t, f.ListOf(g), got, "the lists are what the feed builds: group %s", g)
	}
}

// proxy forwards loopback connections to target until cut: it stands for a
// network between the service and its database.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	down   bool
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
		go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
	}
}

// cut closes every connection and refuses new ones until restored.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *proxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// untilWritable waits, up to a minute, until Writable says writable (or
// not).
func untilWritable(t *testing.T, s *Store, writable bool) {
	t.Helper()
	require.Eventually(t, func() bool { return (s.Writable() == nil) == writable }, time.Minute, 10*time.Millisecond,
		"Writable() == nil is not %v within a minute", writable)
}

// While the database is away, the store says so (Writable), and changes
// are refused with CodeUnavailable; reads go on from memory; once it is
// back, the store takes changes again.
func TestTheDatabaseAwayAndBack(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	p := newProxy(t, fmt.Sprintf("%s:%d", cfg.Host, cfg.Port))
	viaProxy := fmt.Sprintf("postgres://%s@%s/%s", cfg.User, p.ln.Addr(), cfg.Database)
	s, err := Open(ctx, viaProxy, Options{CommitTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer s.Close()
	_, err = storetest.Add(ctx, s, "g", []membership.User{{UID: 1}})
	require.NoError(t, err)

	p.cut()
	untilWritable(t, s, false)
	assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(s.Writable()))
	assert.Contains(t, s.Writable().Error(), "the database cannot be reached")
	_, err = storetest.Add(ctx, s, "g", []membership.User{{UID: 2}})
	assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err), "%v", err)
	got, _ := storetest.ListAll(t, s, "g")
	assert.Equal(t, []membership.Member{{UID: 1}}, got, "reads go on from memory")

	p.restore()
	untilWritable(t, s, true)
	res, err := storetest.Add(ctx, s, "g", []membership.User{{UID: 3}})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Count)
	got, _ = storetest.ListAll(t, s, "g")
	assert.Equal(t, []membership.UID{1, 3}, storetest.MemberUIDs(got), "nothing refused was applied")
}

// A long poll of the feed on one instance is woken by a write on another.
func TestAWriteOnOneInstanceWakesAFollowerOfAnother(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	type polled struct {
		changes []membership.Change
		err     error
	}
	got := make(chan polled, 1)
	go func() {
		changes, _, err := b.Changes(ctx, membership.ChangeOptions{After: 0, Wait: true})
		got <- polled{changes, err}
	}()
	since := time.Now()
	res, err := a.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 7, Nickname: "Q", HasNickname: true}}, Actor: 3})
	require.NoError(t, err)
	p := <-got
	require.NoError(t, p.err)
	require.Len(t, p.changes, 1)
	assert.Equal(t, []membership.Change{{Revision: res.Revision, Op: membership.OpAdd, Actor: 3, GroupID: "g", UIDs: []membership.UID{7},
		Nicknames: []membership.Member{{UID: 7, Nickname: "Q"}}}}, storetest.Untimed(t, p.changes, since))
	assert.Equal(t, p.changes, storetest.AllChanges(t, a, 0), "the writer's instance gives it the same time")
}

// Nicknames go through the log byte for byte: NUL included, an empty one
// (which clears a nickname) apart from none given (which keeps it).
func TestNicknamesGoThroughTheLogAsGiven(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := pgtest.NewDatabase(t)
	a := openOn(t, url, membership.DefaultChangesKeep)
	for _, users := range [][]membership.User{
		{{UID: 1, Nickname: "a\x00b", HasNickname: true}, {UID: 2, Nickname: "x", HasNickname: true}, {UID: 3, Nickname: "y", HasNickname: true}},
		{{UID: 2, Nickname: "", HasNickname: true}, {UID: 3}},
	} {
		_, err := storetest.Add(ctx, a, "g", users)
		require.NoError(t, err)
	}
	want := []membership.Member{{UID: 1, Nickname: "a\x00b"}, {UID: 2}, {UID: 3, Nickname: "y"}}
	got, _ := storetest.ListAll(t, a, "g")
	assert.Equal(t, want, got)
	b := openOn(t, url, membership.DefaultChangesKeep) // built from the log alone
	got, _ = storetest.ListAll(t, b, "g")
	assert.Equal(t, want, got)
}

// The pool's settings in the URL (pool_max_conns, …) size the pool; the
// connection that listens takes the rest of the URL: the server itself
// refuses pool_max_conns, and no write would be applied.
func TestPoolSettingsInTheURL(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t) + "?pool_max_conns=2&pool_max_conn_idle_time=1s&application_name=membership_test"
	s, err := Open(ctx, url, Options{CommitTimeout: 30 * time.Second})
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, int32(2), s.pool.Config().MaxConns)
	assert.Equal(t, time.Second, s.pool.Config().MaxConnIdleTime)
	for uid := range membership.UID(5) {
		res, err := storetest.Add(ctx, s, "g", []membership.User{{UID: uid + 1}})
		require.NoError(t, err)
		assert.Equal(t, 1, res.Count)
	}
	assert.NoError(t, s.Writable())
	d := openOn(t, pgtest.NewDatabase(t), 0)
	assert.Equal(t, int32(defaultMaxConns), d.pool.Config().MaxConns, "the default")
	assert.Equal(t, maxConnIdle, d.pool.Config().MaxConnIdleTime, "the default")
}
