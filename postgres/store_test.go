package postgres

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/storetest/feedtest"
	"example.com/groupmembership/internal/store/storetest/memberstest"
	"example.com/groupmembership/internal/store/storetest/nestingtest"
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
	memberstest.Contract(t, func(t *testing.T) membership.Store { return openTest(t, membership.DefaultChangesKeep) })
}

func TestPostgresRevisionsAndFeed(t *testing.T) {
	feedtest.Contract(t, openStoreForFeed)
}

func openStoreForFeed(t *testing.T, keep int) membership.Store { return openTest(t, keep) }

// pair is two instances on one database as one store: it writes on one
// and reads on the other, which it has apply the log placed so far before
// each write returns, so that the reader shows every write acknowledged.
// A contract run on it checks that what one instance writes, the other
// shows alike.
type pair struct {
	*Store // the reader
	writer *Store
}

func (p pair) Write(ctx context.Context, w membership.Write) (membership.Result, error) {
	res, err := p.writer.Write(ctx, w)
	return res, orFollowed(err, p.follow(ctx))
}

func (p pair) Batch(ctx context.Context, b membership.Batch) (membership.BatchResult, error) {
	res, err := p.writer.Batch(ctx, b)
	return res, orFollowed(err, p.follow(ctx))
}

// orFollowed returns the write's err as it is, or else the reader's.
func orFollowed(err, followed error) error {
	if err != nil {
		return err
	}
	return followed
}

// follow has the reader apply the log as placed now: every change its
// writer acknowledged is placed already.
func (p pair) follow(ctx context.Context) error {
	if err := p.Store.catchUp(ctx, p.Store.pool); err != nil {
		return fmt.Errorf("the reader of a pair could not read the log: %w", err)
	}
	return nil
}

// openPair opens two instances on a new database as a pair.
func openPair(t *testing.T) pair {
	url := pgtest.NewDatabase(t)
	return pair{Store: openOn(t, url, membership.DefaultChangesKeep), writer: openOn(t, url, membership.DefaultChangesKeep)}
}

func TestPostgresNesting(t *testing.T) {
	nestingtest.Contract(t, func(t *testing.T) store.Expiring { return openTest(t, membership.DefaultChangesKeep) })
}

// The nesting contract with writes on one instance and reads on another.
func TestPostgresNestingOnTwoInstances(t *testing.T) {
	nestingtest.Contract(t, func(t *testing.T) store.Expiring { return openPair(t) })
}
