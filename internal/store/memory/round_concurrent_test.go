package memory

import (
	"context"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// feedModel replays the feed's changes, membership only, and checks what
// each expire says: its uids were members, the users whose nicknames it
// cleared are in no group after it, and every user it left in no group
// with a nickname (as the feed tells them) is among those cleared.
type feedModel struct {
	groups map[string]map[membership.UID]bool
	nick   map[membership.UID]bool
}

func (f *feedModel) inNoGroup(uid membership.UID) bool {
	for _, g := range f.groups {
		if g[uid] {
			return false
		}
	}
	return true
}

func (f *feedModel) leave(uid membership.UID) {
	if f.inNoGroup(uid) {
		delete(f.nick, uid)
	}
}

func (f *feedModel) apply(t *testing.T, c membership.Change, inBatch bool) {
	t.Helper()
	g := f.groups[c.GroupID]
	if g == nil && c.GroupID != "" {
		g = map[membership.UID]bool{}
		f.groups[c.GroupID] = g
	}
	defer func() {
		if c.GroupID != "" && len(f.groups[c.GroupID]) == 0 {
			delete(f.groups, c.GroupID)
		}
	}()
	setNick := func() {
		for _, n := range c.Nicknames {
			if n.Nickname != "" {
				f.nick[n.UID] = true
			}
		}
	}
	switch c.Op {
	case membership.OpBatch:
		for _, sub := range c.Changes {
			f.apply(t, sub, true)
		}
		for uid := range f.nick {
			f.leave(uid)
		}
	case membership.OpAdd:
		for _, uid := range c.UIDs {
			g[uid] = true
		}
		setNick()
	case membership.OpReplace:
		old := g
		f.groups[c.GroupID] = map[membership.UID]bool{}
		for _, uid := range c.UIDs {
			f.groups[c.GroupID][uid] = true
		}
		setNick()
		if !inBatch {
			for uid := range old {
				f.leave(uid)
			}
		}
	case membership.OpRemove, membership.OpExpire:
		var leftNone []membership.UID
		for _, uid := range c.UIDs {
			require.True(t, g[uid], "rev %d: %s of %d from %s, not a member", c.Revision, c.Op, uid, c.GroupID)
			delete(g, uid)
			if f.inNoGroup(uid) && f.nick[uid] {
				leftNone = append(leftNone, uid)
			}
		}
		var cleared []membership.UID
		for _, n := range c.Nicknames {
			require.True(t, f.inNoGroup(n.UID), "rev %d: %s clears the nickname of %d, in a group", c.Revision, c.Op, n.UID)
			cleared = append(cleared, n.UID)
		}
		slices.Sort(leftNone)
		if inBatch { // a batch's removes report no nickname cleared
			leftNone = nil
		}
		require.Equal(t, leftNone, cleared, "rev %d: %s %s clears", c.Revision, c.Op, c.GroupID)
		if !inBatch {
			for _, uid := range c.UIDs {
				f.leave(uid)
			}
		}
	case membership.OpDeleteGroup:
		f.groups[c.GroupID] = nil
		if !inBatch {
			for uid := range g {
				f.leave(uid)
			}
		}
	case membership.OpRemoveUser:
		uid := c.UIDs[0]
		for _, g := range f.groups {
			delete(g, uid)
		}
		delete(f.nick, uid)
		for id, g := range f.groups {
			if len(g) == 0 {
				delete(f.groups, id)
			}
		}
	default:
		t.Fatalf("op %q", c.Op)
	}
}

// Expire rounds (WriteExpiries) beside every other writer, under -race:
// adds of the same users to other groups, removes, remove_user, deletes,
// replaces, batches, and readers. Afterwards the feed replayed must give
// the store's state, each expire must have been of members, and clear the
// nicknames of exactly the users it left in no group; counts and the
// reverse index must agree with the groups.
func TestRoundsBesideOtherWriters(t *testing.T) {
	for _, shards := range []int{1, 3, 8} {
		t.Run("shards="+strconv.Itoa(shards), func(t *testing.T) { roundsBesideOtherWriters(t, shards) })
	}
}

func roundsBesideOtherWriters(t *testing.T, shards int) {
	ctx := context.Background()
	m := NewWith(Options{Shards: shards, ChangesKeep: 1 << 20})
	groups := make([]string, 10)
	for i := range groups {
		groups[i] = "g" + strconv.Itoa(i)
	}
	uidOf := func(rng *rand.Rand) membership.UID {
		switch rng.IntN(3) {
		case 0:
			return membership.UID(rng.IntN(30))
		case 1:
			return membership.UID(math.MaxInt64 - rng.IntN(30))
		}
		return membership.UID(rng.IntN(30) * 7919)
	}
	users := func(rng *rand.Rand) []membership.User {
		var us []membership.User
		for range 1 + rng.IntN(6) {
			u := membership.User{UID: uidOf(rng)}
			if rng.IntN(3) > 0 {
				// already due, or due within a few ms
				u.Expiry = membership.Expiry{Set: true, At: time.Now().Add(time.Duration(rng.IntN(8)-5) * time.Millisecond)}
			}
			if rng.IntN(2) == 0 {
				u.Nickname, u.HasNickname = "n"+strconv.Itoa(rng.IntN(3)), true
			}
			us = append(us, u)
		}
		return us
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var expired atomic.Int64
	// The expirer: rounds, some split and repeated.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(99, uint64(shards)))
		for !stop.Load() {
			due := m.DueExpiries(time.Now(), 1+rng.IntN(50))
			var ws []membership.Write
			for _, d := range due {
				w := d.Write
				if len(w.UIDs) > 1 && rng.IntN(2) == 0 {
					a, b := w, w
					h := len(w.UIDs) / 2
					a.UIDs, b.UIDs = w.UIDs[:h], append(slices.Clone(w.UIDs[h:]), w.UIDs[0])
					ws = append(ws, a, b)
					continue
				}
				ws = append(ws, w)
			}
			if len(ws) == 0 {
				continue
			}
			rng.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
			res, err := m.WriteExpiries(ctx, ws)
			if err != nil {
				panic(err)
			}
			for _, r := range res {
				expired.Add(int64(r.Count))
			}
		}
	})
	var writers sync.WaitGroup
	for w := range 4 {
		writers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(shards)))
			for range 1500 {
				id := groups[rng.IntN(len(groups))]
				var err error
				switch rng.IntN(12) {
				case 0:
					_, err = m.Write(ctx, membership.Write{Op: membership.OpDeleteGroup, GroupID: id})
				case 1:
					_, err = m.Write(ctx, membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{uidOf(rng)}})
				case 2:
					_, err = m.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: id, Users: users(rng)})
				case 3:
					_, err = m.Write(ctx, membership.Write{Op: membership.OpRemove, GroupID: id, UIDs: []membership.UID{uidOf(rng), uidOf(rng)}})
				case 4:
					b := membership.Batch{}
					for range 1 + rng.IntN(3) {
						gid := groups[rng.IntN(len(groups))]
						switch rng.IntN(4) {
						case 0:
							b.Writes = append(b.Writes, membership.Write{Op: membership.OpRemove, GroupID: gid, UIDs: []membership.UID{uidOf(rng)}})
						case 1:
							b.Writes = append(b.Writes, membership.Write{Op: membership.OpDeleteGroup, GroupID: gid})
						default:
							b.Writes = append(b.Writes, membership.Write{Op: membership.OpAdd, GroupID: gid, Users: users(rng)})
						}
					}
					_, err = m.Batch(ctx, b)
				case 5:
					_ = m.UserGroups(ctx, uidOf(rng), membership.GroupListOptions{}, func(int, iter.Seq[string]) {})
					_, _ = m.Groups(ctx, membership.GroupsOptions{}, func(int, iter.Seq[membership.GroupSize]) {})
				default:
					_, err = m.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: id, Users: users(rng)})
				}
				if err != nil {
					panic(fmt.Sprint(err))
				}
			}
		})
	}
	writers.Wait()
	stop.Store(true)
	wg.Wait()
	require.Positive(t, expired.Load())

	changes, _, err := m.Changes(ctx, membership.ChangeOptions{Limit: 1 << 22})
	require.NoError(t, err)
	require.EqualValues(t, 1, changes[0].Revision, "the feed keeps every change")
	f := &feedModel{groups: map[string]map[membership.UID]bool{}, nick: map[membership.UID]bool{}}
	for _, c := range changes {
		f.apply(t, c, false)
	}
	st := sortedExport(m)
	got := map[string]map[membership.UID]bool{}
	var expiries int64
	for _, g := range st.Groups {
		got[g.ID] = map[membership.UID]bool{}
		for _, uid := range g.UIDs {
			got[g.ID][uid] = true
		}
		expiries += int64(len(g.Expiries))
	}
	for id, g := range f.groups {
		if len(g) == 0 {
			delete(f.groups, id)
		}
	}
	require.Equal(t, f.groups, got)
	nick := map[membership.UID]bool{}
	for uid := range st.Nicknames {
		nick[uid] = true
	}
	require.Equal(t, f.nick, nick, "nicknames")
	require.Equal(t, expiries, m.ExpiryCount())
	checkCounts(t, m, "the race")
	for uid := range f.nick {
		var ids []string
		require.NoError(t, m.UserGroups(ctx, uid, membership.GroupListOptions{}, func(_ int, seq iter.Seq[string]) {
			ids = slices.Collect(seq)
		}))
		require.NotEmpty(t, ids, "a user with a nickname is in some group")
	}
}
