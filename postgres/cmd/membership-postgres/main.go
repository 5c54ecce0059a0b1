// Command membership-postgres is the membership service with its data in
// PostgreSQL: the same flags, routes and replies as membership, plus the
// database's URL (-database-url, or DATABASE_URL). Several instances on
// one database behave as one.
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"time"

	"example.com/groupmembership/internal/server"
	"example.com/groupmembership/postgres"
)

func main() { server.Main("membership-postgres", run) }

// run is the program, as server.RunBackend runs it.
func run(ctx context.Context, args []string, lookupenv func(string) (string, bool), stdout, stderr io.Writer) error {
	return server.RunBackend(ctx, backend(), args, lookupenv, stdout, stderr)
}

// retryInterval is how long a start waits before it tries an unreachable
// database again.
const retryInterval = time.Second

// backend is the PostgreSQL store and its flag.
func backend() *server.Backend {
	var url string
	return &server.Backend{
		Name:  "membership-postgres",
		About: "It keeps its data in PostgreSQL (-database-url), which every instance on the same database shares.",
		// The pool's connections and the one that listens (17 by default),
		// with room for a pool_max_conns of up to 63 in the URL.
		Descriptors: 64,
		AddFlags: func(fs *flag.FlagSet) {
			fs.StringVar(&url, "database-url", "", "the PostgreSQL `URL`, postgres://user:password@host/db; empty: $DATABASE_URL")
		},
		Check: func(getenv func(string) string) error {
			if url == "" {
				url = getenv("DATABASE_URL")
			}
			if url == "" {
				return errors.New("no database: give -database-url or DATABASE_URL")
			}
			return postgres.CheckURL(url)
		},
		Open: func(ctx context.Context, o server.StoreOptions) (server.Store, error) {
			opts := postgres.Options{ChangesKeep: o.ChangesKeep, ChangesKeepBytes: o.ChangesKeepBytes, CommitTimeout: o.CommitTimeout, Logger: o.Logger,
				IdempotencyBytes: o.IdempotencyBytes, IdempotencyRetention: o.IdempotencyRetention}
			for {
				s, err := postgres.Open(ctx, url, opts)
				var permanent *postgres.ConfigError
				if err == nil || errors.As(err, &permanent) || ctx.Err() != nil {
					return s, err
				}
				o.Logger.Warn("cannot open the database; trying again", "err", err, "in", retryInterval)
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(retryInterval):
				}
			}
		},
	}
}
