package membership_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/groupids"
	"example.com/groupmembership/membership/scope"
)

// setOf returns the set of patterns: "*" is every group, an id that ends
// in "*" a prefix, any other an id.
func setOf(t *testing.T, patterns ...string) groupids.Set {
	t.Helper()
	var exact, prefixes []string
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			prefixes = append(prefixes, prefix)
		} else {
			exact = append(exact, p)
		}
	}
	set, err := membership.NewGroupSet(exact, prefixes)
	require.NoError(t, err)
	return set
}

func TestNewGroupSetRefusesWhatNoGroupIDIs(t *testing.T) {
	_, err := membership.NewGroupSet([]string{"ok"}, []string{"bad\x01"})
	assert.Equal(t, membership.CodeInvalidGroupID, membership.ErrorCode(err))
	assert.Equal(t, `group prefix "bad\x01*": group id has control character U+0001 at byte 3`, membership.ErrorMessage(err))
	_, err = membership.NewGroupSet([]string{""}, nil)
	assert.Equal(t, `group "": group id is empty`, membership.ErrorMessage(err))
	set, err := membership.NewGroupSet(nil, []string{""})
	require.NoError(t, err, "the prefix of every id")
	assert.True(t, set.All())
}

func TestForbiddenNamesThePrincipalTheRightAndTheGroup(t *testing.T) {
	reader := scope.New("dashboard", scope.Read, setOf(t, "team-a/*"))
	writer := scope.New("sync-job", scope.Write, setOf(t, "team-a/*"))
	assert.Equal(t, `principal "dashboard" lacks write on group "team-a/x"`, membership.Forbidden(reader, scope.Write, "team-a/x").Message)
	assert.Equal(t, `principal "dashboard" lacks read on every group (*)`, membership.Forbidden(reader, scope.Read, "").Message)
	assert.Equal(t, `principal "sync-job" lacks admin`, membership.Forbidden(writer, scope.Admin, "x").Message)
	assert.Equal(t, membership.CodeForbidden, membership.Forbidden(reader, scope.Read, "x").Code)
}
