package membership_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

func TestPrefixRangeEndsAfterEveryIDWithThePrefix(t *testing.T) {
	tests := []struct {
		prefix string
		want   membership.IDRange
	}{
		{"a", membership.IDRange{Start: "a", End: "b"}},
		{"ab", membership.IDRange{Start: "ab", End: "ac"}},
		{"a\xff", membership.IDRange{Start: "a\xff", End: "b"}},
		{"\xff\xff", membership.IDRange{Start: "\xff\xff"}},
		{"", membership.IDRange{}},
		{"é", membership.IDRange{Start: "é", End: "\xc3\xaa"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, membership.PrefixRange(tt.prefix), "%q", tt.prefix)
	}
}

func TestIDRangeIntersect(t *testing.T) {
	tests := []struct {
		a, b, want membership.IDRange
		ok         bool
	}{
		{membership.IDRange{Start: "a", End: "c"}, membership.IDRange{Start: "b", End: "d"}, membership.IDRange{Start: "b", End: "c"}, true},
		{membership.IDRange{Start: "a"}, membership.IDRange{Start: "b", End: "d"}, membership.IDRange{Start: "b", End: "d"}, true},
		{membership.IDRange{Start: "a", End: "c"}, membership.IDRange{Start: "b"}, membership.IDRange{Start: "b", End: "c"}, true},
		{membership.IDRange{}, membership.IDRange{}, membership.IDRange{}, true},
		{membership.IDRange{Start: "a", End: "b"}, membership.IDRange{Start: "b", End: "c"}, membership.IDRange{Start: "b", End: "b"}, false},
	}
	for _, tt := range tests {
		got, ok := tt.a.Intersect(tt.b)
		assert.Equal(t, tt.ok, ok, "%v ∩ %v", tt.a, tt.b)
		if ok {
			assert.Equal(t, tt.want, got, "%v ∩ %v", tt.a, tt.b)
		}
	}
}

func TestGroupSetHoldsExactIDsPrefixesAndEverything(t *testing.T) {
	set, err := membership.GroupSetOf("team-b", "team-a/*", "ops", "team-a/x", "team-")
	require.NoError(t, err)
	for id, want := range map[string]bool{
		"team-b": true, "team-a/": true, "team-a/x": true, "team-a/x/y": true, "ops": true, "team-": true,
		"team-bb": false, "team-a": false, "team-c": false, "op": false, "opsx": false, "a": false, "zzz": false,
	} {
		assert.Equal(t, want, set.Contains(id), "%q", id)
	}
	assert.False(t, set.All())
	assert.Equal(t, []membership.IDRange{{Start: "ops", End: "ops\x00"}, {Start: "team-", End: "team-\x00"},
		{Start: "team-a/", End: "team-a0"}, {Start: "team-b", End: "team-b\x00"}}, set.Ranges(), "sorted and disjoint: team-a/x is in team-a/*")

	all, err := membership.GroupSetOf("team-a/*", "*", "x")
	require.NoError(t, err)
	assert.True(t, all.All())
	assert.True(t, all.Contains("anything"))

	var empty membership.GroupSet
	assert.False(t, empty.Contains("a"))
	assert.False(t, empty.All())

	_, err = membership.GroupSetOf("ok", "bad\x01*")
	assert.Equal(t, membership.CodeInvalidGroupID, membership.ErrorCode(err))
	assert.Equal(t, `group prefix "bad\x01*": group id has control character U+0001 at byte 3`, membership.ErrorMessage(err))
	_, err = membership.GroupSetOf("")
	assert.Equal(t, `group "": group id is empty`, membership.ErrorMessage(err))

	starred, err := membership.NewGroupSet([]string{"a*"}, []string{"b"})
	require.NoError(t, err)
	assert.True(t, starred.Contains("a*"), "an exact id may end in *")
	assert.False(t, starred.Contains("ab"))
	assert.True(t, starred.Contains("bc"))
}

func TestScopeRightsIncludeTheOnesBefore(t *testing.T) {
	groups, err := membership.GroupSetOf("team-a/*")
	require.NoError(t, err)
	reader := membership.NewScope("dashboard", membership.RightRead, groups)
	writer := membership.NewScope("sync-job", membership.RightWrite, groups)
	admin := membership.NewScope("ops", membership.RightAdmin, membership.GroupSet{})
	var nobody *membership.Scope // no scope: everything

	assert.True(t, reader.Allows(membership.RightRead, "team-a/x"))
	assert.False(t, reader.Allows(membership.RightWrite, "team-a/x"))
	assert.False(t, reader.Allows(membership.RightRead, "team-b"))
	assert.True(t, writer.Allows(membership.RightRead, "team-a/x"), "write reads too")
	assert.True(t, writer.Allows(membership.RightWrite, "team-a/x"))
	assert.False(t, writer.Allows(membership.RightAdmin, "team-a/x"))
	assert.False(t, writer.AllowsAll(membership.RightRead))
	assert.True(t, admin.Allows(membership.RightWrite, "anything"))
	assert.True(t, admin.AllowsAll(membership.RightAdmin))
	assert.True(t, nobody.AllowsAll(membership.RightAdmin))

	assert.Nil(t, admin.Readable())
	assert.Equal(t, &groups, reader.Readable())
	assert.Empty(t, admin.ReadTag())
	assert.NotEmpty(t, reader.ReadTag())
	assert.Equal(t, reader.ReadTag(), writer.ReadTag(), "the same groups read: the same lists")
	other, err := membership.GroupSetOf("team-b")
	require.NoError(t, err)
	assert.NotEqual(t, reader.ReadTag(), membership.NewScope("x", membership.RightRead, other).ReadTag())

	assert.Equal(t, `principal "dashboard" lacks write on group "team-a/x"`, reader.Forbidden(membership.RightWrite, "team-a/x").Message)
	assert.Equal(t, `principal "dashboard" lacks read on every group (*)`, reader.Forbidden(membership.RightRead, "").Message)
	assert.Equal(t, `principal "sync-job" lacks admin`, writer.Forbidden(membership.RightAdmin, "x").Message)
	assert.Equal(t, membership.CodeForbidden, reader.Forbidden(membership.RightRead, "x").Code)

	ctx := membership.WithScope(context.Background(), reader)
	assert.Same(t, reader, membership.ScopeOf(ctx))
	assert.Nil(t, membership.ScopeOf(context.Background()))
}
