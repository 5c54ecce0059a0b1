package postgres

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/expiry"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/postgres/internal/pgtest"
)

// nestedOf lists all of group's subgroups (or parents) as s gives them,
// with the revision it answered at.
func nestedOf(t *testing.T, s membership.Store, group string, parents, transitive bool) ([]membership.Nested, membership.Revision) {
	t.Helper()
	read := s.Subgroups
	if parents {
		read = s.Parents
	}
	list := []membership.Nested{}
	rev, err := read(context.Background(), group, membership.NestingListOptions{Transitive: transitive}, func(total int, gs iter.Seq[membership.Nested]) {
		for g := range gs {
			list = append(list, g)
		}
		assert.Equal(t, total, len(list), "group %s: the total is what is listed", group)
	})
	require.NoError(t, err)
	return list, rev
}

// nestWrite returns the write that nests children in parent, bounded by
// most (0: no bound).
func nestWrite(parent string, most int, children ...string) membership.Write {
	w := membership.Write{Op: membership.OpAddGroups, GroupID: parent, MaxDepth: most}
	for _, c := range children {
		w.Subgroups = append(w.Subgroups, sub(c))
	}
	return w
}

// nestingView is all a store shows of some groups' nestings, transitive
// reads included, and its feed.
type nestingView struct {
	Subgroups, Parents, Below, Above map[string][]membership.Nested
	Revisions                        map[string]membership.Revision
	Transitive                       map[string][]membership.Member
	Feed                             []membership.Change
}

func nestingViewOf(t *testing.T, s membership.Store, groups []string) nestingView {
	t.Helper()
	ctx := context.Background()
	v := nestingView{Subgroups: map[string][]membership.Nested{}, Parents: map[string][]membership.Nested{},
		Below: map[string][]membership.Nested{}, Above: map[string][]membership.Nested{},
		Revisions: map[string]membership.Revision{}, Transitive: map[string][]membership.Member{},
		Feed: storetest.Untimed(t, storetest.AllChanges(t, s, 0), time.Time{})}
	for _, g := range groups {
		v.Subgroups[g], _ = nestedOf(t, s, g, false, false)
		v.Parents[g], _ = nestedOf(t, s, g, true, false)
		v.Below[g], _ = nestedOf(t, s, g, false, true)
		v.Above[g], _ = nestedOf(t, s, g, true, true)
		rev, err := s.Revision(ctx, g)
		require.NoError(t, err)
		v.Revisions[g] = rev
		members := []membership.Member{}
		_, err = s.ListTransitiveMembers(ctx, g, membership.ListOptions{}, func(total int, ms iter.Seq[membership.Member]) {
			for m := range ms {
				members = append(members, m)
			}
			assert.Equal(t, total, len(members), "group %s", g)
		})
		require.NoError(t, err)
		v.Transitive[g] = members
	}
	return v
}

// Two instances racing to nest a in b and b in a: exactly one write wins,
// the other is refused with CodeCycle naming the path, and every instance,
// and one started afterwards from the log, shows the winner's nesting
// alone, with one change for it in one feed. Rounds of three writers
// closing a cycle of three refuse exactly one, too.
func TestOneOfTwoCrossedNestingsWinsOnEveryInstance(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	stores := []*Store{a, b}
	const rounds = 40
	var groups []string
	wins := 0
	for round := range rounds {
		// Even rounds race two writes, odd rounds three, each closing a
		// cycle with the others.
		ring := []string{fmt.Sprintf("r%d-a", round), fmt.Sprintf("r%d-b", round)}
		if round%2 == 1 {
			ring = append(ring, fmt.Sprintf("r%d-c", round))
		}
		groups = append(groups, ring...)
		writes := make([]membership.Write, len(ring))
		for i := range ring {
			// ring[i+1] into ring[i]: together, a cycle.
			writes[i] = nestWrite(ring[i], membership.DefaultMaxDepth, ring[(i+1)%len(ring)])
		}
		results := make([]membership.Result, len(writes))
		errs := make([]error, len(writes))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range writes {
			wg.Go(func() {
				<-start
				s := stores[(i+round)%2]
				if batched(round, i) {
					var res membership.BatchResult
					res, errs[i] = s.Batch(ctx, membership.Batch{MaxDepth: writes[i].MaxDepth, Writes: []membership.Write{writes[i]}})
					if errs[i] == nil {
						results[i] = res.Results[0]
					}
					return
				}
				results[i], errs[i] = s.Write(ctx, writes[i])
			})
		}
		close(start)
		wg.Wait()
		refused := -1
		var latest membership.Revision
		for i, err := range errs {
			if err != nil {
				assert.Equal(t, -1, refused, "round %d: writers %d and %d both refused", round, refused, i)
				refused = i
				// The path runs from the child down to the parent,
				// round the rest of the ring.
				var path []string
				for k := 1; k <= len(ring); k++ {
					path = append(path, ring[(i+k)%len(ring)])
				}
				var want error = membership.CycleError(ring[i], ring[(i+1)%len(ring)], path)
				if batched(round, i) {
					want = membership.BatchElementError(0, ring[i], want)
				}
				assert.Equal(t, membership.CodeCycle, membership.ErrorCode(err), "round %d, writer %d: %v", round, i, err)
				assert.Equal(t, membership.ErrorMessage(want), membership.ErrorMessage(err), "round %d, writer %d", round, i)
				continue
			}
			wins++
			assert.Equal(t, 1, results[i].Count, "round %d, writer %d", round, i)
			latest = max(latest, results[i].Revision)
		}
		require.NotEqual(t, -1, refused, "round %d: every write won, a cycle was made", round)
		for _, s := range stores {
			untilApplied(t, s, latest)
		}
		// Every instance shows the same nestings: the winners' alone.
		want := map[string][]membership.Nested{}
		for i, w := range writes {
			want[w.GroupID] = []membership.Nested{}
			if i != refused {
				want[w.GroupID] = []membership.Nested{{GroupID: w.Subgroups[0].GroupID}}
			}
		}
		for si, s := range stores {
			for g, subs := range want {
				got, _ := nestedOf(t, s, g, false, false)
				assert.Equal(t, subs, got, "round %d, instance %d, group %s", round, si, g)
			}
		}
	}
	c := openOn(t, url, membership.DefaultChangesKeep) // from the log alone
	view := nestingViewOf(t, a, groups)
	assert.Equal(t, view, nestingViewOf(t, b, groups), "one state, one feed")
	assert.Equal(t, view, nestingViewOf(t, c, groups), "the log replays to the same state")
	nestings := 0
	for _, ch := range view.Feed {
		if ch.Op == membership.OpBatch && len(ch.Changes) == 1 {
			ch = ch.Changes[0]
		}
		if ch.Op == membership.OpAddGroups {
			nestings++
		}
	}
	assert.Equal(t, wins, nestings, "a change for each win, none for a refusal")
	assert.Equal(t, rounds*2+rounds/2, logRowsOf(t, a, 8)+logRowsOf(t, a, opBatch), "every write took a row, the refused ones too")
	assert.Equal(t, rounds/4, logRowsOf(t, a, opBatch))
}

// batched says whether writer i of a round of the crossed nestings sends
// its nesting as a batch: a batch's nesting races too.
func batched(round, i int) bool { return round%4 == 2 && i == 0 }

// logRowsOf counts the rows of the log of op.
func logRowsOf(t *testing.T, s *Store, op int16) int {
	t.Helper()
	var n int
	require.NoError(t, s.pool.QueryRow(context.Background(), "SELECT count(*) FROM membership_changes WHERE op = $1", op).Scan(&n))
	return n
}

// A nesting write is checked against the bound its writer set, which its
// row keeps: another instance, and one that replays the log, refuse the
// same writes, whatever bound they would set themselves.
func TestTheBoundOnDepthIsTheRows(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	_, err := a.Write(ctx, nestWrite("top", 0, "mid")) // no bound
	require.NoError(t, err)
	_, err = b.Write(ctx, nestWrite("mid", 1, "low")) // top > mid > low: 2 deep
	assert.Equal(t, membership.CodeTooDeep, membership.ErrorCode(err), "%v", err)
	res, err := b.Write(ctx, nestWrite("mid", 2, "low"))
	require.NoError(t, err)
	_, err = a.Batch(ctx, membership.Batch{MaxDepth: 2, Writes: []membership.Write{
		{Op: membership.OpAdd, GroupID: "x", Users: storetest.UsersOf(1)},
		nestWrite("low", 0, "bottom"), // 3 deep: refused whole
	}})
	assert.Equal(t, membership.CodeTooDeep, membership.ErrorCode(err), "%v", err)
	untilApplied(t, a, res.Revision)
	groups := []string{"top", "mid", "low", "bottom", "x"}
	want := nestingViewOf(t, a, groups)
	assert.Equal(t, []membership.Nested{{GroupID: "low"}, {GroupID: "mid"}}, want.Below["top"])
	assert.Equal(t, []membership.Member{}, want.Transitive["x"], "the refused batch applied nothing")
	assert.Equal(t, want, nestingViewOf(t, b, groups))
	c := openOn(t, url, membership.DefaultChangesKeep)
	assert.Equal(t, want, nestingViewOf(t, c, groups), "a replay refuses what was refused")
	var depths []*int32
	rows, err := a.pool.Query(ctx, "SELECT max_depth FROM membership_changes ORDER BY pos")
	require.NoError(t, err)
	for rows.Next() {
		var d *int32
		require.NoError(t, rows.Scan(&d))
		depths = append(depths, d)
	}
	require.NoError(t, rows.Err())
	one, two := int32(1), int32(2)
	assert.Equal(t, []*int32{nil, &one, &two, &two}, depths)
}

// A precondition counts a group's subgroups beside its members, on the
// instance that answers it and in the log alike; deleting a group that
// has no members but is nested, or holds subgroups, is a change.
func TestPreconditionsCountSubgroups(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	res, err := a.Write(ctx, nestWrite("p", 0, "c"))
	require.NoError(t, err)
	untilApplied(t, b, res.Revision)
	for _, s := range []*Store{a, b} {
		_, err = s.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "p", Users: storetest.UsersOf(1), If: membership.Precondition{Empty: true}})
		assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err), "p has a subgroup: %v", err)
		_, err = s.Write(ctx, membership.Write{Op: membership.OpRemove, GroupID: "c", UIDs: []membership.UID{1}, If: membership.Precondition{Exists: true}})
		assert.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err), "c has neither: %v", err)
	}
	res, err = b.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "p", Users: storetest.UsersOf(2), If: membership.Precondition{Exists: true}})
	require.NoError(t, err, "p has a subgroup")
	del, err := b.Write(ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: "c"})
	require.NoError(t, err)
	assert.Greater(t, del.Revision, res.Revision, "deleting c took it out of p: a change")
	untilApplied(t, a, del.Revision)
	for _, s := range []*Store{a, b} {
		got, rev := nestedOf(t, s, "p", false, false)
		assert.Equal(t, []membership.Nested{}, got)
		r, err := s.Revision(ctx, "p")
		require.NoError(t, err)
		assert.Equal(t, del.Revision, r, "p's revision moved with its subgroups")
		assert.GreaterOrEqual(t, rev, del.Revision)
	}
}

// Nesting writes, batches and deletions on two instances at once leave
// both, and one started afterwards, with one state: nestings, transitive
// reads, revisions and feed.
func TestTwoInstancesAgreeOnNestings(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	groups := []string{"g0", "g1", "g2", "g3", "g4", "g5"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var latest membership.Revision
	refusals := map[membership.Code]int{}
	for w := range 4 {
		s := []*Store{a, b}[w%2]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			for range 40 {
				gi := rng.IntN(len(groups))
				g := groups[gi]
				other := groups[(gi+1+rng.IntN(len(groups)-1))%len(groups)] // not g
				oi := (gi + 1 + rng.IntN(len(groups)-1)) % len(groups)
				var rev membership.Revision
				var err error
				switch rng.IntN(6) {
				case 0, 1:
					var res membership.Result
					res, err = s.Write(ctx, nestWrite(g, 3, other))
					rev = res.Revision
				case 2:
					var res membership.Result
					res, err = s.Write(ctx, membership.Write{Op: membership.OpRemoveGroups, GroupID: g, Subgroups: []membership.Subgroup{sub(other)}})
					rev = res.Revision
				case 3:
					var res membership.Result
					res, err = s.Write(ctx, membership.Write{Op: membership.OpReplaceGroups, GroupID: g, MaxDepth: 3,
						Subgroups: []membership.Subgroup{subUntil(other, ahead())}})
					rev = res.Revision
				case 4:
					var res membership.BatchResult
					res, err = s.Batch(ctx, membership.Batch{MaxDepth: 3, Writes: []membership.Write{
						{Op: membership.OpAdd, GroupID: g, Users: storetest.UsersOf(membership.UID(1 + rng.IntN(5)))},
						nestWrite(groups[oi], 0, g),
					}})
					rev = res.Revision
				case 5:
					var res membership.Result
					res, err = s.Write(ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: g})
					rev = res.Revision
				}
				mu.Lock()
				if err != nil {
					refusals[membership.ErrorCode(err)]++
				}
				latest = max(latest, rev)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for code := range refusals {
		assert.Contains(t, []membership.Code{membership.CodeCycle, membership.CodeTooDeep}, code, "refusals: %v", refusals)
	}
	t.Logf("refusals: %v", refusals)
	untilApplied(t, a, latest)
	untilApplied(t, b, latest)
	want := nestingViewOf(t, a, groups)
	assert.Equal(t, want, nestingViewOf(t, b, groups))
	c := openOn(t, url, membership.DefaultChangesKeep)
	assert.Equal(t, want, nestingViewOf(t, c, groups))
}

// Nestings that end by themselves end once, whichever instances' expirers
// find them due: the second instance's rows change nothing and take no
// revision, and every instance, and one that replays the log, shows the
// same nestings and feed.
func TestTwoExpirersEndEachNestingOnce(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	t0 := ahead()
	const parents = 4
	var last membership.Revision
	var groups []string
	for i := range parents {
		p := fmt.Sprint("p", i)
		groups = append(groups, p, p+"-ends", p+"-stays", p+"-later")
		res, err := []*Store{a, b}[i%2].Write(ctx, membership.Write{Op: membership.OpAddGroups, GroupID: p, MaxDepth: 2,
			Subgroups: []membership.Subgroup{subUntil(p+"-ends", t0), sub(p + "-stays"), subUntil(p+"-later", t0.Add(time.Hour))}})
		require.NoError(t, err)
		last = max(last, res.Revision)
	}
	untilApplied(t, a, last)
	untilApplied(t, b, last)
	nestingDue := func(s *Store) []membership.Write {
		var ws []membership.Write
		for _, d := range s.DueExpiries(t0, 1<<20) {
			if d.Write.Op == membership.OpExpireGroups {
				ws = append(ws, d.Write)
			}
		}
		return ws
	}
	dueA, dueB := nestingDue(a), nestingDue(b)
	require.Len(t, dueA, parents)
	require.Equal(t, dueA, dueB, "both found the same due")
	before := latestOf(t, a)
	for _, w := range dueA {
		res, err := a.Write(ctx, w)
		require.NoError(t, err)
		assert.Equal(t, 1, res.Count, w.GroupID)
	}
	for _, w := range dueB {
		res, err := b.Write(ctx, w)
		require.NoError(t, err)
		assert.Zero(t, res.Count, "%s: ended already", w.GroupID)
	}
	assert.Equal(t, before+parents, latestOf(t, b), "the second rows took no revision")
	assert.Equal(t, 2*parents, logRowsOf(t, a, opExpireGroups), "both instances' rows are in the log")
	want := nestingViewOf(t, a, groups)
	for i := range parents {
		p := fmt.Sprint("p", i)
		assert.Equal(t, []membership.Nested{{GroupID: p + "-later", Expires: t0.Add(time.Hour)}, {GroupID: p + "-stays"}}, want.Subgroups[p])
	}
	expires := 0
	for _, ch := range want.Feed {
		if ch.Op == membership.OpExpireGroups {
			expires++
			if assert.Len(t, ch.Groups, 1) {
				assert.Equal(t, ch.GroupID+"-ends", ch.Groups[0].GroupID)
			}
		}
	}
	assert.Equal(t, parents, expires, "one expire change per parent")
	assert.Equal(t, want, nestingViewOf(t, b, groups))
	c := openOn(t, url, membership.DefaultChangesKeep)
	assert.Equal(t, want, nestingViewOf(t, c, groups), "a replay ends them alike")
}

// Every nesting op, with and without a precondition, answers as the
// memory store does, which every instance applies the log to: results,
// errors (a cycle, a chain too deep, a failed precondition that counts
// subgroups), nestings and feed. Only a precondition that fails here for
// sure is answered without a row.
func TestEveryNestingOpAnswersAsMemoryDoes(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, membership.DefaultChangesKeep)
	mem := memory.New()
	rev := func(g string) membership.Revision {
		r, err := mem.Revision(ctx, g)
		require.NoError(t, err)
		return r
	}
	later := ahead()
	var stale membership.Revision
	tests := []opCase{
		{"nest a and b in p", func() membership.Write { return nestWrite("p", 2, "a", "b") }, true},
		{"nest c in a: 2 deep", func() membership.Write { stale = rev("p"); return nestWrite("a", 2, "c") }, true},
		{"nest d in c: 3 deep, too deep", func() membership.Write { return nestWrite("c", 2, "d") }, true},
		{"nest p in c: a cycle", func() membership.Write { return nestWrite("c", 2, "p") }, true},
		{"nest e in p If-Match: * (p has subgroups only)", func() membership.Write {
			w := nestWrite("p", 2, "e")
			w.If.Exists = true
			return w
		}, true},
		{"add to p If-None-Match: * (p has subgroups only)", func() membership.Write {
			return membership.Write{Op: membership.OpAdd, GroupID: "p", Users: storetest.UsersOf(1), If: membership.Precondition{Empty: true}}
		}, false},
		{"remove from c If-Match: * (c has a parent only)", func() membership.Write {
			return membership.Write{Op: membership.OpRemove, GroupID: "c", UIDs: []membership.UID{1}, If: membership.Precondition{Exists: true}}
		}, false},
		{"add to e", func() membership.Write {
			return membership.Write{Op: membership.OpAdd, GroupID: "e", Users: []membership.User{storetest.ExpiresAt(2, later), {UID: 3}}}
		}, true},
		{"replace p's subgroups with a stale If-Match: fails for good, here", func() membership.Write {
			return membership.Write{Op: membership.OpReplaceGroups, GroupID: "p", If: membership.Precondition{Revisions: []membership.Revision{stale}}}
		}, false},
		{"remove b from p with the current If-Match", func() membership.Write {
			return membership.Write{Op: membership.OpRemoveGroups, GroupID: "p", Subgroups: []membership.Subgroup{sub("b"), sub("x")},
				If: membership.Precondition{Revisions: []membership.Revision{rev("p")}}}
		}, true},
		{"replace a's subgroups, with an expiry", func() membership.Write {
			return membership.Write{Op: membership.OpReplaceGroups, GroupID: "a", MaxDepth: 2, Subgroups: []membership.Subgroup{subUntil("d", later), sub("c")}}
		}, true},
		{"nest again with the expiry made permanent", func() membership.Write {
			return membership.Write{Op: membership.OpAddGroups, GroupID: "a", MaxDepth: 2, Subgroups: []membership.Subgroup{subUntil("d", time.Time{})}}
		}, true},
		{"remove nothing", func() membership.Write {
			return membership.Write{Op: membership.OpRemoveGroups, GroupID: "q"}
		}, true},
		{"delete d, which has only a parent", func() membership.Write {
			return membership.Write{Op: membership.OpDeleteGroup, GroupID: "d"}
		}, true},
		{"delete a, which has subgroups and a parent, If-Match: *", func() membership.Write {
			return membership.Write{Op: membership.OpDeleteGroup, GroupID: "a", If: membership.Precondition{Exists: true}}
		}, true},
		{"delete a again: nothing left", func() membership.Write {
			return membership.Write{Op: membership.OpDeleteGroup, GroupID: "a"}
		}, false},
	}
	answerAsMemory(t, s, mem, tests, "")
	groups := []string{"p", "a", "b", "c", "d", "e", "q", "x"}
	uids := []membership.UID{1, 2, 3}
	want := snapshotOf(t, mem, groups, uids)
	assert.Equal(t, want, snapshotOf(t, s, groups, uids))
	wantNest := nestingViewOf(t, mem, groups)
	assert.Equal(t, wantNest, nestingViewOf(t, s, groups))
	assert.Equal(t, []membership.Nested{{GroupID: "e"}}, wantNest.Subgroups["p"], "the script does what it says")
	assert.Equal(t, []membership.Member{{UID: 2, Expires: later}, {UID: 3}}, wantNest.Transitive["p"], "the script does what it says")
}

// A keyed nesting write retried on another instance is a replay there,
// and the key with another request is refused on either.
func TestAKeyedNestingRetriedOnAnotherInstanceIsAReplay(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	keyed := func(w membership.Write, key string) membership.Write {
		w.Idem = membership.Idempotency{Key: key, Fingerprint: membership.FingerprintWrite(w)}
		return w
	}
	w := keyed(nestWrite("p", 2, "a", "b"), "k1")
	first, err := a.Write(ctx, w)
	require.NoError(t, err)
	require.Equal(t, 2, first.Count)
	again, err := b.Write(ctx, w)
	require.NoError(t, err)
	assert.True(t, again.Replayed)
	again.Replayed = false
	assert.Equal(t, first, again)
	_, err = b.Write(ctx, keyed(nestWrite("p", 2, "c"), "k1"))
	assert.Equal(t, membership.CodeIdempotencyKeyReused, membership.ErrorCode(err), "%v", err)
	got, _ := nestedOf(t, b, "p", false, false)
	assert.Equal(t, []membership.Nested{{GroupID: "a"}, {GroupID: "b"}}, got)
	assert.Equal(t, first.Revision, latestOf(t, b), "the replay and the refusal took no revision")
}

// A nesting row that cannot be applied as written (the database's checks
// dropped) stops the instance rather than be applied otherwise.
func TestANestingRowThatCannotBeReadStopsTheInstance(t *testing.T) {
	ctx := context.Background()
	a := openTest(t, membership.DefaultChangesKeep)
	res, err := a.Write(ctx, nestWrite("p", 2, "a"))
	require.NoError(t, err)
	_, err = a.pool.Exec(ctx, "ALTER TABLE membership_changes DROP CONSTRAINT membership_changes_subgroup_expiries_check")
	require.NoError(t, err)
	_, err = a.pool.Exec(ctx, "INSERT INTO membership_changes (ticket, op, group_id, uids, subgroups, subgroup_expiries) VALUES (1, 8, 'p', '{}', '{b}', '{5,6}')")
	require.NoError(t, err)
	a.kickSequencer()
	untilWritable(t, a, false)
	assert.Contains(t, a.Writable().Error(), "2 subgroup expiries for 1 subgroups")
	assert.Equal(t, res.Revision, latestOf(t, a), "nothing more applied")
	got, _ := nestedOf(t, a, "p", false, false)
	assert.Equal(t, []membership.Nested{{GroupID: "a"}}, got)
}

// Both instances' expirers, run at once on their own clocks, end each
// nesting once: one expire_groups change per parent, on every instance.
func TestTwoExpirersRacingEndEachNestingOnce(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	t0 := ahead()
	const parents = 6
	var last membership.Revision
	var groups []string
	for i := range parents {
		p := fmt.Sprint("p", i)
		groups = append(groups, p)
		res, err := []*Store{a, b}[i%2].Write(ctx, membership.Write{Op: membership.OpAddGroups, GroupID: p,
			Subgroups: []membership.Subgroup{subUntil(p+"-x", t0), subUntil(p+"-y", t0), sub(p + "-z")}})
		require.NoError(t, err)
		last = max(last, res.Revision)
	}
	untilApplied(t, a, last)
	untilApplied(t, b, last)
	clockA, clockB := storetest.NewClock(t0), storetest.NewClock(t0)
	ended := raceExpirers(t, 5, expiry.New(a, clockA.Now, nil), expiry.New(b, clockB.Now, nil))
	assert.Equal(t, 2*parents, ended, "each nesting ended once, by either instance")
	settle(t, a, b)
	settle(t, b, a)
	want := nestingViewOf(t, a, groups)
	expires := 0
	for _, ch := range want.Feed {
		if ch.Op == membership.OpExpireGroups {
			expires++
			if assert.Len(t, ch.Groups, 2) {
				assert.Equal(t, []string{ch.GroupID + "-x", ch.GroupID + "-y"}, []string{ch.Groups[0].GroupID, ch.Groups[1].GroupID})
			}
		}
	}
	assert.Equal(t, parents, expires, "one expire change per parent")
	for _, p := range groups {
		assert.Equal(t, []membership.Nested{{GroupID: p + "-z"}}, want.Subgroups[p], p)
	}
	assert.Equal(t, want, nestingViewOf(t, b, groups))
}
