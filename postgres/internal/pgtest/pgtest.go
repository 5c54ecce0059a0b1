// Package pgtest gives tests a PostgreSQL database of their own: on the
// server MEMBERSHIP_TEST_POSTGRES names when it is set, otherwise on a
// throwaway server started from the machine's PostgreSQL binaries (initdb
// and pg_ctl, in a temporary directory, on a free loopback port, as the
// postgres user when run as root), stopped when the tests end.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the variable that points the tests at an existing server:
// a URL whose user may create databases.
const EnvURL = "MEMBERSHIP_TEST_POSTGRES"

// Server is a PostgreSQL server the tests create their databases on.
type Server struct {
	url  *url.URL // of its maintenance database
	stop func() error
}

var (
	shared    *Server
	sharedErr error
	sharedMu  sync.Mutex
)

// Main runs the tests of a package, then stops the throwaway server, if
// one was started. Call it from TestMain.
func Main(m interface{ Run() int }) int {
	code := m.Run()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil && shared.stop != nil {
		if err := shared.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest: stopping the throwaway server:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// NewDatabase creates an empty database for t, dropped when t ends, and
// returns its URL. It fails t, never skips it: a run that could not reach
// PostgreSQL is a failed run.
func NewDatabase(t testing.TB) string {
	t.Helper()
	s, err := server()
	if err != nil {
		t.Fatalf("pgtest: no PostgreSQL to test against: %v", err)
	}
	url, drop, err := s.CreateDatabase()
	if err != nil {
		t.Fatalf("pgtest: creating a database: %v", err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return url
}

// Start returns a server: the one MEMBERSHIP_TEST_POSTGRES names, or a
// throwaway one. Stop it when done.
func Start() (*Server, error) {
	if env := os.Getenv(EnvURL); env != "" {
		u, err := url.Parse(env)
		if err != nil {
			return nil, fmt.Errorf("%s is not a URL: %w", EnvURL, err)
		}
		return &Server{url: u}, nil
	}
	return start()
}

// Stop stops a throwaway server and removes its files; it leaves a server
// it did not start alone.
func (s *Server) Stop() error {
	if s.stop == nil {
		return nil
	}
	return s.stop()
}

// CreateDatabase creates an empty database, and returns its URL and a
// function that drops it.
func (s *Server) CreateDatabase() (string, func() error, error) {
	name := "membership_test_" + randomHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, err
	}
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("dropping %s: %w", name, err)
		}
		return nil
	}
	u := *s.url
	u.Path = "/" + name
	return u.String(), drop, nil
}

func (s *Server) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.url.String())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// server returns the shared server, starting it on first use.
func server() (*Server, error) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil || sharedErr != nil {
		return shared, sharedErr
	}
	shared, sharedErr = Start()
	return shared, sharedErr
}

// start starts a throwaway server.
func start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "membership-pgtest-")
	if err != nil {
		return nil, err
	}
	// The server runs as postgres when we are root: it must reach dir.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	data, sockets := filepath.Join(dir, "data"), filepath.Join(dir, "run") // run: the socket and the server's log
	for _, d := range []string{data, sockets} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	asUser, err := serverUser(dir, data, sockets)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	run := func(name string, args ...string) error {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		if asUser != "" {
			cmd = exec.Command("runuser", append([]string{"-u", asUser, "--", filepath.Join(bin, name)}, args...)...)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", name, err, out)
		}
		return nil
	}
	if err := run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c max_connections=200 -c max_locks_per_transaction=256", port, sockets)
	if err := run("pg_ctl", "-D", data, "-l", filepath.Join(sockets, "server.log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	stop := func() error {
		err := run("pg_ctl", "-D", data, "-m", "fast", "-w", "-t", "60", "stop")
		return errors.Join(err, os.RemoveAll(dir))
	}
	u := &url.URL{Scheme: "postgres", User: url.User("postgres"), Host: "127.0.0.1:" + strconv.Itoa(port), Path: "/postgres"}
	return &Server{url: u, stop: stop}, nil
}

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
		return "", fmt.Errorf("initdb and pg_ctl are not installed: install Debian's postgresql package "+
			"(make test does), or set %s to a server's URL", EnvURL)
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

// serverUser returns the user the server runs as, "" for this one: initdb
// refuses to run as root, so root runs it as postgres, giving it the
// directories.
func serverUser(dirs ...string) (string, error) {
	if os.Geteuid() != 0 {
		return "", nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return "", fmt.Errorf("running as root, and there is no postgres user to run the server as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, d := range dirs[1:] {
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

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToLower(hex.EncodeToString(b))
}
