package transitive_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/memory/transitive"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// piecesFixture writes, to each store, top > s0 … s4 (s1's nesting ending
// at t0) and alone, a group in no nesting: s_k holds the users k+1,
// k+6, k+11, … below 60, some until t1 and with nicknames, and alone the
// users 1 to 40.
func piecesFixture(t *testing.T, stores ...*memory.Store) {
	t.Helper()
	t0 := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
	t1 := t0.Add(time.Minute)
	nest := storetest.Nest("top", "s0", "s2", "s3", "s4")
	nest.Subgroups = append(nest.Subgroups, storetest.NestedUntil("s1", t0))
	ws := []membership.Write{nest}
	for k := range 5 {
		var users []membership.User
		for uid := membership.UID(k + 1); uid < 60; uid += 5 {
			u := membership.User{UID: uid}
			switch uid % 7 {
			case 0:
				u = storetest.ExpiresAt(uid, t1)
			case 3:
				u.Nickname, u.HasNickname = fmt.Sprint("n", uid), true
			}
			users = append(users, u)
		}
		ws = append(ws, add(fmt.Sprint("s", k), users...))
	}
	ws = append(ws, add("alone", storetest.UserRange(1, 40)...))
	for _, s := range stores {
		for _, w := range ws {
			_, err := s.Write(context.Background(), w)
			require.NoError(t, err)
		}
	}
}

// TestAReadInPiecesAnswersAsOneRead reads every page of a closure, and of
// a group in no nesting, from a store that reads 3 members a piece, from
// its kept merge and merging at the read, beside one that reads them all
// at once.
func TestAReadInPiecesAnswersAsOneRead(t *testing.T) {
	for _, budget := range []int64{transitive.DefaultMergedBudget, 0} {
		whole, pieced := memory.New(), memory.New()
		transitive.SetMergedBudget(whole.Reader, budget)
		transitive.SetMergedBudget(pieced.Reader, budget)
		transitive.SetPieceMembers(pieced.Reader, 3)
		calls := 0
		transitive.SetBetweenPieces(pieced.Reader, func() { calls++ })
		piecesFixture(t, whole, pieced)
		for _, group := range []string{"top", "alone", "s1", "nobody"} {
			for after := membership.UID(0); after <= 61; after += 4 {
				for _, limit := range []int{0, 1, 2, 3, 7, 100} {
					opts := membership.ListOptions{After: after, Limit: limit}
					want, wantTotal, wantRev := storetest.TransitiveMembers(t, whole, group, opts)
					got, total, rev := storetest.TransitiveMembers(t, pieced, group, opts)
					msg := fmt.Sprintf("budget %d, %s after %d limit %d", budget, group, after, limit)
					assert.Equal(t, want, got, msg)
					assert.Equal(t, wantTotal, total, msg)
					assert.Equal(t, wantRev, rev, msg)
				}
			}
		}
		assert.Positive(t, calls, "budget %d: reads went in pieces", budget)
	}
}

// TestAChangeBetweenTwoPiecesStartsTheReadAgain has a write come between
// two pieces of a read, as no lock is held then: the read starts again
// and answers the state after it, at its revision.
func TestAChangeBetweenTwoPiecesStartsTheReadAgain(t *testing.T) {
	for _, budget := range []int64{transitive.DefaultMergedBudget, 0} {
		m := memory.New()
		transitive.SetMergedBudget(m.Reader, budget)
		transitive.SetPieceMembers(m.Reader, 5)
		piecesFixture(t, m)
		var written membership.Result
		calls := 0
		transitive.SetBetweenPieces(m.Reader, func() {
			calls++
			if calls == 1 {
				var err error
				written, err = m.Write(context.Background(), add("s3", membership.User{UID: 100}, membership.User{UID: 2, Nickname: "changed", HasNickname: true}))
				require.NoError(t, err)
			}
		})
		got, total, rev := storetest.TransitiveMembers(t, m, "top", membership.ListOptions{})
		require.Positive(t, calls)
		assert.Equal(t, written.Revision, rev, "budget %d: the read is of the state after the write", budget)
		assert.Equal(t, 60, total, "budget %d: 59 users and the one added", budget)
		assert.Len(t, got, 60)
		assert.Equal(t, membership.Member{UID: 100}, got[59])
		assert.Equal(t, membership.Member{UID: 2, Nickname: "changed"}, got[1])
	}
}

// TestAReadThatChangesKeepStartingOverHoldsItsLocks has a write come
// between every two pieces: after its restarts the read holds its locks
// from its first piece to its last, and ends.
func TestAReadThatChangesKeepStartingOverHoldsItsLocks(t *testing.T) {
	m := memory.New()
	transitive.SetPieceMembers(m.Reader, 5)
	piecesFixture(t, m)
	calls := 0
	transitive.SetBetweenPieces(m.Reader, func() {
		calls++
		_, err := m.Write(context.Background(), add("s0", membership.User{UID: membership.UID(1000 + calls)}))
		require.NoError(t, err)
	})
	_, total, rev := storetest.TransitiveMembers(t, m, "top", membership.ListOptions{Limit: 100})
	assert.Equal(t, 3, calls, "a write after each of the first pieces of three reads, then none")
	assert.Equal(t, 62, total)
	assert.Equal(t, m.LatestRevision(), rev)
}
