package storetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/scope"
)

// ScopeOf returns the context of a request of principal with right on
// patterns (as WithinSet reads them).
func ScopeOf(principal string, right scope.Right, patterns ...string) context.Context {
	return scope.With(context.Background(), scope.New(principal, right, *WithinSet(patterns...)))
}

// Forbidden checks that err is the CodeForbidden error with message.
func Forbidden(t *testing.T, err error, message string) {
	t.Helper()
	require.Error(t, err)
	assert.Equal(t, membership.CodeForbidden, membership.ErrorCode(err), "%v", err)
	assert.Equal(t, message, membership.ErrorMessage(err))
}

// WriteScopedGroups writes, through svc, what the tests of scopes read:
// users 1 and 2 in team-a/x, team-a/y, team-b and secret; team-a/y holds
// secret as a subgroup, and team-a/all holds team-a/x.
func WriteScopedGroups(t *testing.T, svc *membership.Service) {
	t.Helper()
	ctx := context.Background()
	for _, g := range []string{"team-a/x", "team-a/y", "team-b", "secret"} {
		_, err := svc.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: g, Users: []membership.User{{UID: 1}, {UID: 2}}})
		require.NoError(t, err)
	}
	for parent, child := range map[string]string{"team-a/y": "secret", "team-a/all": "team-a/x"} {
		_, err := svc.Write(ctx, membership.Write{Op: membership.OpAddGroups, GroupID: parent, Subgroups: []membership.Subgroup{{GroupID: child}}})
		require.NoError(t, err)
	}
}
