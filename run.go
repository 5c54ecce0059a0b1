package main

import (
	"context"
	"io"

	"example.com/groupmembership/internal/server"
)

// run is the program: the service, or its -probe and -restore modes, as
// args ask (see server.Run).
func run(ctx context.Context, args []string, lookupenv func(string) (string, bool), stdout, stderr io.Writer) error {
	return server.Run(ctx, args, lookupenv, stdout, stderr)
}
