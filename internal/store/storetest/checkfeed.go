package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// Replayed is the memberships a feed makes, change after change: for each
// group, its members. Apply changes to it in revision order.
type Replayed map[string]map[membership.UID]bool

// Apply applies c, as a follower of the feed does.
func (st Replayed) Apply(c membership.Change) {
	group := func(id string) map[membership.UID]bool {
		if st[id] == nil {
			st[id] = map[membership.UID]bool{}
		}
		return st[id]
	}
	switch c.Op {
	case membership.OpAdd:
		for _, uid := range c.UIDs {
			group(c.GroupID)[uid] = true
		}
	case membership.OpRemove:
		for _, uid := range c.UIDs {
			delete(group(c.GroupID), uid)
		}
	case membership.OpReplace:
		st[c.GroupID] = map[membership.UID]bool{}
		for _, uid := range c.UIDs {
			group(c.GroupID)[uid] = true
		}
	case membership.OpDeleteGroup:
		delete(st, c.GroupID)
	case membership.OpRemoveUser:
		for _, members := range st {
			delete(members, c.UIDs[0])
		}
	}
}

// CheckObservation is what one CheckMembers answered: the checks asked,
// the answers and their revision.
type CheckObservation struct {
	Checks   []membership.Check
	Found    []bool
	Revision membership.Revision
}

// CheckAgainstFeed checks that each observation answered what the feed,
// replayed up to its revision, says: that its answers are all of that one
// revision. The changes must start at revision 1 and include every
// observation's revision.
func CheckAgainstFeed(t *testing.T, changes []membership.Change, observations []CheckObservation) {
	t.Helper()
	obs := slices.Clone(observations)
	slices.SortStableFunc(obs, func(a, b CheckObservation) int { return int(a.Revision) - int(b.Revision) })
	st := Replayed{}
	next := 0 // the next change to apply
	for _, o := range obs {
		for next < len(changes) && changes[next].Revision <= o.Revision {
			st.Apply(changes[next])
			next++
		}
		require.Len(t, o.Found, len(o.Checks))
		for i, c := range o.Checks {
			if !assert.Equal(t, st[c.GroupID][c.UID], o.Found[i], "check %d, user %d in %q, at revision %d", i, c.UID, c.GroupID, o.Revision) {
				return // one is enough to tell
			}
		}
	}
}

// MovingChecks returns the checks of every user that CheckWhileMoving
// moves, users 1 to n, in both its groups.
func MovingChecks(n int) []membership.Check {
	var checks []membership.Check
	for uid := 1; uid <= n; uid++ {
		checks = append(checks, membership.Check{GroupID: "left", UID: membership.UID(uid)}, membership.Check{GroupID: "right", UID: membership.UID(uid)})
	}
	return checks
}

// CheckWhileMoving has writers move users between the groups "left" and
// "right", rounds times each (writer w moves users w*perWriter+1 to
// (w+1)*perWriter), through move, which removes uid from the group from
// ("" on the first round: it is in none yet) and adds it to the group to;
// beside them, another goroutine calls check until they are done. It
// returns what the checks answered, and the errors of every goroutine.
func CheckWhileMoving(writers, perWriter, rounds int, move func(uid membership.UID, from, to string) error,
	check func() (CheckObservation, error)) ([]CheckObservation, []error) {
	errs := make(chan error, writers+1)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			from, to := "", "right"
			for range rounds {
				for i := range perWriter {
					if err := move(membership.UID(w*perWriter+i+1), from, to); err != nil {
						errs <- fmt.Errorf("writer %d: %w", w, err)
						return
					}
				}
				if from == "" {
					from = "left"
				}
				from, to = to, from
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var observations []CheckObservation
	checker := make(chan struct{})
	go func() {
		defer close(checker)
		for {
			o, err := check()
			if err != nil {
				errs <- fmt.Errorf("checker: %w", err)
				return
			}
			observations = append(observations, o)
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
