package storetest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/groupids"
)

// Add adds users to the group in s: a Write of OpAdd, with no
// precondition and no actor.
func Add(ctx context.Context, s membership.Store, groupID string, users []membership.User) (membership.Result, error) {
	return s.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: groupID, Users: users})
}

// Remove removes uids from the group in s: a Write of OpRemove, with no
// precondition and no actor.
func Remove(ctx context.Context, s membership.Store, groupID string, uids []membership.UID) (membership.Result, error) {
	return s.Write(ctx, membership.Write{Op: membership.OpRemove, GroupID: groupID, UIDs: uids})
}

// MustWrite applies w to s and requires it to succeed.
func MustWrite(t *testing.T, s membership.Store, w membership.Write) membership.Result {
	t.Helper()
	res, err := s.Write(context.Background(), w)
	require.NoError(t, err, "%s %s", w.Op, w.GroupID)
	return res
}

// MustAdd adds users to the group in s, as Add does, and requires it to
// succeed.
func MustAdd(t *testing.T, s membership.Store, groupID string, users []membership.User) membership.Result {
	t.Helper()
	return MustWrite(t, s, membership.Write{Op: membership.OpAdd, GroupID: groupID, Users: users})
}

// MustBatch applies b to s and requires it to succeed.
func MustBatch(t *testing.T, s membership.Store, b membership.Batch) membership.BatchResult {
	t.Helper()
	res, err := s.Batch(context.Background(), b)
	require.NoError(t, err)
	return res
}

// Revision returns the revision of the group in s, and requires the read
// to succeed.
func Revision(t *testing.T, s membership.Store, groupID string) membership.Revision {
	t.Helper()
	rev, err := s.Revision(context.Background(), groupID)
	require.NoError(t, err)
	return rev
}

// Count returns a change's count, for tests that check only that.
func Count(res membership.Result, err error) (int, error) { return res.Count, err }

// WriteAtOnce makes each of writes to s on a goroutine of its own, all at
// once, and returns their errors, in order.
func WriteAtOnce(s membership.Store, writes []membership.Write) []error {
	errs := make([]error, len(writes))
	var wg sync.WaitGroup
	for i, w := range writes {
		wg.Go(func() { _, errs[i] = s.Write(context.Background(), w) })
	}
	wg.Wait()
	return errs
}

// OneWon checks that exactly one of errs is nil, and that every other is
// a CodePreconditionFailed error: of writes racing with one precondition,
// one wins.
func OneWon(t *testing.T, errs []error) {
	t.Helper()
	OneWinner(t, errs, membership.CodePreconditionFailed)
}

// OneWinner checks that exactly one of errs is nil, and that every other
// is an error of code.
func OneWinner(t *testing.T, errs []error, code membership.Code) {
	t.Helper()
	won := 0
	for i, err := range errs {
		if err == nil {
			won++
		} else {
			assert.Equal(t, code, membership.ErrorCode(err), "writer %d", i)
		}
	}
	assert.Equal(t, 1, won, "one writer won")
}

// WithinSet returns the set of patterns, for tests of Within and scopes: "*"
// is every group, an id that ends in "*" a prefix, any other an id.
func WithinSet(patterns ...string) *groupids.Set {
	var exact, prefixes []string
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			prefixes = append(prefixes, prefix)
		} else {
			exact = append(exact, p)
		}
	}
	set := groupids.New(exact, prefixes)
	return &set
}
