package transitive_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/memory/transitive"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// TestAClosureIsWholeWhenAnotherReadFindsIt has a second read find the
// closure of top kept while the first read that made it is still within
// closureOf: it must find it whole (its shards to lock), and answer as
// the first does.
func TestAClosureIsWholeWhenAnotherReadFindsIt(t *testing.T) {
	s := memory.New()
	ws := []membership.Write{storetest.Nest("top", "s0", "s1", "s2")}
	for k := range 3 {
		ws = append(ws, membership.Write{Op: membership.OpAdd, GroupID: fmt.Sprint("s", k), Users: storetest.UserRange(k*10+1, 20)})
	}
	for _, w := range ws {
		_, err := s.Write(context.Background(), w)
		require.NoError(t, err)
	}
	type answer struct {
		members []membership.Member
		rev     membership.Revision
		err     error
	}
	done := make(chan answer, 1)
	var got answer
	var once sync.Once
	transitive.SetClosureKept(s.Reader, func() {
		once.Do(func() {
			go func() {
				var a answer
				defer func() {
					if p := recover(); p != nil {
						a.err = fmt.Errorf("the second read panicked: %v", p)
					}
					done <- a
				}()
				a.members, _, a.rev, a.err = storetest.ReadTransitiveMembers(s, "top", membership.ListOptions{})
			}()
			// The first read (on the test goroutine) goes on once the
			// second is done: no lock either takes keeps the other waiting.
			got = <-done
		})
	})
	first, _, rev := storetest.TransitiveMembers(t, s, "top", membership.ListOptions{})
	require.NoError(t, got.err)
	assert.Len(t, first, 40)
	assert.Equal(t, first, got.members)
	assert.Equal(t, rev, got.rev)
}
