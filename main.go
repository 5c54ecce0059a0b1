// Command membership serves the group membership service over HTTP.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The first SIGINT or SIGTERM starts a graceful shutdown; a second one
	// ends the process at once, with the shell's status for a signal.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		cancel()
		sig := <-signals
		fmt.Fprintf(os.Stderr, "membership: %v again: exiting at once\n", sig)
		os.Exit(128 + int(sig.(syscall.Signal)))
	}()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "membership: %v\n", err)
		os.Exit(1)
	}
}
