package memberstest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// testIdempotencyKeys checks that a keyed write or batch is applied once
// for its key.
func testIdempotencyKeys(t *testing.T, newStore func(t *testing.T) membership.Store) {
	storetest.Run(t, newStore, []storetest.Case[membership.Store]{
		{Name: "a repeat of a keyed write gets its result and applies nothing", Test: testKeyedRepeat},
		{Name: "every op is applied once for its key", Test: testEveryOpKeyed},
		{Name: "a keyed write that changes nothing is remembered too", Test: testKeyedNoChange},
		{Name: "the same key for another request is refused and changes nothing", Test: testKeyReused},
		{Name: "a repeat of a conditional write that succeeded is a replay, not a failed precondition", Test: testKeyedConditionalReplay},
		{Name: "a write refused leaves its key free", Test: testRefusedKeyFree},
		{Name: "a repeat of a keyed batch gets its results and applies nothing", Test: testKeyedBatchRepeat},
		{Name: "writers racing with one key apply it once", Test: testRacingOneKey},
	})
}

func testKeyedRepeat(t *testing.T, ctx context.Context, s membership.Store) {
	first := storetest.MustWrite(t, s, storetest.Keyed(addWrite("g", 1, 2), "k1"))
	assert.False(t, first.Replayed)
	assert.Equal(t, 2, first.Count)
	storetest.MustWrite(t, s, removeWrite("g", 1)) // another writer, in between
	before := storetest.Latest(t, s)
	again := storetest.MustWrite(t, s, storetest.Keyed(addWrite("g", 1, 2), "k1"))
	assert.True(t, again.Replayed)
	again.Replayed = false
	assert.Equal(t, first, again, "the first result, its revision included")
	assert.Equal(t, before, storetest.Latest(t, s), "a replay takes no revision")
	assert.Equal(t, []membership.UID{2}, memberUIDs(t, s, "g"), "user 1 was not added again")
}

func testEveryOpKeyed(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustWrite(t, s, addWrite("a", 1, 2, 3))
	storetest.MustWrite(t, s, addWrite("b", 3))
	writes := []membership.Write{
		{Op: membership.OpReplace, GroupID: "a", Users: []membership.User{{UID: 1}, {UID: 9}}},
		removeWrite("a", 1),
		{Op: membership.OpRemoveUser, UIDs: []membership.UID{3}},
		{Op: membership.OpDeleteGroup, GroupID: "a"},
	}
	for i, w := range writes {
		key := fmt.Sprintf("op-%d", i)
		first, err := s.Write(ctx, storetest.Keyed(w, key))
		require.NoError(t, err, w.Op)
		storetest.MustWrite(t, s, addWrite("a", 1, 3)) // in between
		before := storetest.Latest(t, s)
		again, err := s.Write(ctx, storetest.Keyed(w, key))
		require.NoError(t, err, w.Op)
		assert.True(t, again.Replayed, w.Op)
		again.Replayed = false
		assert.Equal(t, first, again, w.Op)
		assert.Equal(t, before, storetest.Latest(t, s), "%s: a replay takes no revision", w.Op)
	}
	assert.Equal(t, []membership.UID{1, 3}, memberUIDs(t, s, "a"), "only the adds in between changed a after its deletion")
}

func testKeyedNoChange(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustWrite(t, s, addWrite("g", 1))
	first := storetest.MustWrite(t, s, storetest.Keyed(addWrite("g", 1), "k"))
	assert.Equal(t, 0, first.Count)
	storetest.MustWrite(t, s, removeWrite("g", 1))
	again := storetest.MustWrite(t, s, storetest.Keyed(addWrite("g", 1), "k"))
	assert.True(t, again.Replayed)
	assert.Equal(t, 0, again.Count)
	assert.Equal(t, first.Revision, again.Revision)
	assert.Empty(t, memberUIDs(t, s, "g"), "the repeat added nothing")
}

func testKeyReused(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustWrite(t, s, storetest.Keyed(addWrite("g", 1), "k"))
	before := storetest.Latest(t, s)
	others := []membership.Write{
		addWrite("g", 2),
		addWrite("h", 1),
		removeWrite("g", 1),
		{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1, Nickname: "x", HasNickname: true}}},
		{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}}, Actor: 5},
		{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}}, If: membership.Precondition{Exists: true}},
	}
	for _, w := range others {
		_, err := s.Write(ctx, storetest.Keyed(w, "k"))
		assert.Equal(t, membership.CodeIdempotencyKeyReused, membership.ErrorCode(err), "%+v", w)
	}
	_, err := s.Batch(ctx, storetest.KeyedBatch(membership.Batch{Writes: []membership.Write{addWrite("g", 1)}}, "k"))
	assert.Equal(t, membership.CodeIdempotencyKeyReused, membership.ErrorCode(err), "a batch with a write's key")
	assert.Equal(t, before, storetest.Latest(t, s))
	assert.Equal(t, []membership.UID{1}, memberUIDs(t, s, "g"))
}

func testKeyedConditionalReplay(t *testing.T, ctx context.Context, s membership.Store) {
	res := storetest.MustWrite(t, s, addWrite("g", 1))
	w := addWrite("g", 2)
	w.If.Revisions = []membership.Revision{res.Revision}
	first := storetest.MustWrite(t, s, storetest.Keyed(w, "k"))
	again, err := s.Write(ctx, storetest.Keyed(w, "k"))
	require.NoError(t, err, "the group's revision moved on: only the key can say this is a repeat")
	assert.True(t, again.Replayed)
	assert.Equal(t, first.Revision, again.Revision)
}

func testRefusedKeyFree(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustWrite(t, s, addWrite("g", 1))
	w := addWrite("g", 2)
	w.If.Empty = true
	_, err := s.Write(ctx, storetest.Keyed(w, "k"))
	require.Equal(t, membership.CodePreconditionFailed, membership.ErrorCode(err))
	storetest.MustWrite(t, s, membership.Write{Op: membership.OpDeleteGroup, GroupID: "g"})
	res, err := s.Write(ctx, storetest.Keyed(w, "k"))
	require.NoError(t, err, "the retry is a first attempt: the first changed nothing")
	assert.False(t, res.Replayed)
	assert.Equal(t, 1, res.Count)
	assert.Equal(t, []membership.UID{2}, memberUIDs(t, s, "g"))
}

func testKeyedBatchRepeat(t *testing.T, ctx context.Context, s membership.Store) {
	storetest.MustWrite(t, s, addWrite("a", 1))
	b := storetest.KeyedBatch(membership.Batch{Actor: 4, Writes: []membership.Write{removeWrite("a", 1), addWrite("b", 1)}}, "move")
	first := storetest.MustBatch(t, s, b)
	assert.False(t, first.Replayed)
	storetest.MustWrite(t, s, addWrite("a", 1))
	before := storetest.Latest(t, s)
	again := storetest.MustBatch(t, s, b)
	assert.True(t, again.Replayed)
	again.Replayed = false
	assert.Equal(t, first, again)
	assert.Equal(t, before, storetest.Latest(t, s))
	assert.Equal(t, []membership.UID{1}, memberUIDs(t, s, "a"), "the move was not made again")
	_, err := s.Write(ctx, storetest.Keyed(addWrite("b", 1), "move"))
	assert.Equal(t, membership.CodeIdempotencyKeyReused, membership.ErrorCode(err), "a write with a batch's key")
}

func testRacingOneKey(t *testing.T, ctx context.Context, s membership.Store) {
	before := storetest.Latest(t, s)
	const writers = 16
	results := make([]membership.Result, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			results[i], errs[i] = s.Write(ctx, storetest.Keyed(addWrite("g", 1, 2, 3), "race"))
		})
	}
	wg.Wait()
	applied := 0
	for i := range writers {
		require.NoError(t, errs[i])
		if !results[i].Replayed {
			applied++
		}
		assert.Equal(t, 3, results[i].Count, "every writer gets the first result")
		assert.Equal(t, before+1, results[i].Revision)
	}
	assert.Equal(t, 1, applied, "one writer applied it, the others got its result")
	assert.Equal(t, before+1, storetest.Latest(t, s))
}

// addWrite returns the write that adds the users uids to group.
func addWrite(group string, uids ...membership.UID) membership.Write {
	return membership.Write{Op: membership.OpAdd, GroupID: group, Users: storetest.UsersOf(uids...)}
}

// removeWrite returns the write that removes the users uids from group.
func removeWrite(group string, uids ...membership.UID) membership.Write {
	return membership.Write{Op: membership.OpRemove, GroupID: group, UIDs: uids}
}

// memberUIDs returns the uids of group's members.
func memberUIDs(t *testing.T, s membership.Store, group string) []membership.UID {
	got, _ := storetest.ListAll(t, s, group)
	return storetest.MemberUIDs(got)
}
