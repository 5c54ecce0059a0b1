package memberstest

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// testCheckMembers checks CheckMembers: every answer in order, all at one
// revision, also while writers change the groups checked.
func testCheckMembers(t *testing.T, newStore func(t *testing.T) membership.Store) {
	ctx := context.Background()

	t.Run("answers each check in order, at the latest revision", func(t *testing.T) {
		s := newStore(t)
		_, err := storetest.Add(ctx, s, "a", []membership.User{{UID: 1}, {UID: 2}, {UID: math.MaxInt64}})
		require.NoError(t, err)
		_, err = storetest.Add(ctx, s, "b", []membership.User{{UID: 2}})
		require.NoError(t, err)
		checks := []membership.Check{
			{GroupID: "a", UID: 1}, {GroupID: "a", UID: 3}, {GroupID: "b", UID: 2}, {GroupID: "b", UID: 1},
			{GroupID: "nobody", UID: 1}, {GroupID: "a", UID: 1}, {GroupID: "a", UID: math.MaxInt64},
		}
		found, rev, err := s.CheckMembers(ctx, checks)
		require.NoError(t, err)
		assert.Equal(t, []bool{true, false, true, false, false, true, true}, found)
		assert.Equal(t, storetest.Latest(t, s), rev)

		_, err = storetest.Remove(ctx, s, "a", []membership.UID{1})
		require.NoError(t, err)
		_, err = storetest.Add(ctx, s, "other", []membership.User{{UID: 9}})
		require.NoError(t, err)
		found, rev, err = s.CheckMembers(ctx, checks)
		require.NoError(t, err)
		assert.Equal(t, []bool{false, false, true, false, false, false, true}, found)
		assert.Equal(t, storetest.Latest(t, s), rev, "the latest revision, though the last change was to a group not checked")
	})

	t.Run("no checks: no answers, at the latest revision", func(t *testing.T) {
		s := newStore(t)
		_, err := storetest.Add(ctx, s, "a", []membership.User{{UID: 1}})
		require.NoError(t, err)
		found, rev, err := s.CheckMembers(ctx, nil)
		require.NoError(t, err)
		assert.Empty(t, found)
		assert.Equal(t, storetest.Latest(t, s), rev)
	})

	t.Run("whole-group writes: replace, delete, remove a user everywhere", func(t *testing.T) {
		s := newStore(t)
		_, err := storetest.Add(ctx, s, "a", []membership.User{{UID: 1}, {UID: 2}})
		require.NoError(t, err)
		_, err = storetest.Add(ctx, s, "b", []membership.User{{UID: 1}})
		require.NoError(t, err)
		_, err = s.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: "a", Users: []membership.User{{UID: 2}, {UID: 3}}})
		require.NoError(t, err)
		_, err = s.Write(ctx, membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{2}})
		require.NoError(t, err)
		_, err = s.Write(ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: "b"})
		require.NoError(t, err)
		found, _, err := s.CheckMembers(ctx, []membership.Check{
			{GroupID: "a", UID: 1}, {GroupID: "a", UID: 2}, {GroupID: "a", UID: 3}, {GroupID: "b", UID: 1},
		})
		require.NoError(t, err)
		assert.Equal(t, []bool{false, false, true, false}, found)
	})

	t.Run("answers are of one revision while writers move users", func(t *testing.T) {
		s := newStore(t)
		observations, errs := checkWhileMoving(s, 2, 8, 4)
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.NotEmpty(t, observations)
		changes, _, err := s.Changes(ctx, membership.ChangeOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, changes)
		require.Equal(t, membership.Revision(1), changes[0].Revision, "the test needs the whole feed")
		storetest.CheckAgainstFeed(t, changes, observations)
	})
}

// checkWhileMoving has writers move users between the groups "left" and
// "right", a remove from one and an add to the other, rounds times each
// (writer w moves users w*perWriter+1 to (w+1)*perWriter), while another
// goroutine checks every user in both groups until they are done. It
// returns what the checks answered, and the errors of every goroutine.
func checkWhileMoving(s membership.Store, writers, perWriter, rounds int) ([]storetest.CheckObservation, []error) {
	ctx := context.Background()
	var checks []membership.Check
	for uid := 1; uid <= writers*perWriter; uid++ {
		checks = append(checks, membership.Check{GroupID: "left", UID: membership.UID(uid)}, membership.Check{GroupID: "right", UID: membership.UID(uid)})
	}
	errs := make(chan error, writers+1)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from, to := "left", "right"
			for round := range rounds {
				for i := range perWriter {
					uid := membership.UID(w*perWriter + i + 1)
					if round > 0 {
						if _, err := storetest.Remove(ctx, s, from, []membership.UID{uid}); err != nil {
							errs <- fmt.Errorf("writer %d: %w", w, err)
							return
						}
					}
					if _, err := storetest.Add(ctx, s, to, []membership.User{{UID: uid}}); err != nil {
						errs <- fmt.Errorf("writer %d: %w", w, err)
						return
					}
				}
				from, to = to, from
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var observations []storetest.CheckObservation
	checker := make(chan struct{})
	go func() {
		defer close(checker)
		for {
			found, rev, err := s.CheckMembers(ctx, checks)
			if err != nil {
				errs <- fmt.Errorf("checker: %w", err)
				return
			}
			observations = append(observations, storetest.CheckObservation{Checks: checks, Found: found, Revision: rev})
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	<-checker
	<-done
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return observations, all
}
