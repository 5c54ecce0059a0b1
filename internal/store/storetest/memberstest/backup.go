package memberstest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// BackupsHoldKeysWithTheirChanges takes backups of s, backups times, while
// writers each make perWriter keyed adds (within the keys' budget, so
// that every key is kept), and checks that every backup holds the key of
// each keyed change it holds, and no key of a change it does not: a store
// restored from it answers a repeat of every keyed write it holds, and of
// no other, as a replay.
func BackupsHoldKeysWithTheirChanges(t *testing.T, s membership.Store, backup func() *snap.Backup, writers, perWriter, backups int) {
	stop := make(chan struct{})
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				select {
				case <-stop:
					return
				default:
				}
				uid := membership.UID(w<<32 | i + 1)
				add := membership.Write{Op: membership.OpAdd, GroupID: fmt.Sprint("g", w), Users: []membership.User{{UID: uid}}}
				if _, err := s.Write(context.Background(), storetest.Keyed(add, fmt.Sprint(uid))); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
		for _, err := range errs {
			assert.NoError(t, err)
		}
	}()
	for range backups {
		var file bytes.Buffer
		_, err := backup().WriteTo(&file)
		require.NoError(t, err)
		st, err := snap.Decode(file.Bytes(), "backup")
		require.NoError(t, err)
		keys := map[string]bool{}
		for _, k := range st.Keys {
			keys[k.Key] = true
		}
		members := 0
		for _, g := range st.Groups {
			for _, uid := range g.UIDs {
				members++
				require.True(t, keys[fmt.Sprint(uid)], "the backup at revision %d holds user %d, but not the key that added it", st.LastRevision, uid)
			}
		}
		require.Len(t, st.Keys, members, "and no key of a change it does not hold")
	}
}
