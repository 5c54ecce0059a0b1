package memberstest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// testPrincipals checks that every change carries the principal its
// write or batch named, beside its actor, and that an Idempotency-Key is
// its principal's own.
func testPrincipals(t *testing.T, newStore func(t *testing.T) membership.Store) {
	storetest.Run(t, newStore, []storetest.Case[membership.Store]{
		{Name: "every change carries its principal", Test: func(t *testing.T, ctx context.Context, s membership.Store) {
			p := WritePrincipals(t, s)
			CheckPrincipals(t, s, p, true)
			// What changes nothing records nothing, principal or not.
			before := storetest.Latest(t, s)
			storetest.MustWrite(t, s, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 3}}, Principal: "ops"})
			assert.Equal(t, before, storetest.Latest(t, s))
		}},
		{Name: "an Idempotency-Key is its principal's", Test: func(t *testing.T, ctx context.Context, s membership.Store) {
			add := func(principal string, uids ...membership.UID) membership.Write {
				return storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: storetest.UsersOf(uids...), Principal: principal}, "k")
			}
			first := storetest.MustWrite(t, s, add("sync-job", 1))
			same, err := s.Write(ctx, add("dashboard", 1))
			require.NoError(t, err, "the same request and key from another principal")
			assert.False(t, same.Replayed, "is its own request, not a replay of another principal's")
			assert.Equal(t, 0, same.Count, "applied: user 1 was a member already")
			other, err := s.Write(ctx, add("ops", 2))
			require.NoError(t, err, "another request with the key, from a third principal: not a 422")
			assert.False(t, other.Replayed)
			assert.Equal(t, 1, other.Count)
			none, err := s.Write(ctx, add("", 3))
			require.NoError(t, err, "and from no principal")
			assert.Equal(t, 1, none.Count)

			again := storetest.MustWrite(t, s, add("sync-job", 1))
			assert.True(t, again.Replayed)
			again.Replayed = false
			assert.Equal(t, first, again, "sync-job's own first result")
			_, err = s.Write(ctx, add("ops", 9))
			assert.Equal(t, membership.CodeIdempotencyKeyReused, membership.ErrorCode(err), "within one principal, the key names its request")

			b := storetest.KeyedBatch(membership.Batch{Principal: "dashboard", Writes: []membership.Write{{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{1}}}}, "b")
			firstBatch := storetest.MustBatch(t, s, b)
			b.Principal = "ops"
			otherBatch, err := s.Batch(ctx, b)
			require.NoError(t, err, "a batch's key is its principal's too")
			assert.False(t, otherBatch.Replayed)
			assert.Equal(t, 0, otherBatch.Results[0].Count, "applied: user 1 was gone already")
			b.Principal = "dashboard"
			againBatch := storetest.MustBatch(t, s, b)
			assert.True(t, againBatch.Replayed)
			assert.Equal(t, firstBatch.Revision, againBatch.Revision)
		}},
	})
}

// Principals is what WritePrincipals wrote: each change's principal, in
// order from the revision after After, and its keyed requests with their
// first results.
type Principals struct {
	After      membership.Revision
	principals []string
	writes     []keyedWrite
	batch      membership.Batch
	batchRes   membership.BatchResult
}

// keyedWrite is a keyed write and its first result.
type keyedWrite struct {
	w   membership.Write
	res membership.Result
}

// WritePrincipals writes to s changes of three principals and of none,
// among them a write of each principal with the key "k" (each its own
// request, each applied) and a batch of a principal with that key, and
// returns what CheckPrincipals checks.
func WritePrincipals(t *testing.T, s membership.Store) *Principals {
	t.Helper()
	ctx := context.Background()
	p := &Principals{After: storetest.Latest(t, s)}
	writes := []membership.Write{
		{Op: membership.OpAdd, GroupID: "g", Users: storetest.UsersOf(1, 2), Actor: 7, Principal: "sync-job"},
		storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: storetest.UsersOf(3), Principal: "sync-job"}, "k"),
		storetest.Keyed(membership.Write{Op: membership.OpAdd, GroupID: "g", Users: storetest.UsersOf(3, 4), Principal: "dashboard"}, "k"),
		storetest.Keyed(membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{4}}, "k"),
		{Op: membership.OpReplace, GroupID: "h", Users: storetest.UsersOf(5), Principal: "dashboard"},
		{Op: membership.OpRemoveUser, UIDs: []membership.UID{2}, Principal: "ops@team-a"},
		{Op: membership.OpDeleteGroup, GroupID: "h", Actor: 8, Principal: "ops@team-a"},
	}
	for _, w := range writes {
		res, err := s.Write(ctx, w)
		require.NoError(t, err, "%s of %q", w.Op, w.Principal)
		require.False(t, res.Replayed, "%s of %q: a request of its own", w.Op, w.Principal)
		p.principals = append(p.principals, w.Principal)
		if w.Idem.Key != "" {
			p.writes = append(p.writes, keyedWrite{w, res})
		}
	}
	p.batch = storetest.KeyedBatch(membership.Batch{Actor: 9, Principal: "ops@team-a", Writes: []membership.Write{
		{Op: membership.OpAdd, GroupID: "i", Users: storetest.UsersOf(6)}, {Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{1}}}}, "k")
	var err error
	p.batchRes, err = s.Batch(ctx, p.batch)
	require.NoError(t, err)
	require.False(t, p.batchRes.Replayed)
	p.principals = append(p.principals, p.batch.Principal)
	return p
}

// CheckPrincipals checks that s holds what WritePrincipals wrote: with
// feed, the changes, each with its principal; and each principal's key,
// whose repeat gets that principal's first result, changing nothing, while
// another principal's request with the key is its own, applied (so a
// second check of s applies one more).
func CheckPrincipals(t *testing.T, s membership.Store, p *Principals, feed bool) {
	t.Helper()
	ctx := context.Background()
	if feed {
		changes := storetest.AllChanges(t, s, p.After)
		require.Len(t, changes, len(p.principals))
		for i, c := range changes {
			assert.Equal(t, p.principals[i], c.Principal, "change %d (%s)", c.Revision, c.Op)
			if c.Op == membership.OpBatch {
				for _, sub := range c.Changes {
					assert.Empty(t, sub.Principal, "a batch's changes share its principal")
				}
			}
		}
	}
	latest := latestRevision(t, s)
	for _, kw := range p.writes {
		again, err := s.Write(ctx, kw.w)
		require.NoError(t, err, "a repeat of %q's key", kw.w.Principal)
		assert.True(t, again.Replayed, "a repeat of %q's key", kw.w.Principal)
		again.Replayed = false
		assert.Equal(t, kw.res, again, "%q's own first result", kw.w.Principal)
	}
	again := storetest.MustBatch(t, s, p.batch)
	assert.True(t, again.Replayed, "a repeat of the batch's key")
	assert.Equal(t, p.batchRes.Revision, again.Revision)
	assert.Equal(t, latest, latestRevision(t, s), "the repeats changed nothing")

	late := p.writes[0].w
	late.Principal = fmt.Sprint("late-", time.Now().UnixNano()) // a principal new to s, each time
	res, err := s.Write(ctx, late)
	require.NoError(t, err, "another principal's request with the key")
	assert.False(t, res.Replayed, "is applied as its own")
}

// latestRevision returns s's latest revision, also when its feed keeps no
// change (a store restored from a backup).
func latestRevision(t *testing.T, s membership.Store) membership.Revision {
	t.Helper()
	_, last, err := s.Changes(context.Background(), membership.ChangeOptions{})
	if err != nil {
		require.Equal(t, membership.CodeChangesGone, membership.ErrorCode(err), "%v", err)
	}
	return last
}
