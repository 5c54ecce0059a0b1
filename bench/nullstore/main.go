// Command nullstore is the membership service with a store whose adds keep
// nothing: it parses, checks, counts, logs and answers a POST as the
// service does, with the store's work taken out. make bench measures its
// POST as the ceiling of a service that stores what it is sent.
package main

import (
	"context"
	"io"
	"sync/atomic"

	"example.com/groupmembership/internal/server"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
)

func main() { server.Main("nullstore", run) }

func run(ctx context.Context, args []string, lookupenv func(string) (string, bool), stdout, stderr io.Writer) error {
	return server.RunBackend(ctx, &server.Backend{
		Name:  "nullstore",
		About: "Its adds keep nothing: it is make bench's measure of what a POST costs besides the store.",
		Open: func(context.Context, server.StoreOptions) (server.Store, error) {
			return &nullStore{Store: memory.New()}, nil
		},
	}, args, lookupenv, stdout, stderr)
}

// nullStore is a memory.Store whose adds keep nothing and says that every
// user was added, at a new revision each time.
type nullStore struct {
	*memory.Store
	revision atomic.Uint64
}

func (s *nullStore) Write(ctx context.Context, w membership.Write) (membership.Result, error) {
	if w.Op == membership.OpAdd && w.If.IsZero() {
		return membership.Result{Count: len(w.Users), Revision: membership.Revision(s.revision.Add(1))}, nil
	}
	return s.Store.Write(ctx, w)
}
