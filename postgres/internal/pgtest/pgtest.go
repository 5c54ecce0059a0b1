// Package pgtest gives tests a PostgreSQL database of their own: on the
// server MEMBERSHIP_TEST_POSTGRES names when it is set, otherwise on a
// throwaway server (internal/pgserver, in a temporary directory), stopped
// when the tests end.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"example.com/groupmembership/internal/pgserver"
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

// start starts a throwaway server in a temporary directory, which Stop
// removes.
func start() (*Server, error) {
	dir, err := os.MkdirTemp("", "membership-pgtest-")
	if err != nil {
		return nil, err
	}
	pg, err := pgserver.Start(context.Background(), dir)
	if errors.Is(err, pgserver.ErrUnavailable) {
		err = fmt.Errorf("%w: install Debian's postgresql package (make test does), or set %s to a server's URL", err, EnvURL)
	}
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	u := &url.URL{Scheme: "postgres", User: url.User("postgres"), Host: "127.0.0.1:" + strconv.Itoa(pg.Port), Path: "/postgres"}
	return &Server{url: u, stop: func() error { return errors.Join(pg.Stop(), os.RemoveAll(dir)) }}, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToLower(hex.EncodeToString(b))
}
