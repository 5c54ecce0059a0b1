package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"example.com/groupmembership/internal/access"
	"example.com/groupmembership/internal/expiry"
	"example.com/groupmembership/internal/logsink"
	"example.com/groupmembership/membership"
)

// EmbeddedOptions configure NewEmbedded.
type EmbeddedOptions struct {
	// Args are the program's flags, as Run takes them, for the limits and
	// budgets they set (-max-body, -max-users, -changes-keep, ...), with
	// the same defaults and checks. Flags of what an embedded service has
	// not got (-addr and -admin-addr, -pprof, -data-dir, -token-file,
	// -acl-file, -restore, -probe, -hash-token, -version, -tls-cert,
	// -tls-key, -tls-client-ca) are refused.
	Args []string
	// Token, when set, is the bearer token, as -token-file gives it: the
	// principal named token, an admin.
	Token string
	// ACL, when set, is the content of an ACL file, as -acl-file gives it:
	// its principals, beside the token's. The embedded service does not
	// reload it.
	ACL []byte
	// Now, when set, is the service's clock: expiries are validated and
	// due on it, and changes are stamped with it; the expiries due are
	// then applied only by ExpireDue, never by a timer. Nil: the wall
	// clock, and the expiries are applied as they come due, as the
	// program does.
	Now func() time.Time
	// Log receives the service's log, as the program's stdout does. Nil
	// discards it.
	Log io.Writer
}

// Embedded is the service of the program without its listeners: the same
// handler, middleware, limits and auth, over a memory store, ready, for a
// caller that serves it itself (package membershiptest serves it on
// httptest). It is built by the code that builds the program's, so that
// the two cannot drift apart.
type Embedded struct {
	svc    *service
	store  Store
	exp    *expiry.Expirer
	logOut *logsink.Writer
	// stopExpiring stops the expirer's timer; nil with EmbeddedOptions.Now.
	stopExpiring func()
}

// NewEmbedded returns the service loaded and ready. Close it when done.
func NewEmbedded(opts EmbeddedOptions) (*Embedded, error) {
	cfg, err := parseFlags(opts.Args, io.Discard, nil)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name  string
		given bool
	}{
		{"-admin-addr", cfg.adminAddr != ""}, {"-data-dir", cfg.dataDir != ""}, {"-token-file", cfg.tokenFile != ""}, {"-acl-file", cfg.aclFile != ""},
		{"-hash-token", cfg.hashToken},
		{"-restore", cfg.restore != ""}, {"-probe", cfg.probe != ""}, {"-version", cfg.version}, {"-pprof", cfg.pprof},
		{"-tls-cert", cfg.tlsCert != ""}, {"-tls-key", cfg.tlsKey != ""}, {"-tls-client-ca", cfg.tlsClientCA != ""},
	} {
		if f.given {
			return nil, fmt.Errorf("%s: an embedded service has none (it keeps its data in memory, takes its token and ACL in EmbeddedOptions, "+
				"and its caller serves it, over TLS or not)", f.name)
		}
	}
	var live *access.Live
	if src := (access.Source{ACL: opts.ACL, Token: opts.Token, TokenSet: opts.Token != "", TokenName: "EmbeddedOptions.Token"}); src.Configured() {
		if live, err = access.Open(src); err != nil {
			return nil, err
		}
	} else if cfg.authReads {
		return nil, errors.New("-auth-reads needs a token or principals")
	}
	out := opts.Log
	if out == nil {
		out = io.Discard
	}
	logOut := logsink.New(out, logsink.Options{MaxBytes: cfg.logBuffer})
	logger := newLogger(cfg.logFormat, logOut)
	s := newService(cfg, connPlan{}, live, nil, logger, logOut)
	if opts.Now != nil {
		s.now = opts.Now
	}
	s.open = func(context.Context) (Store, error) {
		st, err := openStore(cfg, nil, logger)
		if err != nil || opts.Now == nil {
			return st, err
		}
		return clockedStore{Store: st, now: opts.Now}, nil
	}
	st, exp, err := s.load(context.Background())
	if err != nil {
		logOut.Close(logCloseTimeout)
		return nil, err
	}
	e := &Embedded{svc: s, store: st, exp: exp, logOut: logOut}
	if opts.Now == nil {
		e.stopExpiring = runExpirer(context.Background(), exp)
	}
	return e, nil
}

// Server returns the HTTP server of the service, with its handler,
// header limit and timeouts, as the program serves it (but the
// connection budget, which is the program's listener's); it is not
// serving: give it a listener (httptest.Server.Config, say).
func (e *Embedded) Server() *http.Server { return e.svc.srv }

// Handler returns the service's handler, as Server serves it.
func (e *Embedded) Handler() http.Handler { return e.svc.srv.Handler }

// ExpireDue applies the expiries due on the service's clock, and returns
// how many memberships it ended.
func (e *Embedded) ExpireDue(ctx context.Context) (int, error) { return e.exp.ExpireDue(ctx) }

// Stopping ends the waits of the /changes long polls, and those to come,
// as the program's shutdown does, so that a server can close without
// waiting for them.
func (e *Embedded) Stopping() { e.svc.stop() }

// Close stops the service: its long polls (Stopping), its expirer, its
// store and its log. Close the server serving it first.
func (e *Embedded) Close() error {
	e.svc.stop()
	e.svc.ready.Store(false)
	if e.stopExpiring != nil {
		e.stopExpiring()
	}
	err := e.store.Close()
	e.logOut.Close(logCloseTimeout)
	return err
}

// clockedStore stamps the writes it is given with its clock, as the
// stores with a log stamp theirs with the wall clock: the time of their
// change, from which a TTL counts, and the time their keys are kept from.
type clockedStore struct {
	Store
	now func() time.Time
}

func (s clockedStore) Write(ctx context.Context, w membership.Write) (membership.Result, error) {
	if w.Time.IsZero() {
		w.Time = s.now()
	}
	return s.Store.Write(ctx, w)
}

func (s clockedStore) Batch(ctx context.Context, b membership.Batch) (membership.BatchResult, error) {
	if b.Time.IsZero() {
		b.Time = s.now()
	}
	return s.Store.Batch(ctx, b)
}
