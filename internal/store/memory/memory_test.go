package memory

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/internal/store/storetest/directorytest"
	"example.com/groupmembership/internal/store/storetest/expirytest"
	"example.com/groupmembership/internal/store/storetest/memberstest"
	"example.com/groupmembership/internal/store/storetest/nestingtest"
	"example.com/groupmembership/membership"
)

func TestMemory(t *testing.T) {
	memberstest.Contract(t, func(t *testing.T) membership.Store { return New() })
}

func TestMemoryOneShard(t *testing.T) {
	memberstest.Contract(t, func(t *testing.T) membership.Store {
		return NewWith(Options{Shards: 1, ChangesKeep: membership.DefaultChangesKeep})
	})
}

// Memory follows the memberships: users removed from every group leave no
// nickname behind, so that rounds of users added with long nicknames and
// removed again leave the memory where it was.
func TestNicknamesFollowTheMemberships(t *testing.T) {
	ctx := context.Background()
	m := New()
	nick := strings.Repeat("n", 250)
	for round := range 3 {
		var us []membership.User
		var uids []membership.UID
		for i := range 3500 {
			uid := membership.UID(round*10000 + i + 1)
			us = append(us, membership.User{UID: uid, Nickname: nick, HasNickname: true})
			uids = append(uids, uid)
		}
		_, err := storetest.Add(ctx, m, "g", us)
		require.NoError(t, err)
		_, err = storetest.Remove(ctx, m, "g", uids)
		require.NoError(t, err)
	}
	assert.Empty(t, m.nicknames.Export())
	assert.Zero(t, m.nicknames.Count())
	assert.Zero(t, m.reverse.Users())
}

// Each in-memory store has its own epoch: a restart of the service starts
// its revisions again, in another epoch.
func TestMemoryEpochs(t *testing.T) {
	a, b := New(), New()
	assert.NotZero(t, a.Epoch())
	assert.NotEqual(t, a.Epoch(), b.Epoch())
	assert.Equal(t, uint64(42), NewWith(Options{ChangesKeep: keepAll, Epoch: 42}).Epoch())
}

// A snapshot written before users in no group were forgotten may hold their
// nicknames: loading it forgets them, so that memory follows the
// memberships and the lists agree with what a Follower knows.
func TestLoadingForgetsTheNicknamesOfUsersInNoGroup(t *testing.T) {
	st := &snap.State{
		LastRevision: 2,
		Nicknames:    map[membership.UID]string{1: "Eve", 2: "Bo"},
		Groups:       []snap.Group{{ID: "g", Revision: 2, UIDs: []membership.UID{2}}},
	}
	m := New()
	m.Import(st)
	assert.Equal(t, map[membership.UID]string{2: "Bo"}, m.nicknames.Export())
	_, err := storetest.Add(context.Background(), m, "h", []membership.User{{UID: 1}})
	require.NoError(t, err)
	got, _ := storetest.ListAll(t, m, "h")
	assert.Equal(t, []membership.Member{{UID: 1}}, got)
}

// keepAll is the feed's default size, for tests that read the feed.
const keepAll = membership.DefaultChangesKeep

func TestMemoryExpiries(t *testing.T) {
	expirytest.Contract(t, func(t *testing.T) store.Expiring { return New() })
}

func TestNestingContract(t *testing.T) {
	nestingtest.Contract(t, func(t *testing.T) store.Expiring { return New() })
}

func TestDirectoryContract(t *testing.T) {
	directorytest.Contract(t, func(t *testing.T) directorytest.Store { return New() })
}
