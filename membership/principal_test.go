package membership_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

func TestValidatePrincipal(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantMsg string // "" when the name is valid
	}{
		{"plain", "sync-job", ""},
		{"every kind of byte", "Ops_2.team-a@example.com:8443", ""},
		{"the single token's", "token", ""},
		{"64 bytes", strings.Repeat("p", 64), ""},
		{"empty", "", "of 0 bytes"},
		{"65 bytes", strings.Repeat("p", 65), "of 65 bytes: it must be 1 to 64"},
		{"a space", "sync job", "byte 0x20 at 4"},
		{"a quote", `a"b`, "byte 0x22 at 1"},
		{"an equals sign", "a=b", "byte 0x3d at 1"},
		{"a newline", "a\n", "byte 0x0a at 1"},
		{"not ASCII", "équipe", "byte 0xc3 at 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := membership.ValidatePrincipal(tt.in)
			if tt.wantMsg == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantMsg)
		})
	}
}

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
