package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest/memberstest"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/postgres/internal/pgtest"
)

// What one instance wrote, another sees with the same principals, and
// with each principal's keys: its repeat of a keyed request of the first
// is a replay, another principal's request with the key its own. So does
// an instance started afterwards, which reads the whole log.
func TestPostgresPrincipalsOnTwoInstances(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a, b := openOn(t, url, membership.DefaultChangesKeep), openOn(t, url, membership.DefaultChangesKeep)
	p := memberstest.WritePrincipals(t, a)
	require.NoError(t, b.catchUp(context.Background(), b.pool))
	memberstest.CheckPrincipals(t, b, p, true)
	c := openOn(t, url, membership.DefaultChangesKeep)
	memberstest.CheckPrincipals(t, c, p, true)
}

// The log's principal column holds the names, and refuses what is not
// one, as ValidatePrincipal does.
func TestPostgresPrincipalColumn(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	s := openOn(t, url, membership.DefaultChangesKeep)
	_, err := s.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}}, Principal: "sync-job"})
	require.NoError(t, err)
	_, err = s.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 2}}})
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT principal FROM membership_changes ORDER BY pos")
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[*string])
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.NotNil(t, got[0])
	assert.Equal(t, "sync-job", *got[0])
	assert.Nil(t, got[1], "none is NULL")
	for _, bad := range []string{"", "sync job", strings.Repeat("p", 65)} {
		_, err = conn.Exec(ctx, `INSERT INTO membership_changes (ticket, op, group_id, uids, principal) VALUES (0, 1, 'g', '{1}', $1)`, bad)
		assert.ErrorContains(t, err, "membership_changes_principal_check", "%q", bad)
	}
}
