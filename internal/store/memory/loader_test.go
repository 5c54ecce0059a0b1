package memory

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory/reverse"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// loaderState has groups whose reverse pairs are narrow (users below 2^32
// in their shard) and wide (uids from 2^40 on), in shards of more pairs
// than a block holds, given by snap.ReadFile in a buffer that each
// group reuses.
func loaderState() (*snap.State, map[membership.UID][]string) {
	rng := rand.New(rand.NewPCG(28, 30))
	st := &snap.State{LastRevision: 100, Nicknames: map[membership.UID]string{}}
	in := map[membership.UID][]string{}
	add := func(id string, uids []membership.UID) {
		slices.Sort(uids)
		uids = slices.Compact(uids)
		st.Groups = append(st.Groups, snap.Group{ID: id, Revision: 1, UIDs: uids})
		for _, uid := range uids {
			in[uid] = append(in[uid], id)
		}
	}
	// More pairs in shard 0 than a block: uids that are multiples of 64.
	dense := make([]membership.UID, reverse.BlockPairs+5000)
	for i := range dense {
		dense[i] = membership.UID(64 * (i + 1))
	}
	add("dense", dense)
	for g := range 60 {
		uids := make([]membership.UID, 1+rng.IntN(800))
		for i := range uids {
			switch rng.IntN(3) {
			case 0:
				uids[i] = membership.UID(64 * (1 + rng.IntN(2000))) // some in dense too
			case 1:
				uids[i] = membership.UID(1 + rng.IntN(5000))
			default:
				uids[i] = membership.UID(1<<40 + rng.IntN(5000)) // wide
			}
		}
		add(fmt.Sprintf("g%02d", g), uids)
	}
	return st, in
}

// A store loaded a group at a time from a snapshot file holds exactly the
// snapshot's memberships, in both indexes, with its counts.
func TestLoaderFromAFileHoldsTheSnapshot(t *testing.T) {
	st, in := loaderState()
	path := filepath.Join(t.TempDir(), "s.snap")
	require.NoError(t, snap.WriteFile(path, st))

	m := New()
	l := m.Loader()
	rest, err := snap.ReadFile(path, l.Group)
	require.NoError(t, err)
	l.Finish(rest)

	members := 0
	for _, g := range st.Groups {
		list, _ := storetest.ListAll(t, m, g.ID)
		uids := make([]membership.UID, len(list))
		for i, mem := range list {
			uids[i] = mem.UID
		}
		assert.True(t, slices.Equal(g.UIDs, uids), "the members of %s", g.ID)
		members += len(g.UIDs)
	}
	for uid, want := range in {
		got, total := storetest.UserGroups(t, m, uid, membership.GroupListOptions{})
		if !assert.Equal(t, want, got, "the groups of %d", uid) || !assert.Equal(t, len(want), total) {
			break
		}
	}
	stats := m.Stats()
	assert.Equal(t, int64(len(st.Groups)), stats.Groups)
	assert.Equal(t, int64(members), stats.Members)
	assert.Equal(t, int64(len(in)), stats.Users)
}

// A Loader dropped part of the way returns, its goroutine gone with it.
func TestLoaderDropReturns(t *testing.T) {
	st, _ := loaderState()
	l := New().Loader()
	for _, g := range st.Groups[:10] {
		require.NoError(t, l.Group(g))
	}
	l.Drop()
}
