package memberstest

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// testNicknameRevisions has writers change one user's nickname through
// group "a", by replace and by batch, while readers list group "b", which
// the user is in too. A nickname changes every group's list, so each list
// of "b" must show the nickname that the latest change up to the revision
// it reports set: never one a later revision sets. Every nickname is
// written once, so the revision that set it is known from its write.
func testNicknameRevisions(t *testing.T, ctx context.Context, s membership.Store) {
	const uid, writers, readers, perWriter = 42, 2, 4, 200
	storetest.MustAdd(t, s, "b", []membership.User{{UID: uid, Nickname: "start", HasNickname: true}, {UID: 7}})

	race := &nicknameRace{s: s, uid: uid, setAt: map[string]membership.Revision{}, reads: map[seen]int{}}
	done := make(chan struct{})
	// The writers start once every reader has listed once, so that the
	// lists overlap the writes however the goroutines are scheduled.
	var wg, rg, readersStarted sync.WaitGroup
	readersStarted.Add(readers)
	for w := range writers {
		wg.Go(func() {
			readersStarted.Wait()
			race.writeNicknames(w, perWriter)
		})
	}
	for range readers {
		rg.Go(func() {
			race.listNicknames(done, readersStarted.Done)
		})
	}
	wg.Wait()
	close(done)
	rg.Wait()
	require.Empty(t, race.errs)

	setAt, reads := race.setAt, race.reads
	setAt["start"] = 0
	nickAt := nicknameAt(setAt)
	require.NotEmpty(t, reads)
	torn, lists := 0, 0
	for r, n := range reads {
		lists += n
		if want := nickAt(r.rev); r.nick != want {
			if torn < 5 {
				assert.Equal(t, want, r.nick, "a list at revision %d shows the nickname set at %d", r.rev, setAt[r.nick])
			}
			torn += n
		}
	}
	assert.Zero(t, torn, "of %d lists", lists)
}

// seen is a nickname of the user that a list of "b" showed, and the
// list's revision.
type seen struct {
	rev  membership.Revision
	nick string
}

// nicknameRace is what the writers and readers of testNicknameRevisions
// share.
type nicknameRace struct {
	s   membership.Store
	uid membership.UID

	// mu guards the fields below it.
	mu    sync.Mutex
	setAt map[string]membership.Revision // nickname -> the revision that set it
	reads map[seen]int                   // each pair a list showed, and how often
	errs  []error
}

func (r *nicknameRace) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// writeNicknames is writer w: it sets perWriter nicknames of the user in
// group "a", by replace and by batch in turn, each with the revision that
// set it.
func (r *nicknameRace) writeNicknames(w, perWriter int) {
	ctx := context.Background()
	for i := range perWriter {
		nick := fmt.Sprintf("w%d-%d", w, i)
		users := []membership.User{{UID: r.uid, Nickname: nick, HasNickname: true}, {UID: 1}}
		var rev membership.Revision
		if i%2 == 0 {
			res, err := r.s.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: "a", Users: users})
			if err != nil {
				r.fail(err)
				return
			}
			rev = res.Revision
		} else {
			res, err := r.s.Batch(ctx, membership.Batch{Writes: []membership.Write{{Op: membership.OpAdd, GroupID: "a", Users: users}}})
			if err != nil {
				r.fail(err)
				return
			}
			rev = res.Revision
		}
		r.mu.Lock()
		r.setAt[nick] = rev
		r.mu.Unlock()
	}
}

// listNicknames lists group "b" until done is closed, each time with the
// user's nickname it shows and its revision; it calls started after its
// first list.
func (r *nicknameRace) listNicknames(done <-chan struct{}, started func()) {
	ctx := context.Background()
	first := true
	for {
		select {
		case <-done:
			return
		default:
		}
		var nick string
		rev, err := r.s.ListMembers(ctx, "b", membership.ListOptions{}, func(_ int, members iter.Seq[membership.Member]) {
			for m := range members {
				if m.UID == r.uid {
					nick = m.Nickname
				}
			}
		})
		if first {
			first = false
			started()
		}
		if err != nil {
			r.fail(err)
			return
		}
		r.mu.Lock()
		r.reads[seen{rev, nick}]++
		r.mu.Unlock()
	}
}

// nicknameAt returns a function that answers the nickname the latest
// change up to a revision set, of the nicknames setAt says were set when.
func nicknameAt(setAt map[string]membership.Revision) func(rev membership.Revision) string {
	type change struct {
		rev  membership.Revision
		nick string
	}
	var changes []change
	for nick, rev := range setAt {
		changes = append(changes, change{rev, nick})
	}
	slices.SortFunc(changes, func(a, b change) int { return cmp.Compare(a.rev, b.rev) })
	return func(rev membership.Revision) string {
		i, _ := slices.BinarySearchFunc(changes, rev+1, func(c change, r membership.Revision) int { return cmp.Compare(c.rev, r) })
		return changes[i-1].nick
	}
}
