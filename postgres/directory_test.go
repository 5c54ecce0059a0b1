package postgres

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest/directorytest"
	"example.com/groupmembership/internal/store/writecodec"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
)

func TestPostgresDirectoryContract(t *testing.T) {
	directorytest.Contract(t, func(t *testing.T) directorytest.Store { return openTest(t, membership.DefaultChangesKeep) })
}

// The directory contract with writes on one instance and reads on another.
func TestPostgresDirectoryOnTwoInstances(t *testing.T) {
	directorytest.Contract(t, func(t *testing.T) directorytest.Store { return openPair(t) })
}

// The database refuses directory rows that no writer writes: attributes
// on another op, or a set_user or set_group without them.
func TestTheLogRefusesDirectoryRowsItCannotApply(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, 0)
	for _, sql := range []string{
		"INSERT INTO membership_changes (ticket, op, group_id, uids) VALUES (1, 12, '', '{1}')",
		"INSERT INTO membership_changes (ticket, op, group_id, uids) VALUES (1, 14, 'g', '{}')",
		"INSERT INTO membership_changes (ticket, op, group_id, uids, attributes) VALUES (1, 13, '', '{1}', '\\x00')",
		"INSERT INTO membership_changes (ticket, op, group_id, uids, attributes) VALUES (1, 1, 'g', '{1}', '\\x00')",
	} {
		_, err := s.pool.Exec(ctx, sql)
		assert.ErrorContains(t, err, "membership_changes_attributes_check", sql)
	}
	assert.Zero(t, logRows(t, s))
}

// A row whose attributes cannot be read (one the checks let through)
// stops the instance rather than be applied otherwise or skipped.
func TestADirectoryRowThatCannotBeReadStopsTheInstance(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, 0)
	bad := writecodec.AppendAccount(nil, account.Account{UserName: "u"})
	bad[len(bad)-2] = 0xff // a count past the end: cut short
	_, err := s.pool.Exec(ctx, "INSERT INTO membership_changes (ticket, op, group_id, uids, attributes) VALUES (1, 12, '', '{5}', $1)", bad)
	require.NoError(t, err)
	s.kickSequencer()
	untilWritable(t, s, false)
	assert.Contains(t, s.Writable().Error(), "attributes that cannot be read")
}

// A directory write goes through the log as it was asked: the account's
// attributes, the user's precondition, and a set_group in a batch; every
// instance applies them alike.
func TestDirectoryWritesGoThroughTheLog(t *testing.T) {
	ctx := context.Background()
	p := openPair(t)
	a := account.Account{UserName: "alice", ExternalID: "x", DisplayName: "Al\x00ice", GivenName: "A", FamilyName: "L", Email: "a@example.com", Active: true}
	_, err := p.Write(ctx, membership.Write{Op: membership.OpSetUser, UIDs: []membership.UID{7}, Account: &a, If: membership.Precondition{Empty: true}})
	require.NoError(t, err)
	u, ok, err := p.Store.User(ctx, 7)
	require.NoError(t, err)
	require.True(t, ok, "the reader shows the account")
	assert.Equal(t, a, u.Account)
	_, err = p.Write(ctx, membership.Write{Op: membership.OpSetUser, UIDs: []membership.UID{8}, Account: &account.Account{UserName: "ALICE"}})
	assert.Equal(t, membership.CodeUserNameTaken, membership.ErrorCode(err))
	_, err = p.Batch(ctx, membership.Batch{Writes: []membership.Write{
		{Op: membership.OpSetGroup, GroupID: "g", Group: &account.GroupAttributes{DisplayName: "Gee"}, If: membership.Precondition{Empty: true}},
		{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 7}}},
	}})
	require.NoError(t, err)
	g, ok, err := p.Store.Group(ctx, "g", nil)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, account.GroupAttributes{DisplayName: "Gee"}, g.Attributes)
	assert.Equal(t, 1, g.Members)
	res, err := p.Write(ctx, membership.Write{Op: membership.OpDeleteUser, UIDs: []membership.UID{7}, If: membership.Precondition{Revisions: []membership.Revision{u.Revision}}})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Count, "it left g")
	_, ok, err = p.Store.User(ctx, 7)
	require.NoError(t, err)
	assert.False(t, ok)
}
