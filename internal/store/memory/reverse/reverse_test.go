package reverse

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"example.com/groupmembership/membership"
)

func TestAUsersRevisionIsOfItsLatestChange(t *testing.T) {
	x := New(4)
	lock := func(uids ...membership.UID) func(membership.Revision) {
		set := x.Lock(slices.Values(uids), nil)
		return func(rev membership.Revision) { x.UnlockAt(set, rev) }
	}
	rev := func(uid membership.UID) membership.Revision {
		x.RLock(uid)
		defer x.RUnlock(uid)
		return x.UserRevision(uid)
	}
	unlock := lock(1, 2)
	x.Add(1, 7)
	x.Add(2, 7)
	unlock(3)
	assert.Equal(t, []membership.Revision{3, 3, 0}, []membership.Revision{rev(1), rev(2), rev(3)})

	unlock = lock(1, 2, 3)
	x.Remove(1, 7)
	x.Touch(3) // a nickname, say
	unlock(4)
	assert.Equal(t, []membership.Revision{4, 3, 4}, []membership.Revision{rev(1), rev(2), rev(3)})
	groupsRev := func(uid membership.UID) membership.Revision {
		x.RLock(uid)
		defer x.RUnlock(uid)
		return x.GroupsRevision(uid)
	}
	assert.Equal(t, []membership.Revision{4, 3, 0}, []membership.Revision{groupsRev(1), groupsRev(2), groupsRev(3)}, "3's groups did not change")

	set := x.Lock(slices.Values([]membership.UID{2}), nil)
	x.Unlock(set) // a change that changed nothing
	assert.Equal(t, membership.Revision(3), rev(2))

	inNoGroup, set := x.RemoveRound([][]membership.UID{{2}}, func(int) uint32 { return 7 }, nil)
	x.UnlockAt(set, 5)
	assert.Equal(t, [][]membership.UID{{2}}, inNoGroup)
	assert.Equal(t, []membership.Revision{4, 5, 4}, []membership.Revision{rev(1), rev(2), rev(3)})

	uids := make([]membership.UID, ParallelAdd)
	for i := range uids {
		uids[i] = membership.UID(100 + i)
	}
	unlock = lock(uids...)
	x.AddAll(uids, 8)
	unlock(6)
	assert.Equal(t, membership.Revision(6), rev(100))
	assert.Equal(t, membership.Revision(6), rev(100+ParallelAdd-1))
	assert.Equal(t, membership.Revision(4), rev(1))

	// Uids equal modulo Slots share a revision: 65537 and 1.
	unlock = lock(Slots + 1)
	x.Touch(Slots + 1)
	unlock(7)
	assert.Equal(t, membership.Revision(7), rev(1))
	assert.Equal(t, membership.Revision(5), rev(2))

	x.StampAll(9)
	assert.Equal(t, membership.Revision(9), rev(12345))
	assert.Equal(t, membership.Revision(9), groupsRev(12345))
}

// TestRevisionsFarAboveTheBaseRebaseTheShard checks the revisions kept in
// 32 bits above their shard's base: a change more than 2^32 revisions
// above it gives every slot of the shard its revision (at least that of
// each slot's latest change, at most the latest), and a slot's revision
// never goes below what it was.
func TestRevisionsFarAboveTheBaseRebaseTheShard(t *testing.T) {
	x := New(1)
	change := func(rev membership.Revision, uids ...membership.UID) {
		set := x.Lock(slices.Values(uids), nil)
		for _, uid := range uids {
			x.Add(uid, 1)
		}
		x.UnlockAt(set, rev)
	}
	revs := func(uids ...membership.UID) (user, groups []membership.Revision) {
		for _, uid := range uids {
			x.RLock(uid)
			user, groups = append(user, x.UserRevision(uid)), append(groups, x.GroupsRevision(uid))
			x.RUnlock(uid)
		}
		return user, groups
	}
	x.StampAll(10)
	change(11, 1)
	far := membership.Revision(10 + math.MaxUint32)
	change(far, 2)
	user, groups := revs(1, 2, 3)
	assert.Equal(t, []membership.Revision{11, far, 10}, user, "2^32 - 1 above the base fits")
	assert.Equal(t, []membership.Revision{11, far, 10}, groups)

	change(far+1, 2)
	user, groups = revs(1, 2, 3)
	assert.Equal(t, []membership.Revision{far + 1, far + 1, far + 1}, user, "2^32 above: the shard is rebased")
	assert.Equal(t, []membership.Revision{far + 1, far + 1, far + 1}, groups)
	change(far+2, 3)
	user, _ = revs(1, 2, 3)
	assert.Equal(t, []membership.Revision{far + 1, far + 1, far + 2}, user)

	change(far, 1) // below the base: the base, later, stands
	user, _ = revs(1)
	assert.Equal(t, []membership.Revision{far + 1}, user)
}
