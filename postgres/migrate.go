package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are the schema's versions, in order: NNNN_name.sql.
//
//go:embed migrations/*.sql
var migrations embed.FS

// Advisory lock keys: the migrations, and the sequencer.
const (
	migrateLockKey  = 0x6d656d6265727301 // "members" 1
	sequenceLockKey = 0x6d656d6265727302
)

// migration is one version of the schema.
type migration struct {
	version int
	name    string
	sql     string
}

// readMigrations returns the embedded migrations in version order.
func readMigrations() ([]migration, error) {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, name := range names {
		base := path.Base(name)
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: its name does not start with a version number", base)
		}
		sql, err := migrations.ReadFile(name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(sql)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return a.version - b.version })
	return ms, nil
}

// Migrate brings the database's schema up to this build's, under an
// advisory lock, so that instances starting together apply each version
// once: the first applies, the others wait, then find nothing to do. Each
// version is applied in a transaction of its own. It returns the versions
// it applied. A database at a version this build does not know is refused.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	ms, err := readMigrations()
	if err != nil {
		return nil, err
	}
	return migrate(ctx, pool, ms)
}

// migrate brings the schema up to the last of ms, as Migrate.
func migrate(ctx context.Context, pool *pgxpool.Pool, ms []migration) ([]int, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(migrateLockKey)); err != nil {
		return nil, err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(migrateLockKey)) //nolint:errcheck // the session's end releases it too
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS membership_schema (
		version    int PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, err
	}
	var current int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM membership_schema").Scan(&current); err != nil {
		return nil, err
	}
	if latest := ms[len(ms)-1].version; current > latest {
		return nil, &ConfigError{fmt.Errorf("the database's schema is at version %d, and this build knows versions up to %d: "+
			"run a build at least as new as the one that migrated it", current, latest)}
	}
	var applied []int
	for _, m := range ms {
		if m.version <= current {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO membership_schema (version, name) VALUES ($1, $2)", m.version, m.name)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("migration %s: %w", m.name, err)
		}
		applied = append(applied, m.version)
	}
	return applied, nil
}
