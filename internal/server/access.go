package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"example.com/groupmembership/internal/access"
)

// accessPollEvery is how often the files of the principals (-acl-file,
// -token-file) are looked at for a change, which reloads them.
const accessPollEvery = 2 * time.Second

// openAccess returns the principals cfg and the environment give, in
// force, or nil when they give none.
//
// Errors: a file that cannot be read or is refused, with the file, the
// line and why; -auth-reads without a principal.
func openAccess(cfg Config, lookupenv func(string) (string, bool)) (*access.Live, error) {
	src := access.Source{ACLFile: cfg.aclFile, TokenFile: cfg.tokenFile}
	if src.ACLFile == "" {
		if f, set := lookupenv("MEMBERSHIP_ACL_FILE"); set {
			if strings.TrimSpace(f) == "" {
				return nil, errors.New("MEMBERSHIP_ACL_FILE is set but blank: give it the ACL file, or unset it to run without one")
			}
			src.ACLFile = f
		}
	}
	if src.TokenFile == "" {
		src.Token, src.TokenSet = lookupenv("MEMBERSHIP_TOKEN")
	}
	if !src.Configured() {
		if cfg.authReads {
			return nil, errors.New("-auth-reads needs a token or principals: give -token-file, MEMBERSHIP_TOKEN or -acl-file")
		}
		return nil, nil
	}
	return access.Open(src)
}

// watchAccess reloads live on SIGHUP, and on each tick of ticks when one
// of its files changed, until the function it returns is called, which
// returns once it has stopped. Each reload is logged: the principals in
// force, or why the files were refused and the rules in force kept.
func watchAccess(ctx context.Context, live *access.Live, ticks <-chan time.Time, logger *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	stopWatch, _ := runUntilStopped(context.WithoutCancel(ctx), func(ctx context.Context) {
		live.Watch(ctx, ticks, hup, reportReload(logger))
	})
	return func() {
		stopWatch()
		signal.Stop(hup)
	}
}

// reportReload returns what logs each reload of the principals.
func reportReload(logger *slog.Logger) func(why string, principals int, err error) {
	return func(why string, principals int, err error) {
		if err != nil {
			logger.Error("reloading the principals failed: the rules in force stay", "on", why, "err", err)
			return
		}
		logger.Info("reloaded the principals", "on", why, "principals", principals)
	}
}

// hashToken is the -hash-token mode: it reads a token, one line, from
// stdin, and prints its secret for the ACL file. The token is never an
// argument, which ps and shell histories show.
func hashToken(stdin io.Reader, stdout io.Writer) error {
	line, err := bufio.NewReader(io.LimitReader(stdin, 64<<10)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the token from stdin: %w", err)
	}
	token := strings.TrimRight(line, "\r\n")
	if err := access.CheckToken(token); err != nil {
		return fmt.Errorf("the token on stdin %w (printf '%%s' \"$token\" | membership -hash-token)", err)
	}
	_, err = fmt.Fprintln(stdout, access.HashToken(token))
	return err
}
