package durable

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/expiry"
	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/internal/store/storetest/expirytest"
	"example.com/groupmembership/internal/store/wal"
	"example.com/groupmembership/internal/store/wal/record"
	"example.com/groupmembership/membership"
)

func TestDurableExpiries(t *testing.T) {
	expirytest.Contract(t, func(t *testing.T) store.Expiring {
		d := openTestDurable(t, t.TempDir(), Options{ChangesKeep: keepAll})
		t.Cleanup(func() { _ = d.Close() })
		return d
	})
}

var expiryGroups = []string{"g", "h", "k", "n", "e", "x", "z"}

// expiryScript sets, on d, expiries of every kind: times and TTLs, by an
// add, a keyed add, a batch's add and replace, one made permanent, one
// left as it was; and applies, with d's Write as the expirer does, the
// expiries due at t0-2h, one of which was extended after it was found
// due, so that the log holds an expire record naming a uid it does not
// remove. Expiries are due from t0 on.
func expiryScript(t *testing.T, d *Store, t0 time.Time) {
	t.Helper()
	ctx := context.Background()
	write := func(w membership.Write) membership.Result {
		t.Helper()
		res, err := d.Write(ctx, w)
		require.NoError(t, err)
		return res
	}
	ann := storetest.ExpiresAt(1, t0)
	ann.Nickname, ann.HasNickname = "Ann", true
	write(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{ann, storetest.ExpiresIn(2, 2*time.Hour), {UID: 3}, storetest.ExpiresAt(4, t0.Add(time.Minute))}})
	write(storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "h", Users: []membership.User{storetest.ExpiresAt(1, t0.Add(time.Minute)), storetest.ExpiresAt(5, t0)}}, "expiring-1"))
	_, err := d.Batch(ctx, membership.Batch{Writes: []membership.Write{
		{Op: membership.OpAdd, GroupID: "k", Users: []membership.User{storetest.ExpiresAt(6, t0)}},
		{Op: membership.OpReplace, GroupID: "n", Users: []membership.User{storetest.ExpiresIn(7, 3*time.Hour), {UID: 8}}},
	}})
	require.NoError(t, err)
	write(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 4, Expiry: membership.Expiry{Set: true}}}})

	past := t0.Add(-2 * time.Hour)
	write(membership.Write{Op: membership.OpAdd, GroupID: "e", Users: []membership.User{storetest.ExpiresAt(9, past)}})
	write(membership.Write{Op: membership.OpAdd, GroupID: "x", Users: []membership.User{storetest.ExpiresAt(10, past), storetest.ExpiresAt(11, past)}})
	due := d.DueExpiries(past, 100)
	require.Len(t, due, 2, "e and x")
	require.Equal(t, []membership.UID{10, 11}, due[1].Write.UIDs)
	write(membership.Write{Op: membership.OpAdd, GroupID: "x", Users: []membership.User{storetest.ExpiresAt(10, t0.Add(2*time.Minute))}})
	for _, w := range due {
		assert.Equal(t, 1, write(w.Write).Count, "group %s: 9 in e, 11 in x (10 was extended)", w.Write.GroupID)
	}
}

// expiryState is what a store shows of its expiries: every list with its
// members' expiries, the feed, and how many expiries it keeps. (When the
// next is due is not in it: memory's due set may hold expiries that no
// longer hold, which a replay puts back, see memory.Store.NextExpiry.)
type expiryState struct {
	Lists      map[string][]membership.Member
	Changes    []membership.Change
	Count      int64
	LatestRev  membership.Revision
	KeyReplays bool
}

func expiryStateOf(t *testing.T, d *Store, t0 time.Time) expiryState {
	t.Helper()
	st := expiryState{Lists: map[string][]membership.Member{}, Count: d.ExpiryCount(), LatestRev: d.mem.LatestRevision()}
	for _, g := range expiryGroups {
		st.Lists[g] = listOf(t, d, g)
	}
	changes, _, err := d.Changes(context.Background(), membership.ChangeOptions{})
	if membership.ErrorCode(err) != membership.CodeChangesGone { // a restored store's feed starts after its backup
		require.NoError(t, err)
	}
	st.Changes = storetest.EmptiesAsNil(changes)
	// The keyed add is remembered: its repeat is a replay.
	res, err := d.Write(context.Background(), storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "h",
		Users: []membership.User{storetest.ExpiresAt(1, t0.Add(time.Minute)), storetest.ExpiresAt(5, t0)}}, "expiring-1"))
	require.NoError(t, err)
	st.KeyReplays = res.Replayed
	return st
}

// listOf returns the members of group, nil for none.
func listOf(t *testing.T, d *Store, group string) []membership.Member {
	t.Helper()
	got, _ := storetest.ListAll(t, d, group)
	if len(got) == 0 {
		return nil
	}
	return got
}

// checkDue checks that the memberships of lists end at their expiries, and
// only then: at each expiry T, the expirer on a clock at T less a
// millisecond ends none, and at T exactly ends those due at T, one change
// per group, before any read.
func checkDue(t *testing.T, d *Store, lists map[string][]membership.Member) {
	t.Helper()
	var times []time.Time
	for _, members := range lists {
		for _, m := range members {
			if !m.Expires.IsZero() {
				times = append(times, m.Expires)
			}
		}
	}
	slices.SortFunc(times, time.Time.Compare)
	times = slices.Compact(times)
	require.NotEmpty(t, times)
	clock := &storetest.Clock{}
	e := expiry.New(d, clock.Now, nil)
	ctx := context.Background()
	want := map[string][]membership.Member{}
	for g, members := range lists {
		want[g] = slices.Clone(members)
	}
	for _, at := range times {
		clock.Set(at.Add(-time.Millisecond))
		n, err := e.ExpireDue(ctx)
		require.NoError(t, err)
		assert.Zero(t, n, "nothing is due before %s", at)
		ended, groups := 0, 0
		for g, members := range want {
			before := len(members)
			want[g] = slices.DeleteFunc(members, func(m membership.Member) bool { return m.Expires.Equal(at) })
			if len(want[g]) < before {
				ended += before - len(want[g])
				groups++
			}
			if len(want[g]) == 0 {
				want[g] = nil
			}
		}
		rev := d.mem.LatestRevision()
		clock.Set(at)
		n, err = e.ExpireDue(ctx)
		require.NoError(t, err)
		assert.Equal(t, ended, n, "the memberships due at %s end", at)
		changes := storetest.AllChanges(t, d, rev)
		assert.Len(t, changes, groups, "one change per group at %s", at)
		for _, c := range changes {
			assert.Equal(t, membership.OpExpire, c.Op)
		}
		for _, g := range expiryGroups {
			assert.Equal(t, want[g], listOf(t, d, g), "group %s after %s", g, at)
		}
	}
	assert.Zero(t, d.ExpiryCount())
}

// loggedExpires returns the expire records of the logs of dir.
func loggedExpires(t *testing.T, dir string) []*record.Write {
	t.Helper()
	logs, _, err := files(dir)
	require.NoError(t, err)
	var out []*record.Write
	for _, seq := range logs {
		data, err := os.ReadFile(wal.Path(dir, seq))
		require.NoError(t, err)
		_, err = wal.Read(data, func(payload []byte) error {
			r, err := record.Decode(payload)
			if err != nil {
				return err
			}
			if e, ok := r.(*record.Write); ok && e.Op == membership.OpExpire {
				out = append(out, e)
			}
			return nil
		})
		require.NoError(t, err)
	}
	return out
}

// Expiries are kept, and come due at the same times, across a restart, a
// kill -9, a snapshot, and a backup restored: the log keeps the times a
// TTL set as of its write's commit, and an expire record replays to the
// state it gave, a membership extended after it was found due included.
func TestDurableKeepsExpiries(t *testing.T) {
	t0 := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
	for _, mode := range []string{"closed and reopened", "killed", "from a snapshot", "restored from a backup"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			d := openTestDurable(t, dir, markedOpts())
			expiryScript(t, d, t0)
			want := expiryStateOf(t, d, t0)
			require.Len(t, want.Lists["g"], 4)
			assert.Equal(t, membership.Member{UID: 1, Nickname: "Ann", Expires: t0}, want.Lists["g"][0])
			ttl := want.Lists["g"][1]
			require.Equal(t, membership.UID(2), ttl.UID)
			assert.Equal(t, want.Changes[0].Time.Add(2*time.Hour), ttl.Expires, "a TTL counts from its write's commit")
			assert.Equal(t, membership.Member{UID: 4}, want.Lists["g"][3], "made permanent")
			assert.Equal(t, []membership.Member{{UID: 10, Expires: t0.Add(2 * time.Minute)}}, want.Lists["x"], "extended after it was found due")
			assert.Nil(t, want.Lists["e"])
			assert.Equal(t, int64(7), want.Count)
			next, ok := d.NextExpiry()
			assert.True(t, ok)
			assert.Equal(t, t0, next)
			assert.True(t, want.KeyReplays)
			for _, c := range want.Changes {
				if c.GroupID == "g" && c.Op == membership.OpAdd && len(c.UIDs) > 0 {
					assert.Equal(t, []membership.MemberExpiry{{UID: 1, At: t0}, {UID: 2, At: ttl.Expires}, {UID: 4, At: t0.Add(time.Minute)}}, c.Expiries)
				}
			}
			expires := loggedExpires(t, dir)
			require.Len(t, expires, 2, "the expire records of e and x")
			assert.Equal(t, "x", expires[1].GroupID, "logged in the order applied")
			assert.Equal(t, []membership.UID{10, 11}, expires[1].UIDs, "the record names the uid it did not remove")
			assert.Equal(t, t0.Add(-2*time.Hour), expires[1].AsOf)

			switch mode {
			case "closed and reopened":
				require.NoError(t, d.Close())
			case "killed":
				d.log.Mark()
				crash(t, d)
			case "from a snapshot":
				require.NoError(t, d.Close())
				// Started again, the first write starts a snapshot that
				// covers every change.
				d = openTestDurable(t, dir, Options{ChangesKeep: keepAll, SnapshotBytes: 1})
				_, err := d.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: "z", Users: []membership.User{{UID: 99}}})
				require.NoError(t, err)
				want = expiryStateOf(t, d, t0)
				require.NoError(t, d.Close())
				data, err := os.ReadFile(newestLog(t, dir))
				require.NoError(t, err)
				res, err := wal.Read(data, func([]byte) error { return nil })
				require.NoError(t, err)
				require.Zero(t, res.Records, "the newest log is empty: the snapshot holds everything")
			case "restored from a backup":
				path := filepath.Join(t.TempDir(), "backup")
				f, err := os.Create(path)
				require.NoError(t, err)
				_, err = d.Backup().WriteTo(f)
				require.NoError(t, errors.Join(err, f.Close(), d.Close()))
				dir = filepath.Join(t.TempDir(), "restored")
				_, err = Restore(path, dir)
				require.NoError(t, err)
				want.Changes = nil // a backup holds the state, not the feed
			}

			d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
			defer d.Close()
			assert.Equal(t, want, expiryStateOf(t, d, t0))
			next, ok = d.NextExpiry()
			assert.True(t, ok)
			assert.False(t, next.After(t0), "the next expiry queued is t0's, or one that no longer holds")
			checkDue(t, d, want.Lists)
		})
	}
}

// Memberships that came due while the store was closed, or down after a
// kill -9, are ended by the expirer run right after the store opens,
// before any read: one change per group.
func TestDurableEndsWhatExpiredWhileClosed(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
	for _, killed := range []bool{false, true} {
		t.Run(map[bool]string{false: "closed", true: "killed"}[killed], func(t *testing.T) {
			dir := t.TempDir()
			d := openTestDurable(t, dir, markedOpts())
			for _, w := range []membership.Write{
				{Op: membership.OpAdd, GroupID: "a", Users: []membership.User{storetest.ExpiresAt(1, t0), storetest.ExpiresAt(2, t0.Add(time.Second)), {UID: 3}}},
				{Op: membership.OpAdd, GroupID: "b", Users: []membership.User{storetest.ExpiresAt(1, t0)}},
				{Op: membership.OpAdd, GroupID: "c", Users: []membership.User{storetest.ExpiresAt(4, t0.Add(time.Hour))}},
			} {
				_, err := d.Write(ctx, w)
				require.NoError(t, err)
			}
			if killed {
				d.log.Mark()
				crash(t, d)
			} else {
				require.NoError(t, d.Close())
			}

			d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
			rev := d.mem.LatestRevision()
			n, err := expiry.New(d, func() time.Time { return t0.Add(time.Minute) }, nil).ExpireDue(ctx)
			require.NoError(t, err)
			assert.Equal(t, 3, n)
			changes := storetest.AllChanges(t, d, rev)
			require.Len(t, changes, 2, "one change per group")
			// A round's changes are applied together, in no set order.
			byGroup := map[string][]membership.UID{}
			for _, c := range changes {
				assert.Equal(t, membership.OpExpire, c.Op)
				byGroup[c.GroupID] = c.UIDs
			}
			assert.Len(t, byGroup, 2)
			assert.Contains(t, byGroup, "b")
			assert.Equal(t, []membership.UID{1, 2}, byGroup["a"])
			got, _ := storetest.ListAll(t, d, "a")
			assert.Equal(t, []membership.Member{{UID: 3}}, got)
			got, _ = storetest.ListAll(t, d, "b")
			assert.Empty(t, got)
			got, _ = storetest.ListAll(t, d, "c")
			assert.Equal(t, []membership.Member{{UID: 4, Expires: t0.Add(time.Hour)}}, got)

			// The expire records replay.
			require.NoError(t, d.Close())
			d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
			defer d.Close()
			assert.Equal(t, changes, storetest.AllChanges(t, d, rev))
			assert.Equal(t, []membership.Member{{UID: 3}}, listOf(t, d, "a"))
			assert.Nil(t, listOf(t, d, "b"))
			assert.Equal(t, int64(1), d.ExpiryCount())
		})
	}
}

// An expiry that would change nothing is not logged: the expirer's writes
// of expiries extended since are answered from memory.
func TestDurableDoesNotLogExpiresThatChangeNothing(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	_, err := d.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{storetest.ExpiresAt(1, t0)}})
	require.NoError(t, err)
	due := d.DueExpiries(t0, 10)
	require.Len(t, due, 1)
	_, err = d.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{storetest.ExpiresAt(1, t0.Add(time.Hour))}})
	require.NoError(t, err)
	size := logSize(t, dir)
	res, err := d.Write(ctx, due[0].Write)
	require.NoError(t, err)
	assert.Zero(t, res.Count)
	assert.Equal(t, size, logSize(t, dir), "no record")
	assert.Empty(t, loggedExpires(t, dir))
}

// An expiry the log cannot keep as it is (a time at or before 1970, which
// its records hold as milliseconds since 1970, 0 for none) is refused,
// with nothing logged; the Service never asks for one (an expiry must be
// ahead of its clock).
func TestDurableRefusesAnExpiryItsLogCannotKeep(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	size := logSize(t, dir)
	for _, at := range []time.Time{time.UnixMilli(0).UTC(), time.UnixMilli(-1).UTC(), time.Date(1, 1, 1, 0, 0, 0, 1e6, time.UTC)} {
		_, err := d.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}, storetest.ExpiresAt(2, at)}})
		assert.Equal(t, membership.CodeInvalidUsers, membership.ErrorCode(err), "%s: %v", at, err)
		_, err = d.Batch(ctx, membership.Batch{Writes: []membership.Write{{Op: membership.OpReplace, GroupID: "g", Users: []membership.User{storetest.ExpiresAt(2, at)}}}})
		assert.Equal(t, membership.CodeInvalidUsers, membership.ErrorCode(err), "%s: %v", at, err)
	}
	assert.Equal(t, size, logSize(t, dir))
	require.NoError(t, d.Close())
	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	assert.Zero(t, d.mem.LatestRevision())
}

// An expire write names at most record.MaxExpireUIDs uids, as memory's
// DueExpiries gives them: a larger one is refused, so that LargestEntry
// bounds every expire record, whatever the request limits.
func TestExpireRecordsAreBounded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	past := time.UnixMilli(1 << 40).UTC()
	users := make([]membership.User, record.MaxExpireUIDs+1)
	for i := range users {
		users[i] = storetest.ExpiresAt(math.MaxInt64-membership.UID(i), past)
	}
	_, err := d.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "big", Users: users})
	require.NoError(t, err)
	due := d.DueExpiries(past, len(users))
	require.Len(t, due, 2)
	uids := append(slices.Clone(due[0].Write.UIDs), due[1].Write.UIDs...)
	_, err = d.Write(ctx, membership.Write{Op: membership.OpExpire, GroupID: "big", UIDs: uids, AsOf: past})
	assert.Equal(t, membership.CodeInvalidQuery, membership.ErrorCode(err), "%v", err)
	for _, w := range due {
		assert.LessOrEqual(t, len(w.Write.UIDs), record.MaxExpireUIDs)
		res, err := d.Write(ctx, w.Write)
		require.NoError(t, err)
		assert.Equal(t, len(w.Write.UIDs), res.Count)
	}
	expires := loggedExpires(t, dir)
	require.Len(t, expires, 2)
	for _, e := range expires {
		e.If = membership.Precondition{Exists: true, Revisions: make([]membership.Revision, record.MaxPreconditionRevisions)}
		assert.LessOrEqual(t, int64(len(e.Append(nil))), LargestEntry(0, 0, 1), "bounded by the smallest limits too")
	}
}

// A log of version 6, as the build before expiries wrote it, is still
// read, and the records after it, which may hold expiries, go into a new
// log of version 7.
func TestDurableReadsAVersion6Log(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	_, err := d.Write(ctx, storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}, {UID: 2}}}, "k"))
	require.NoError(t, err)
	require.NoError(t, d.Close())
	path := newestLog(t, dir)
	v6, err := os.ReadFile(path)
	require.NoError(t, err)
	v6[4] = 6 // records without an expiry are as version 6 wrote them
	require.NoError(t, os.WriteFile(path, v6, 0o600))

	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	got, _ := storetest.ListAll(t, d, "g")
	assert.Equal(t, []membership.Member{{UID: 1}, {UID: 2}}, got)
	_, err = d.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{storetest.ExpiresAt(2, t0)}})
	require.NoError(t, err)
	require.NoError(t, d.Close())
	old, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, v6, old, "the old log is left as it was")
	newest, err := os.ReadFile(newestLog(t, dir))
	require.NoError(t, err)
	h, err := wal.ReadHeader(newest)
	require.NoError(t, err)
	assert.Equal(t, wal.Version, h.Version)

	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	defer d.Close()
	got, _ = storetest.ListAll(t, d, "g")
	assert.Equal(t, []membership.Member{{UID: 1}, {UID: 2, Expires: t0}}, got)
}

// The committer applies a run of the expirer's expires together
// (memory.Store.ApplyExpiries), and every other change on its own, in the
// order written: the state, the feed and each answer are those of the
// changes applied one after another (as a replay of the log applies them).
func TestTheCommitterAppliesARunOfExpiresTogether(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	for _, g := range []string{"a", "b", "c"} {
		_, err := d.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: g, Users: []membership.User{
			storetest.ExpiresAt(1, t0), storetest.ExpiresAt(2, t0), {UID: 3, Nickname: "three", HasNickname: true},
		}})
		require.NoError(t, err)
	}
	at := t0.Add(time.Second)
	expire := func(g string, uids ...membership.UID) *pending {
		return &pending{req: &record.Write{Op: membership.OpExpire, GroupID: g, UIDs: uids, AsOf: at, Time: at}}
	}
	batch := []*pending{
		expire("a", 1, 2),
		&pending{req: &record.Write{Op: membership.OpAdd, GroupID: "b", Time: at, Users: []membership.User{storetest.ExpiresAt(4, t0)}}},
		expire("b", 1, 4),
		expire("c", 1, 2),
		expire("b", 2),
		&pending{req: &record.Write{Op: membership.OpRemove, GroupID: "c", Time: at, UIDs: []membership.UID{3}}},
	}
	d.applyMu.Lock()
	d.apply(batch)
	d.applyMu.Unlock()
	counts := make([]int, len(batch))
	for i, p := range batch {
		require.NoError(t, p.applied.err, "change %d", i)
		counts[i] = p.applied.res.Count
	}
	assert.Equal(t, []int{2, 1, 2, 2, 1, 1}, counts)
	changes, _, err := d.Changes(context.Background(), membership.ChangeOptions{})
	require.NoError(t, err)
	var ops []string
	for _, c := range changes {
		ops = append(ops, string(c.Op)+" "+c.GroupID)
	}
	assert.Equal(t, []string{"add a", "add b", "add c", "expire a", "add b", "expire b", "expire c", "expire b", "remove c"}, ops)
	for i, p := range batch {
		assert.Equal(t, changes[3+i].Revision, p.applied.res.Revision, "change %d", i)
	}
	assert.Equal(t, []membership.Member{{UID: 3, Nickname: "three"}}, listOf(t, d, "a"))
	assert.Equal(t, []membership.Member{{UID: 3, Nickname: "three"}}, listOf(t, d, "b"))
	assert.Empty(t, listOf(t, d, "c"))
}

// The expirer's rounds go through WriteExpiries: their records, replayed
// one at a time after a restart, give the very state, feed and counts that
// the committer's grouped apply gave live.
func TestARoundOfExpiresReplaysToTheStateItGaveLive(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	d := openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	for g := range 6 {
		users := []membership.User{{UID: 100 + membership.UID(g)}} // stays
		for uid := membership.UID(1); uid <= 40; uid++ {
			if (int(uid)+g)%3 != 0 {
				u := storetest.ExpiresAt(uid, t0.Add(-time.Duration(g%2)*time.Second))
				u.Nickname, u.HasNickname = "n", uid%2 == 0
				users = append(users, u)
			}
		}
		if g == 5 {
			users = users[1:] // emptied by its expiries
		}
		_, err := d.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g" + string(rune('a'+g)), Users: users})
		require.NoError(t, err)
	}
	e := expiry.New(d, func() time.Time { return t0 }, nil)
	n, err := e.ExpireDue(ctx)
	require.NoError(t, err)
	require.Positive(t, n)
	live := exportSorted(d)
	liveStats := d.mem.Stats()
	liveChanges, _, err := d.Changes(ctx, membership.ChangeOptions{})
	require.NoError(t, err)
	require.NoError(t, d.Close())

	d = openTestDurable(t, dir, Options{ChangesKeep: keepAll})
	t.Cleanup(func() { _ = d.Close() })
	assert.Equal(t, live, exportSorted(d))
	assert.Equal(t, liveStats.Members, d.mem.Stats().Members)
	assert.Equal(t, liveStats.Users, d.mem.Stats().Users)
	assert.Equal(t, liveStats.Groups, d.mem.Stats().Groups)
	changes, _, err := d.Changes(ctx, membership.ChangeOptions{})
	require.NoError(t, err)
	assert.Equal(t, liveChanges, changes)
	assert.Equal(t, int64(5), liveStats.Groups, "ga to ge; gf emptied")
}

// WriteExpiries takes unkeyed expires only, refusing the round whole
// otherwise; on a store shutting down it queues nothing and says so.
func TestWriteExpiriesRefusals(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	d := openTestDurable(t, t.TempDir(), Options{ChangesKeep: keepAll})
	_, err := d.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{storetest.ExpiresAt(1, t0)}})
	require.NoError(t, err)
	rev := d.mem.LatestRevision()
	expire := membership.Write{Op: membership.OpExpire, GroupID: "g", UIDs: []membership.UID{1}, AsOf: t0}
	keyed := expire
	keyed.Idem.Key = "k"
	for _, ws := range [][]membership.Write{
		{expire, {Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{1}}},
		{expire, keyed},
	} {
		_, err := d.WriteExpiries(ctx, ws)
		require.ErrorContains(t, err, "write 1: not an expire without an Idempotency key")
		assert.Equal(t, rev, d.mem.LatestRevision(), "nothing applied")
	}
	require.NoError(t, d.Close())
	results, err := d.WriteExpiries(ctx, []membership.Write{expire})
	require.ErrorContains(t, err, "shutting down")
	assert.Equal(t, []membership.Result{{}}, results)
}

// exportSorted returns d's state with its groups in id order.
func exportSorted(d *Store) *snap.State {
	st := d.mem.Export()
	slices.SortFunc(st.Groups, func(a, b snap.Group) int { return strings.Compare(a.ID, b.ID) })
	return st
}

// A round of more changes than the committer's queue holds (many groups of
// one due at once) is queued a window at a time: it is applied whole, not
// refused as a full queue.
func TestARoundLargerThanTheQueueIsAppliedWhole(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	d := openTestDurable(t, t.TempDir(), Options{})
	t.Cleanup(func() { _ = d.Close() })
	n := maxBatch + roundWindow + 10
	var ws []membership.Write
	for g := range n {
		w := membership.Write{Op: membership.OpAdd, GroupID: "g" + strconv.Itoa(g), Users: []membership.User{storetest.ExpiresAt(1, t0)}}
		_, err := d.Write(ctx, w)
		require.NoError(t, err)
		ws = append(ws, membership.Write{Op: membership.OpExpire, GroupID: w.GroupID, UIDs: []membership.UID{1}, AsOf: t0})
	}
	results, err := d.WriteExpiries(ctx, ws)
	require.NoError(t, err)
	ended := 0
	for _, r := range results {
		ended += r.Count
	}
	assert.Equal(t, n, ended)
	assert.Zero(t, d.ExpiryCount())
	assert.Zero(t, d.mem.Stats().Groups)
}
