package membership_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// A write and a batch reach the store with the principal they were given.
func TestServicePassesThePrincipalToTheStore(t *testing.T) {
	ctx := context.Background()
	store := &principalStore{}
	svc := membership.NewService(store, membership.ServiceOptions{})
	_, err := svc.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: users(1), Principal: "sync-job"})
	require.NoError(t, err)
	_, err = svc.Batch(ctx, membership.Batch{Principal: "ops", Writes: []membership.Write{{Op: membership.OpDeleteGroup, GroupID: "g"}}})
	require.NoError(t, err)
	_, err = svc.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: users(1)})
	require.NoError(t, err)
	assert.Equal(t, []string{"sync-job", "ops", ""}, store.principals)
}

// principalStore records the principal of each write and batch.
type principalStore struct {
	recordingStore
	principals []string
}

func (s *principalStore) Write(_ context.Context, w membership.Write) (membership.Result, error) {
	s.principals = append(s.principals, w.Principal)
	return membership.Result{}, nil
}

func (s *principalStore) Batch(_ context.Context, b membership.Batch) (membership.BatchResult, error) {
	s.principals = append(s.principals, b.Principal)
	return membership.BatchResult{}, nil
}
