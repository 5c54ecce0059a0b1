package membership_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

func TestServiceCheckMembersRejectsBadChecksBeforeTheStore(t *testing.T) {
	tests := []struct {
		name        string
		checks      []membership.Check
		wantCode    membership.Code
		wantMessage string
	}{
		{"too many", []membership.Check{{"a", 1}, {"b", 2}, {"c", 3}}, membership.CodeTooManyChecks, "checks has more than 2 elements"},
		{"empty group id", []membership.Check{{"a", 1}, {"", 2}}, membership.CodeInvalidChecks, "checks element 1: group id is empty"},
		{"group id too long", []membership.Check{{strings.Repeat("g", membership.MaxGroupIDBytes+1), 1}}, membership.CodeInvalidChecks,
			"checks element 0: group id is 257 bytes, longer than 256"},
		{"control character", []membership.Check{{"a", 1}, {"b\x00", 1}}, membership.CodeInvalidChecks,
			"checks element 1: group id has control character U+0000 at byte 1"},
		{"uid 0", []membership.Check{{"a", 1}, {"b", 0}}, membership.CodeInvalidChecks,
			"checks element 1: uid 0 is not " + membership.UIDRange},
		{"negative uid", []membership.Check{{"a", -1}}, membership.CodeInvalidChecks,
			"checks element 0: uid -1 is not " + membership.UIDRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &recordingStore{}
			svc := membership.NewService(store, membership.ServiceOptions{MaxChecks: 2})
			_, _, err := svc.CheckMembers(context.Background(), tt.checks)
			require.Error(t, err)
			assert.Equal(t, tt.wantCode, membership.ErrorCode(err))
			assert.Equal(t, tt.wantMessage, membership.ErrorMessage(err))
			assert.Empty(t, store.calls, "a bad request must not reach the store")
		})
	}
}

func TestServiceCheckMembersPassesValidChecks(t *testing.T) {
	store := &recordingStore{}
	svc := membership.NewService(store, membership.ServiceOptions{MaxChecks: 2})
	found, _, err := svc.CheckMembers(context.Background(), []membership.Check{{"a", 1}, {"b", 2}})
	require.NoError(t, err)
	assert.Len(t, found, 2)
	_, _, err = svc.CheckMembers(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"check 2", "check 0"}, store.calls)
}

func TestNewServiceWithDefaults(t *testing.T) {
	svc := membership.NewService(&recordingStore{}, membership.ServiceOptions{})
	assert.Equal(t, membership.DefaultMaxUsers, svc.MaxUsers())
	assert.Equal(t, membership.DefaultMaxChecks, svc.MaxChecks())
	svc = membership.NewService(&recordingStore{}, membership.ServiceOptions{MaxUsers: 5})
	assert.Equal(t, 5, svc.MaxUsers())
	assert.Equal(t, membership.DefaultMaxChecks, svc.MaxChecks())
}
