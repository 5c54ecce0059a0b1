package memory

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// A write that changes a nickname holds the nicknames from its change
// until its revision is published: with the feed held (by a change whose
// publication waits), so that the write waits in feed.Record for its
// revision, no list can read the new nickname (a list holds the nicknames
// for reading), by a replace, a batch and an add alike.
func TestANicknameIsNotReadBeforeItsRevision(t *testing.T) {
	ctx := context.Background()
	named := func(nick string) []membership.User {
		return []membership.User{{UID: 42, Nickname: nick, HasNickname: true}}
	}
	writes := map[string]func(m *Store) error{
		"replace": func(m *Store) error {
			_, err := m.Write(ctx, membership.Write{Op: membership.OpReplace, GroupID: "a", Users: named("new")})
			return err
		},
		"batch": func(m *Store) error {
			_, err := m.Batch(ctx, membership.Batch{Writes: []membership.Write{{Op: membership.OpAdd, GroupID: "a", Users: named("new")}}})
			return err
		},
		"add": func(m *Store) error {
			_, err := m.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "a", Users: named("new")})
			return err
		},
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			m := New()
			_, err := storetest.Add(ctx, m, "b", named("old"))
			require.NoError(t, err)
			_, err = storetest.Add(ctx, m, "a", named("old"))
			require.NoError(t, err)

			held, release, recorded := make(chan struct{}), make(chan struct{}), make(chan struct{})
			go func() {
				defer close(recorded)
				m.feed.Record(membership.Change{Op: membership.OpAdd, GroupID: "held"}, feed.Stamp{}, func(membership.Revision, time.Time) {
					close(held)
					<-release
				})
			}()
			<-held
			done := make(chan error, 1)
			go func() { done <- write(m) }()
			require.True(t, waitForRecord(), "the write reached feed.Record")
			// A list's read of the nickname: at once, or once the write lets
			// go of the nicknames.
			read := make(chan string, 1)
			go func() {
				m.nicknames.RLock()
				defer m.nicknames.RUnlock()
				read <- m.nicknames.Of(42)
			}()
			require.True(t, waitUntil(func() bool {
				return len(read) > 0 || goroutineIn("sync.(*RWMutex).RLock", "nicknames.(*Directory).RLock")
			}), "the read is done or waits")
			select {
			case got := <-read:
				assert.Equal(t, "old", got, "a list may read the nickname before its revision is published")
			default: // it waits for the write
			}
			close(release)
			<-recorded
			require.NoError(t, <-done)

			got, rev := storetest.ListAll(t, m, "b")
			assert.Equal(t, []membership.Member{{UID: 42, Nickname: "new"}}, got)
			assert.Equal(t, m.LatestRevision(), rev)
		})
	}
}

// waitForRecord waits until a goroutine waits for the feed's lock in
// feed.Record, and says whether one did within a minute.
func waitForRecord() bool {
	return waitForGoroutineIn("sync.(*Mutex).Lock", "feed.(*Feed).Record")
}
