package postgres

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/postgres/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// openTest opens a store on a new database.
func openTest(t *testing.T, keep int) *Store {
	t.Helper()
	return openOn(t, pgtest.NewDatabase(t), keep)
}

// openOn opens a store on the database at url, closed when t ends. Its
// commit timeout is a minute: the contract is not about how fast this
// machine is (a batch deleting a million members, applied under -race
// beside two CPU hogs, took more than the default 5 s once); the tests of
// the timeout set their own.
func openOn(t *testing.T, url string, keep int) *Store {
	t.Helper()
	s, err := Open(context.Background(), url, Options{ChangesKeep: keep, CommitTimeout: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestPostgresContract(t *testing.T) {
	storetest.Contract(t, func(t *testing.T) membership.Store { return openTest(t, membership.DefaultChangesKeep) })
}

func TestPostgresRevisionsAndFeed(t *testing.T) {
	storetest.RevisionsAndFeed(t, openStoreForFeed)
}

func openStoreForFeed(t *testing.T, keep int) membership.Store { return openTest(t, keep) }
