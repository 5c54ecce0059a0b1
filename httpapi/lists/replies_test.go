package lists

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi/decode"
	"example.com/groupmembership/httpapi/encode"
	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
)

// newBigGroup returns a service whose group "g" has n members with uids 3,
// 6, 9, …, some with nicknames that look like the body's own separators.
func newBigGroup(t *testing.T, n int) (*membership.Service, []membership.Member) {
	t.Helper()
	svc := membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: n})
	var members []membership.Member
	users := "["
	for i := range n {
		uid := membership.UID(3 * (i + 1))
		nick := ""
		switch i % 5 {
		case 1:
			nick = `,{"uid":1,`
		case 2:
			nick = `x\"}],{"uid":`
		case 3:
			nick = "\u2028\x01"
		}
		members = append(members, membership.Member{UID: uid, Nickname: nick})
		if i > 0 {
			users += ","
		}
		users += fmt.Sprintf(`{"uid":%d,"nickname":%s}`, uid, encode.AppendJSONString(nil, nick))
	}
	_, err := svc.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: "g", Users: usersOf(users + "]")})
	require.NoError(t, err)
	return svc, members
}

// The suffix of a shared list after any uid is exactly the list of the
// members above it, whatever the nicknames hold.
func TestEncodedListSuffix(t *testing.T) {
	const n = 5 * encode.MarkEvery
	svc, members := newBigGroup(t, n)
	l := NewEncodedLists(NewCache(0), budget.New(1<<30))
	e, err := l.Whole(context.Background(), svc, "g", 0)
	require.NoError(t, err)
	defer l.Release(e)
	require.Equal(t, string(encodeMembers(slices.Values(members))), string(e.Body))
	require.Len(t, e.marks, n/encode.MarkEvery)

	for after := membership.UID(0); after <= membership.UID(3*n+2); after++ {
		var want []membership.Member
		for _, m := range members {
			if m.UID > after {
				want = append(want, m)
			}
		}
		head, rest := e.Suffix(after)
		got := string(head) + string(rest)
		if got != string(encodeMembers(slices.Values(want))) {
			t.Fatalf("suffix(%d) = %.80q…, want the %d members above it", after, got, len(want))
		}
	}
}

// wholeConcurrently asks n readers at once for the list of group g at
// revision, and returns what each got (nil for an error).
func wholeConcurrently(l *EncodedLists, svc *membership.Service, revision membership.Revision, n int) []*EncodedList {
	var wg sync.WaitGroup
	got := make([]*EncodedList, n)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = l.Whole(context.Background(), svc, "g", revision)
		}()
	}
	wg.Wait()
	return got
}

// Concurrent readers of one group state share one encoding, and it counts
// once in the replies budget, until the last lets go.
func TestListsShareOneEncodingPerRevision(t *testing.T) {
	svc, _ := newBigGroup(t, 1000)
	replies := budget.New(1 << 30)
	l := NewEncodedLists(NewCache(0), replies) // no cache: sharing alone
	ctx := context.Background()
	rev, err := svc.Revision(ctx, "g")
	require.NoError(t, err)

	first, err := l.Whole(ctx, svc, "g", rev)
	require.NoError(t, err)
	held := replies.Used()
	assert.Equal(t, first.cost(), held)

	got := wholeConcurrently(l, svc, rev, 50)
	for _, e := range got {
		assert.Same(t, first, e, "the same encoding")
	}
	assert.Equal(t, held, replies.Used(), "counted once")
	for _, e := range got {
		l.Release(e)
	}
	assert.Equal(t, held, replies.Used(), "the first reader still holds it")
	l.Release(first)
	assert.Zero(t, replies.Used())
	assert.Empty(t, l.sending)
}

// uidsJSON returns [1,2,…,n].
func uidsJSON(n int) string {
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprint(&b, i+1)
	}
	return b.String() + "]"
}

// listCounter counts the lists a store builds.
type listCounter struct {
	*memory.Store
	lists atomic.Int64
}

func (c *listCounter) ListMembers(ctx context.Context, groupID string, opts membership.ListOptions, list membership.ListFunc) (membership.Revision, error) {
	c.lists.Add(1)
	return c.Store.ListMembers(ctx, groupID, opts, list)
}

// Readers that come while a group's list is being built wait for it rather
// than build their own.
func TestListsBuildEachRevisionOnce(t *testing.T) {
	st := &listCounter{Store: memory.New()}
	svc := membership.NewService(st, membership.ServiceOptions{MaxUsers: 10000})
	ctx := context.Background()
	_, err := svc.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: usersOf(uidsJSON(5000))})
	require.NoError(t, err)
	l := NewEncodedLists(NewCache(0), budget.New(1<<30))

	got := wholeConcurrently(l, svc, 1, 50)
	for _, e := range got {
		require.NotNil(t, e)
		assert.Same(t, got[0], e)
	}
	assert.Equal(t, int64(1), st.lists.Load(), "built once")
	for _, e := range got {
		l.Release(e)
	}
	assert.Zero(t, l.Replies.Used())
	assert.Empty(t, l.building)
}

// A list held from the cache counts in the replies budget while it is sent:
// the cache may drop it meanwhile.
func TestListsCountCachedListsWhileSent(t *testing.T) {
	svc, _ := newBigGroup(t, 100)
	replies := budget.New(1 << 30)
	l := NewEncodedLists(NewCache(1<<20), replies)
	ctx := context.Background()
	e, err := l.Whole(ctx, svc, "g", 1)
	require.NoError(t, err)
	l.Release(e)
	require.Zero(t, replies.Used())

	again, err := l.Whole(ctx, svc, "g", 1)
	require.NoError(t, err)
	assert.Same(t, e, again, "from the cache")
	assert.Equal(t, e.cost(), replies.Used())
	l.Release(again)
	assert.Zero(t, replies.Used())
}

// Past the replies budget, a list that would need new memory is refused,
// while a list already being sent is still shared.
func TestListsRefuseNewEncodingsPastTheBudget(t *testing.T) {
	st := &listCounter{Store: memory.New()}
	svc := membership.NewService(st, membership.ServiceOptions{MaxUsers: 10000})
	ctx := context.Background()
	_, err := svc.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: usersOf(uidsJSON(1000))})
	require.NoError(t, err)
	l := NewEncodedLists(NewCache(0), budget.New(1000)) // less than one list
	e, err := l.Whole(ctx, svc, "g", 1)
	require.NoError(t, err, "alone, a list over the whole budget is sent")
	shared, err := l.Whole(ctx, svc, "g", 1)
	require.NoError(t, err)
	assert.Same(t, e, shared)

	_, err = svc.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: usersOf("[1001]")})
	require.NoError(t, err)
	lists := st.lists.Load()
	_, err = l.Whole(ctx, svc, "g", 2)
	assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err), "a new revision needs new memory")
	assert.Equal(t, lists, st.lists.Load(), "refused before listing: the last encoding told its size")
	_, _, err = EncodeBounded(l.Replies, 10, func(b []byte) []byte { return b })
	assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err), "so does a page")

	l.Release(e)
	l.Release(shared)
	e, err = l.Whole(ctx, svc, "g", 2)
	require.NoError(t, err, "once the others are sent")
	l.Release(e)
}

// usersOf decodes users JSON, for tests that build requests as text.
func usersOf(usersJSON string) []membership.User {
	users, err := decode.ParseUsers(usersJSON, 1<<20)
	if err != nil {
		panic(err)
	}
	return users
}

// encodeMembers returns the JSON array of members as encode writes a
// list, in a buffer of exactly its size.
func encodeMembers(members iter.Seq[membership.Member]) []byte {
	size, _ := encode.MembersJSONLen(members)
	return encode.AppendMembers(make([]byte, 0, size), members, nil)
}
