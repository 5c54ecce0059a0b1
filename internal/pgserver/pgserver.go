// Package pgserver starts a throwaway PostgreSQL server: initdb in a
// directory, pg_ctl start on a free loopback port, as the postgres user
// when run as root (initdb refuses root). The postgres module's tests
// (through postgres/internal/pgtest) and the bench module's harnesses (make
// bench-postgres, make attack) start theirs with it; the service's binaries
// do not import it. Standard library only, so that neither module needs
// anything more for it.
package pgserver

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
	"strings"
	"time"
)

// ErrUnavailable is wrapped by the error of Start when this machine cannot
// run a server: no initdb and pg_ctl, or root without a postgres user.
var ErrUnavailable = errors.New("no throwaway PostgreSQL on this machine")

// Server is a running throwaway server.
type Server struct {
	URL     string // of its maintenance database, postgres, as user postgres
	Port    int
	Version string // pg_ctl's, "?" when it did not say

	data string
	ctl  func(ctx context.Context, limit time.Duration, name string, args ...string) error
}

// Start initdbs a cluster in dir/data and starts it, its socket and log in
// dir/run. dir must exist and be empty; the caller removes it, after Stop.
// On an error, no server is left running.
func Start(ctx context.Context, dir string) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	data, sockets := filepath.Join(dir, "data"), filepath.Join(dir, "run")
	// The server runs as postgres when we are root: it must reach dir.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	for _, d := range []string{data, sockets} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	asUser, err := serverUser(data, sockets)
	if err != nil {
		return nil, err
	}
	ctl := func(ctx context.Context, limit time.Duration, name string, args ...string) error {
		ctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		path := filepath.Join(bin, name)
		cmd := exec.CommandContext(ctx, path, args...)
		if asUser != "" {
			cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", asUser, "--", path}, args...)...)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := ctl(ctx, time.Minute, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c max_connections=200 -c max_locks_per_transaction=256", port, sockets)
	if err := ctl(ctx, time.Minute, "pg_ctl", "-D", data, "-l", filepath.Join(sockets, "server.log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		// A start that timed out may have left the server up.
		_ = ctl(context.Background(), 30*time.Second, "pg_ctl", "-D", data, "-m", "immediate", "-w", "-t", "20", "stop")
		return nil, err
	}
	version := "?"
	if out, err := exec.CommandContext(ctx, filepath.Join(bin, "pg_ctl"), "--version").Output(); err == nil {
		version = versionNumber.FindString(string(out))
	}
	return &Server{
		URL:     fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		Port:    port,
		Version: version,
		data:    data,
		ctl:     ctl,
	}, nil
}

// Stop stops the server at once: nothing in it is worth a checkpoint. It
// does not take the caller's context, so that it stops however the caller
// ended, and waits at most 30 s.
func (s *Server) Stop() error {
	return s.ctl(context.Background(), 30*time.Second, "pg_ctl", "-D", s.data, "-m", "immediate", "-w", "-t", "20", "stop")
}

// versionNumber finds the version in pg_ctl --version.
var versionNumber = regexp.MustCompile(`\d+(\.\d+)*`)

// binDir finds the directory of initdb and pg_ctl: on the PATH, or in
// Debian's /usr/lib/postgresql/<version>/bin.
func binDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(matches) == 0 {
		return "", fmt.Errorf("%w: initdb and pg_ctl are not installed (apt-get install -y postgresql)", ErrUnavailable)
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

// serverUser returns the user the server runs as, "" for this one, and
// gives it dirs when it is another.
func serverUser(dirs ...string) (string, error) {
	if os.Geteuid() != 0 {
		return "", nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return "", fmt.Errorf("%w: running as root, and there is no postgres user to run PostgreSQL as: %w", ErrUnavailable, err)
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

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
