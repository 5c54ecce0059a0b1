package scimtest

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// testConcurrentPatches has SCIM PATCHes of a group race writes of the
// other routes to the same group, while a follower of the feed applies
// every change as it comes (Changes with Wait): each PATCH is one change,
// and the follower ends with the group the store lists.
func testConcurrentPatches(t *testing.T, s *server) {
	const patchers, writers, rounds = 3, 3, 15
	s.must(http.StatusCreated, "POST", "/scim/v2/Groups", `{"displayName":"race"}`)
	start := s.latest()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	followed := make(chan followResult, 1)
	go func() { followed <- follow(ctx, s.svc, "race", start) }()

	var wg sync.WaitGroup
	failures := make(chan string, (patchers+writers)*rounds)
	for p := range patchers {
		wg.Go(func() {
			for r := range rounds {
				base := 1000*(p+1) + 10*r
				body := patchOps(fmt.Sprintf(`{"op":"add","path":"members","value":[{"value":"%d"},{"value":"%d"},{"value":"%d"}]}`, base+1, base+2, base+3),
					fmt.Sprintf(`{"op":"remove","path":"members[value eq \"%d\"]"}`, base-8))
				if rep := s.do("PATCH", "/scim/v2/Groups/race", body); rep.status != http.StatusNoContent {
					failures <- fmt.Sprintf("PATCH: %d %s", rep.status, rep.body)
				}
			}
		})
	}
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				uid := membership.UID(100000*(w+1) + r)
				op := membership.Write{Op: membership.OpAdd, GroupID: "race", Users: []membership.User{{UID: uid}, {UID: uid + 500}}}
				if r%3 == 2 {
					op = membership.Write{Op: membership.OpRemove, GroupID: "race", UIDs: []membership.UID{uid - 1}}
				}
				if _, err := s.svc.Write(context.Background(), op); err != nil {
					failures <- fmt.Sprintf("%s: %v", op.Op, err)
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	// The writers are done: the follower stops at the change of the
	// group stopGroup, after every one of theirs.
	_, err := s.svc.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: stopGroup, Users: []membership.User{{UID: 1}}})
	require.NoError(t, err)
	got := <-followed
	require.NoError(t, got.err)
	assert.Equal(t, uids(s.members("race")), got.members, "the follower's group is the store's")
	assert.Equal(t, patchers*rounds, got.batches, "each PATCH is one change")
}

// followResult is what a follower ended with.
type followResult struct {
	members []membership.UID
	batches int // the changes of group that were batches
	err     error
}

// stopGroup is the group whose change tells a follower to stop.
const stopGroup = "stop-following"

// follow applies the changes of group after rev, waiting for each, until
// it has applied a change of stopGroup.
func follow(ctx context.Context, svc *membership.Service, group string, rev membership.Revision) followResult {
	members := map[membership.UID]bool{}
	batches := 0
	for {
		changes, _, err := svc.Changes(ctx, membership.ChangeOptions{After: rev, Limit: 100, Wait: true})
		if err != nil {
			return followResult{err: err}
		}
		for _, c := range changes {
			rev = c.Revision
			if c.GroupID == stopGroup {
				out := slices.Sorted(maps.Keys(members))
				if out == nil {
					out = []membership.UID{}
				}
				return followResult{members: out, batches: batches}
			}
			subs := []membership.Change{c}
			if c.Op == membership.OpBatch {
				subs = c.Changes
				batches++
			}
			for _, sub := range subs {
				applyTo(members, group, sub)
			}
		}
	}
}

// applyTo applies c, of the feed, to members, the members of group.
func applyTo(members map[membership.UID]bool, group string, c membership.Change) {
	if c.GroupID != group {
		return
	}
	switch c.Op {
	case membership.OpAdd:
		for _, uid := range c.UIDs {
			members[uid] = true
		}
	case membership.OpRemove:
		for _, uid := range c.UIDs {
			delete(members, uid)
		}
	case membership.OpReplace:
		clear(members)
		for _, uid := range c.UIDs {
			members[uid] = true
		}
	}
}
