package store

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

func TestMemory(t *testing.T) {
	testStoreContract(t, func() membership.Store { return NewMemory() })
}

// testStoreContract checks the behaviour every membership.Store must have.
// A later store (durable, shared) runs the same checks.
func testStoreContract(t *testing.T, newStore func() membership.Store) {
	ctx := context.Background()
	users := func(uids ...membership.UID) []membership.User {
		us := make([]membership.User, len(uids))
		for i, uid := range uids {
			us[i] = membership.User{UID: uid}
		}
		return us
	}

	t.Run("unknown group lists empty, not nil", func(t *testing.T) {
		got, err := newStore().ListMembers(ctx, "nobody")
		require.NoError(t, err)
		assert.NotNil(t, got)
		assert.Empty(t, got)
	})

	t.Run("add counts only new members, repeats count once", func(t *testing.T) {
		s := newStore()
		n, err := s.AddMembers(ctx, "g", users(3, 1, 3))
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		n, err = s.AddMembers(ctx, "g", users(1, 2))
		require.NoError(t, err)
		assert.Equal(t, 1, n)
	})

	t.Run("list is sorted by uid", func(t *testing.T) {
		s := newStore()
		_, err := s.AddMembers(ctx, "g", users(30, 9223372036854775807, 1, 20))
		require.NoError(t, err)
		got, err := s.ListMembers(ctx, "g")
		require.NoError(t, err)
		assert.Equal(t, []membership.Member{{UID: 1}, {UID: 20}, {UID: 30}, {UID: 9223372036854775807}}, got)
	})

	t.Run("nicknames: last write wins, kept when not given, cleared by empty", func(t *testing.T) {
		s := newStore()
		_, err := s.AddMembers(ctx, "g", []membership.User{
			{UID: 1, Nickname: "a", HasNickname: true},
			{UID: 1, Nickname: "b", HasNickname: true},
			{UID: 2, Nickname: "x", HasNickname: true},
			{UID: 3, Nickname: "y", HasNickname: true},
		})
		require.NoError(t, err)
		_, err = s.AddMembers(ctx, "g", []membership.User{{UID: 2}, {UID: 3, Nickname: "", HasNickname: true}})
		require.NoError(t, err)
		got, err := s.ListMembers(ctx, "g")
		require.NoError(t, err)
		assert.Equal(t, []membership.Member{{UID: 1, Nickname: "b"}, {UID: 2, Nickname: "x"}, {UID: 3, Nickname: ""}}, got)
	})

	t.Run("a nickname belongs to the user in every group", func(t *testing.T) {
		s := newStore()
		_, err := s.AddMembers(ctx, "a", []membership.User{{UID: 1, Nickname: "Ann", HasNickname: true}})
		require.NoError(t, err)
		_, err = s.AddMembers(ctx, "b", users(1))
		require.NoError(t, err)
		got, err := s.ListMembers(ctx, "b")
		require.NoError(t, err)
		assert.Equal(t, []membership.Member{{UID: 1, Nickname: "Ann"}}, got)
	})

	t.Run("remove counts only members, and only in its group", func(t *testing.T) {
		s := newStore()
		_, err := s.AddMembers(ctx, "a", users(1, 2, 3))
		require.NoError(t, err)
		_, err = s.AddMembers(ctx, "b", users(1, 2))
		require.NoError(t, err)
		n, err := s.RemoveMembers(ctx, "a", []membership.UID{1, 1, 4})
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		got, err := s.ListMembers(ctx, "a")
		require.NoError(t, err)
		assert.Equal(t, []membership.Member{{UID: 2}, {UID: 3}}, got)
		got, err = s.ListMembers(ctx, "b")
		require.NoError(t, err)
		assert.Equal(t, []membership.Member{{UID: 1}, {UID: 2}}, got)
	})

	t.Run("remove from an unknown group removes nothing", func(t *testing.T) {
		n, err := newStore().RemoveMembers(ctx, "nobody", []membership.UID{1})
		require.NoError(t, err)
		assert.Equal(t, 0, n)
	})

	t.Run("an emptied group lists empty and can be refilled", func(t *testing.T) {
		s := newStore()
		_, err := s.AddMembers(ctx, "g", []membership.User{{UID: 1, Nickname: "a", HasNickname: true}})
		require.NoError(t, err)
		n, err := s.RemoveMembers(ctx, "g", []membership.UID{1})
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		got, err := s.ListMembers(ctx, "g")
		require.NoError(t, err)
		assert.Empty(t, got)
		n, err = s.AddMembers(ctx, "g", users(1))
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		got, err = s.ListMembers(ctx, "g")
		require.NoError(t, err)
		assert.Equal(t, []membership.Member{{UID: 1, Nickname: "a"}}, got, "the nickname outlives the membership")
	})

	t.Run("counts stay exact under contention", func(t *testing.T) {
		s := newStore()
		const workers, perWorker = 16, 200
		var wg sync.WaitGroup
		added := make([]int, workers)
		removed := make([]int, workers)
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perWorker {
					group := fmt.Sprintf("g%d", i%4)
					uid := membership.UID(i%50 + 1)
					n, err := s.AddMembers(ctx, group, users(uid, uid+1))
					if err != nil {
						errs <- err
						return
					}
					added[w] += n
					if i%3 == 0 {
						n, err := s.RemoveMembers(ctx, group, []membership.UID{uid})
						if err != nil {
							errs <- err
							return
						}
						removed[w] += n
					}
					if _, err := s.ListMembers(ctx, group); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		total := 0
		for g := range 4 {
			got, err := s.ListMembers(ctx, fmt.Sprintf("g%d", g))
			require.NoError(t, err)
			total += len(got)
		}
		sum := func(xs []int) int {
			n := 0
			for _, x := range xs {
				n += x
			}
			return n
		}
		assert.Equal(t, sum(added)-sum(removed), total, "every add and remove counted exactly once")
		assert.Positive(t, sum(removed), "the test must exercise removal")
	})
}
