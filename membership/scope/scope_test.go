package scope

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"example.com/groupmembership/membership/groupids"
)

func TestRightsIncludeTheOnesBefore(t *testing.T) {
	groups := groupids.New(nil, []string{"team-a/"})
	reader := New("dashboard", Read, groups)
	writer := New("sync-job", Write, groups)
	admin := New("ops", Admin, groupids.Set{})
	var nobody *Scope // no scope: everything

	assert.True(t, reader.Allows(Read, "team-a/x"))
	assert.False(t, reader.Allows(Write, "team-a/x"))
	assert.False(t, reader.Allows(Read, "team-b"))
	assert.True(t, writer.Allows(Read, "team-a/x"), "write reads too")
	assert.True(t, writer.Allows(Write, "team-a/x"))
	assert.False(t, writer.Allows(Admin, "team-a/x"))
	assert.False(t, writer.AllowsAll(Read))
	assert.True(t, admin.Allows(Write, "anything"))
	assert.True(t, admin.AllowsAll(Admin))
	assert.True(t, nobody.AllowsAll(Admin))
	assert.True(t, New("reads-all", Read, groupids.All()).AllowsAll(Read))
	assert.False(t, New("reads-all", Read, groupids.All()).AllowsAll(Write))
	assert.Equal(t, "write", Write.String())
	assert.Equal(t, "sync-job", writer.Principal())
	assert.Empty(t, nobody.Principal())

	assert.Nil(t, admin.Readable())
	assert.Equal(t, &groups, reader.Readable())
	assert.Empty(t, admin.ReadTag())
	assert.NotEmpty(t, reader.ReadTag())
	assert.Equal(t, reader.ReadTag(), writer.ReadTag(), "the same groups read: the same lists")
	assert.NotEqual(t, reader.ReadTag(), New("x", Read, groupids.New([]string{"team-b"}, nil)).ReadTag())

	ctx := With(context.Background(), reader)
	assert.Same(t, reader, Of(ctx))
	assert.Nil(t, Of(context.Background()))
}
