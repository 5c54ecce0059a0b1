package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"time"
)

// regexpVersion finds the version in pg_ctl --version.
var regexpVersion = regexp.MustCompile(`\d+(\.\d+)*`)

// The attacks on membership-postgres, the service with its data in
// PostgreSQL: the same connection budget and probes, over a store that
// holds a pool of connections to the database. The database is a throwaway
// server of the harness's own, started from the machine's initdb and
// pg_ctl as postgres/internal/pgtest starts one for the tests (that package
// is in the postgres module, which the harness does not import).

// attackPgIdleConns is idle-conns against membership-postgres.
func attackPgIdleConns(ctx context.Context, h *harness, r *row) error {
	if err := canLimitNoFile(idleConnsLimit); err != nil {
		return err
	}
	pg, err := startPostgres(ctx, h)
	if err != nil {
		return err
	}
	defer pg.stop()
	bin, err := h.postgresBin(ctx)
	if err != nil {
		return err
	}
	s, log, err := startLogged(ctx, h, bin, "pg-idle-conns", serviceOptions{
		args:   []string{"-database-url", pg.url},
		nofile: idleConnsLimit,
	})
	if err != nil {
		return err
	}
	defer s.kill()
	r.notef("membership-postgres %s on PostgreSQL %s (a throwaway server on 127.0.0.1:%d)", bin, pg.version, pg.port)
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

// pgServer is a throwaway PostgreSQL server.
type pgServer struct {
	url     string
	port    int
	version string
	stop    func() // stops it and removes its files; registered with atExit
}

// startPostgres initdbs a cluster in a temporary directory and starts it
// on a free loopback port, as the postgres user when the harness is root
// (initdb refuses root).
func startPostgres(ctx context.Context, h *harness) (*pgServer, error) {
	bin, err := pgBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "membership-attack-pg-")
	if err != nil {
		return nil, err
	}
	remove := atExit("remove "+dir, func() { _ = os.RemoveAll(dir) })
	fail := func(err error) (*pgServer, error) {
		remove()
		return nil, err
	}
	data, run := filepath.Join(dir, "data"), filepath.Join(dir, "run")
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(err)
	}
	for _, d := range []string{data, run} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fail(err)
		}
	}
	asUser, err := pgUser(data, run)
	if err != nil {
		return fail(err)
	}
	pgRun := func(ctx context.Context, limit time.Duration, name string, args ...string) error {
		path := filepath.Join(bin, name)
		if asUser != "" {
			return command(ctx, limit, "runuser", append([]string{"-u", asUser, "--", path}, args...)...)
		}
		return command(ctx, limit, path, args...)
	}
	if err := pgRun(ctx, time.Minute, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c max_connections=200", port, run)
	if err := pgRun(ctx, time.Minute, "pg_ctl", "-D", data, "-l", filepath.Join(run, "server.log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		return fail(err)
	}
	stop := atExit("stop PostgreSQL in "+data, func() {
		// Immediate: nothing in it is worth a checkpoint. Not the attack's
		// context: the server must stop however the attack ended.
		if err := pgRun(context.Background(), 30*time.Second, "pg_ctl", "-D", data, "-m", "immediate", "-w", "-t", "20", "stop"); err != nil {
			fmt.Fprintln(os.Stderr, "attack:", err)
		}
		remove()
	})
	version := "?"
	if out, err := exec.CommandContext(ctx, filepath.Join(bin, "pg_ctl"), "--version").Output(); err == nil {
		version = string(regexpVersion.Find(out))
	}
	h.logf("PostgreSQL %s started on 127.0.0.1:%d", version, port)
	return &pgServer{
		url:     fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		port:    port,
		version: version,
		stop:    stop,
	}, nil
}

// pgBinDir finds the directory of initdb and pg_ctl: on the PATH, or in
// Debian's /usr/lib/postgresql/<version>/bin.
func pgBinDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(matches) == 0 {
		return "", errSkip("initdb and pg_ctl are not installed (apt-get install -y postgresql)")
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

// pgUser returns the user the server runs as, "" for this one, and gives
// it dirs when it is another.
func pgUser(dirs ...string) (string, error) {
	if os.Geteuid() != 0 {
		return "", nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return "", errors.Join(errSkip("running as root, and there is no postgres user to run PostgreSQL as"), err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, d := range dirs {
		if err := os.Chown(d, uid, gid); err != nil {
			return "", err
		}
	}
	return "postgres", nil
}
