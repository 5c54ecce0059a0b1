package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"example.com/groupmembership/internal/pgserver"
)

// The attacks on membership-postgres, the service with its data in
// PostgreSQL: the same connection budget and probes, over a store that
// holds a pool of connections to the database. The database is a throwaway
// server of the harness's own (internal/pgserver).

// attackPgIdleConns is idle-conns against membership-postgres.
func attackPgIdleConns(ctx context.Context, h *harness, r *row) error {
	if err := canLimitNoFile(idleConnsLimit); err != nil {
		return err
	}
	pg, stop, err := startPostgres(ctx, h)
	if err != nil {
		return err
	}
	defer stop()
	bin, err := h.postgresBin(ctx)
	if err != nil {
		return err
	}
	s, log, err := startLogged(ctx, h, bin, "pg-idle-conns", serviceOptions{
		args:   []string{"-database-url", pg.URL},
		nofile: idleConnsLimit,
	})
	if err != nil {
		return err
	}
	defer s.kill()
	r.notef("membership-postgres %s on PostgreSQL %s (a throwaway server on 127.0.0.1:%d)", bin, pg.Version, pg.Port)
	return idleConns(ctx, h, s, log, r)
}

// postgresBin builds membership-postgres the first time it is needed,
// unless -pgbin named one.
func (h *harness) postgresBin(ctx context.Context) (string, error) {
	if h.pgBin != "" {
		return h.pgBin, nil
	}
	h.logf("building membership-postgres")
	bin, from, err := buildService(ctx, h, h.tmp, h.head, buildTarget{module: "postgres", pkg: "./cmd/membership-postgres", out: "membership-postgres"})
	if err != nil {
		return "", err
	}
	h.logf("built membership-postgres from %s", from)
	h.pgBin = bin
	return bin, nil
}

// startPostgres starts a throwaway PostgreSQL server in a temporary
// directory, and registers its stop and the directory's removal with
// atExit: the returned function runs them now.
func startPostgres(ctx context.Context, h *harness) (*pgserver.Server, func(), error) {
	dir, err := os.MkdirTemp("", "membership-attack-pg-")
	if err != nil {
		return nil, nil, err
	}
	remove := atExit("remove "+dir, func() { _ = os.RemoveAll(dir) })
	pg, err := pgserver.Start(ctx, dir)
	if err != nil {
		remove()
		if errors.Is(err, pgserver.ErrUnavailable) {
			return nil, nil, errSkip(err.Error())
		}
		return nil, nil, err
	}
	stop := atExit("stop PostgreSQL in "+dir, func() {
		if err := pg.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "attack:", err)
		}
		remove()
	})
	h.logf("PostgreSQL %s started on 127.0.0.1:%d", pg.Version, pg.Port)
	return pg, stop, nil
}
