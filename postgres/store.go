// Package postgres is a membership.Store on PostgreSQL, for teams that run
// more than one instance of the service: the database holds the log of
// changes, and every instance serves from memory the state that log
// builds, kept current by following it.
//
// A write is one INSERT into membership_changes, in a transaction of its
// own, so that concurrent writers share the database's fsyncs. A sequencer
// (one at a time across the instances, under an advisory lock, and a
// unique index besides) then gives the committed changes it sees their
// places in the log, pos = 1, 2, 3, … with no gap, in one transaction.
// Every instance applies the log in the order of pos to a memory.Store;
// the memory gives the revisions, the counts and the feed, and since it is
// deterministic, every instance gives every change the same revision. A
// writer answers once its own instance has applied its change, so a change
// written after another was acknowledged is placed after it.
//
// A conditional write (If-Match) is checked when it is applied, against
// the state the log built before it: memory decides, every instance
// alike, so of two writes racing with one ETag the first in the log wins
// and the other fails everywhere, taking no revision. Its writer gets the
// failure as the answer to its change (write.go).
//
// So is a write's Idempotency-Key: the row carries the key and the
// request's fingerprint, and memory, applying the log, decides whether the
// row repeats a keyed change it remembers, as of the row's time, every
// instance alike. A retry sent to any instance is applied once: the first
// row with the key is applied, a later one changes nothing, and its writer
// gets the first one's result, Replayed (write.go).
//
// So are memberships that end by themselves (membership.OpExpire). An
// add's or replace's row carries each user's expiry as a time (a TTL is
// turned into one by the writer's clock, as it writes the row), and every
// instance's memory keeps the expiries the log set. Every instance runs an
// expirer, which finds expiries due on its own clock and writes an expire
// row for them, with that time (as_of): memory, applying the row in the
// log's order, ends only the memberships whose expiry is still at or
// before it. So whichever instances are up, each membership ends once:
// when two instances write rows for the same expiries, the second changes
// nothing and takes no revision, everywhere alike.
//
// So are groups in groups (membership.Nesting). A nesting write's row
// carries its subgroups, their expiries as times, and the writer's bound
// on depth (Write.MaxDepth); memory, applying the log, refuses a row that
// would make a cycle or a chain deeper than its bound, against the state
// the log built before it, every instance alike. Of two writes racing (a
// into b, b into a, on two instances), the first placed in the log is
// applied and the second refused with CodeCycle, on every instance, and
// its writer gets that answer; a refused row changes nothing and takes no
// revision. This needs no lock beyond the sequencer's: the log's order is
// the one order every check is made in. What it costs is that a nesting
// write is checked once per instance, each in memory, and that a write
// the log refuses still takes a row. The transitive reads are memory's,
// each at one revision, and nestings that end by themselves end as
// memberships do: expire_groups rows with their time.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"example.com/groupmembership/internal/metrics"
	"example.com/groupmembership/internal/store"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/directory"
)

// Options configure Open.
type Options struct {
	// ChangesKeep and ChangesKeepBytes size the change feed, as in
	// memory.Options.
	ChangesKeep      int
	ChangesKeepBytes int64
	// IdempotencyBytes and IdempotencyRetention bound the
	// Idempotency-Keys remembered, as in memory.Options. Every instance
	// decides from the log whether a keyed write repeats one it
	// remembers: run them all with the same bounds.
	IdempotencyBytes     int64
	IdempotencyRetention time.Duration
	// CommitTimeout is the longest a change waits to be written, placed
	// and applied; past it the caller gets CodeUnavailable (the change may
	// still be applied later). DefaultCommitTimeout when <= 0.
	CommitTimeout time.Duration
	// Logger gets the store's warnings. Nil discards them.
	Logger *slog.Logger
}

// DefaultCommitTimeout is the default Options.CommitTimeout: as long as
// the durable store's default.
const DefaultCommitTimeout = 5 * time.Second

// Tuning.
const (
	// fetchRows bounds the changes read from the log at once.
	fetchRows = 256
	// sequenceRows bounds the changes the sequencer places at once.
	sequenceRows = 4096
	// retryInterval is how often the sequencer tries again while a change
	// of this instance waits for a place, and how long a lost connection
	// waits before it is tried again.
	retryInterval = 5 * time.Millisecond
	// idleInterval is how often an idle instance reads the log and
	// places changes without being told to: it places the changes of an
	// instance that died before placing them.
	idleInterval = time.Second
	// defaultMaxConns is the pool's size unless the URL sets
	// pool_max_conns: the writers that may wait for the database at once.
	// The connection that listens is taken out of the pool, which may then
	// open one more: 17 connections at most.
	defaultMaxConns = 16
	// maxConnIdle is how long an idle connection of the pool stays open:
	// idle connections give their slots back to other instances soon.
	maxConnIdle = 10 * time.Second
	// notifyChannel is where the sequencer says that it placed changes.
	notifyChannel = "membership_sequenced"
)

// Store is a membership.Store on PostgreSQL. See the package comment.
type Store struct {
	// ReadOnly serves every read from memory, which has applied the log,
	// ExpiryQueue says which expiries are due, and Nesting serves the reads
	// of groups in groups, each at one revision of it.
	memory.ReadOnly
	memory.ExpiryQueue
	membership.Nesting
	directory.Reader
	pool   *pgxpool.Pool
	mem    *memory.Store
	opts   Options
	logger *slog.Logger
	epoch  uint64

	// applyMu is held while the log is applied: one applier at a time.
	applyMu sync.Mutex
	// applied is the pos of the last change applied: written under
	// applyMu, read anywhere (answerHere).
	applied atomic.Int64

	waitMu  sync.Mutex
	waiters map[int64]chan outcome // by ticket

	kick      chan struct{} // wakes the sequencer
	stop      chan struct{}
	closeOnce sync.Once
	stopped   sync.WaitGroup

	// down says why the database cannot be reached, nil when it can.
	down atomic.Pointer[string]
	// broken is set when the log cannot be applied (a gap): for good.
	broken atomic.Pointer[string]

	lag *metrics.Histogram
}

var _ membership.Store = (*Store)(nil)

// Open connects to the database at url, applies the schema's migrations,
// reads the whole log into memory, and starts following it.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	s, err := openStill(ctx, url, opts)
	if err != nil {
		return nil, err
	}
	s.stopped.Add(2)
	go s.followLoop()
	go s.sequenceLoop()
	return s, nil
}

// openStill is Open but for following the log: the store it returns
// serves the log as it was when it opened, until its caller applies more.
func openStill(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.CommitTimeout <= 0 {
		opts.CommitTimeout = DefaultCommitTimeout
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(url, "pool_max_conns") {
		// Writers wait on the pool: the default (4 on 2 cores) makes them
		// queue for connections rather than share the database's fsyncs.
		cfg.MaxConns = defaultMaxConns
	}
	if !strings.Contains(url, "pool_max_conn_idle_time") {
		cfg.MaxConnIdleTime = maxConnIdle
	}
	if !strings.Contains(url, "pool_health_check_period") {
		cfg.HealthCheckPeriod = maxConnIdle / 2 // when idle connections are closed
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := &Store{
		pool: pool, opts: opts, logger: logger,
		waiters: map[int64]chan outcome{},
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		lag:     metrics.NewHistogram(metrics.DefaultDurationBuckets),
	}
	if err := s.open(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	c := cfg.ConnConfig
	logger.Info("opened the database", "host", c.Host, "port", c.Port, "database", c.Database, "user", c.User)
	return s, nil
}

// CheckURL returns a ConfigError when url is not a PostgreSQL URL (or
// key=value connection string) that Open can use; it connects to nothing.
func CheckURL(url string) error {
	_, err := parseURL(url)
	return err
}

func parseURL(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &ConfigError{fmt.Errorf("the database URL: %w", err)}
	}
	return cfg, nil
}

// keyBounds returns the bounds of the Idempotency-Keys remembered: the
// database's, which the first instance to open it set from its options.
// Every instance decides from the log whether a keyed row repeats one its
// memory remembers, and those decisions must not depend on which instance
// makes them, nor on the flags it was started with: otherwise instances,
// or one restarted with other flags, would give the same log other
// histories. An instance started with other bounds says so and uses the
// database's.
func (s *Store) keyBounds(ctx context.Context) (int64, time.Duration, error) {
	bytes, retention := s.opts.IdempotencyBytes, s.opts.IdempotencyRetention
	if bytes <= 0 {
		bytes = membership.DefaultIdempotencyBytes
	}
	if retention <= 0 {
		retention = membership.DefaultIdempotencyRetention
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO membership_meta (key, value) VALUES ('idempotency_bytes', $1), ('idempotency_retention_ms', $2)
		ON CONFLICT (key) DO NOTHING`, bytes, retention.Milliseconds()); err != nil {
		return 0, 0, err
	}
	var dbBytes, dbRetentionMS int64
	err := s.pool.QueryRow(ctx, `SELECT (SELECT value FROM membership_meta WHERE key = 'idempotency_bytes'),
		(SELECT value FROM membership_meta WHERE key = 'idempotency_retention_ms')`).Scan(&dbBytes, &dbRetentionMS)
	if err != nil {
		return 0, 0, err
	}
	dbRetention := time.Duration(dbRetentionMS) * time.Millisecond
	if dbBytes != bytes || dbRetention != retention {
		s.logger.Warn("the database's bounds of the Idempotency-Keys differ from this instance's flags: using the database's, as every instance does",
			"idempotency_bytes", dbBytes, "idempotency_retention", dbRetention, "flag_idempotency_bytes", bytes, "flag_idempotency_retention", retention)
	}
	return dbBytes, dbRetention, nil
}

// open migrates, reads the epoch, and applies the log so far.
func (s *Store) open(ctx context.Context) error {
	applied, err := Migrate(ctx, s.pool)
	if err != nil {
		return fmt.Errorf("migrating the schema: %w", err)
	}
	if len(applied) > 0 {
		s.logger.Info("migrated the database's schema", "versions", applied)
	}
	epoch := int64(rand.Uint64()>>1) | 1 // never 0, which would have each instance draw its own
	if _, err := s.pool.Exec(ctx, "INSERT INTO membership_meta (key, value) VALUES ('epoch', $1) ON CONFLICT (key) DO NOTHING", epoch); err != nil {
		return err
	}
	if err := s.pool.QueryRow(ctx, "SELECT value FROM membership_meta WHERE key = 'epoch'").Scan(&epoch); err != nil {
		return err
	}
	s.epoch = uint64(epoch)
	keyBytes, keyRetention, err := s.keyBounds(ctx)
	if err != nil {
		return err
	}
	s.mem = memory.NewWith(memory.Options{ChangesKeep: s.opts.ChangesKeep, ChangesKeepBytes: s.opts.ChangesKeepBytes, Epoch: s.epoch,
		IdempotencyBytes: keyBytes, IdempotencyRetention: keyRetention, ReplaysCountedByCaller: true})
	s.ReadOnly, s.ExpiryQueue, s.Nesting, s.Reader = s.mem, s.mem, s.mem, s.mem
	if _, err := s.sequence(ctx); err != nil {
		return fmt.Errorf("placing the changes in the log: %w", err)
	}
	return s.catchUp(ctx, s.pool)
}

// ConfigError is an error of Open that trying again cannot mend: a bad URL,
// a schema newer than this build.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Close stops following the log and closes the connections. Writes still
// waiting get CodeUnavailable.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.stopped.Wait()
		s.pool.Close()
	})
	return nil
}

// Epoch implements membership.Store: the database's, the same on every
// instance.
func (s *Store) Epoch() uint64 { return s.epoch }

// Writable returns why the store cannot take changes now, or nil.
func (s *Store) Writable() error {
	if why := s.broken.Load(); why != nil {
		return membership.Errorf(membership.CodeUnavailable, "%s", *why)
	}
	if why := s.down.Load(); why != nil {
		return membership.Errorf(membership.CodeUnavailable, "%s", *why)
	}
	return nil
}

// Stats returns the memory's figures and how far behind the log it runs.
func (s *Store) Stats() store.Stats {
	st := s.mem.Stats()
	st.Follow = &store.FollowStats{Lag: s.lag}
	return st
}

// WriteMetrics writes the store's figures to /metrics.
func (s *Store) WriteMetrics(w *metrics.Writer) { s.Stats().WriteMetrics(w) }

// Budgets returns the store's memory budgets: the changes the feed keeps.
func (s *Store) Budgets() []metrics.Budget { return s.Stats().Budgets() }

// Backup returns a consistent copy of the state this instance serves.
func (s *Store) Backup() *snap.Backup { return s.mem.Backup() }

// outcome is what applying a change gave: its writer's answer, a write's
// res or a batch's batch, or err.
type outcome struct {
	res   membership.Result
	batch membership.BatchResult
	err   error
}

// commit writes c, a write, to the log and waits until this instance has
// applied it: its answer is what applying it gave, a failed precondition
// included.
func (s *Store) commit(ctx context.Context, c change) (membership.Result, error) {
	o := s.submit(ctx, c)
	return o.res, o.err
}

// submit is commit of any change, a batch included.
func (s *Store) submit(ctx context.Context, c change) outcome {
	if err := s.Writable(); err != nil {
		return outcome{err: err}
	}
	ticket := int64(rand.Uint64())
	done := make(chan outcome, 1)
	s.waitMu.Lock()
	s.waiters[ticket] = done
	s.waitMu.Unlock()
	defer func() {
		s.waitMu.Lock()
		delete(s.waiters, ticket)
		s.waitMu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, s.opts.CommitTimeout)
	defer cancel()
	var key *string // NULL: none
	var fingerprint []byte
	if c.idem.Key != "" {
		key, fingerprint = &c.idem.Key, c.idem.Fingerprint[:]
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO membership_changes
		(ticket, op, group_id, uids, nicknames, if_revisions, if_exists, if_empty, actor, batch, idem_key, idem_fingerprint,
		expiries, as_of, subgroups, subgroup_expiries, max_depth, max_ancestors, principal, attributes)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)`,
		ticket, c.op, c.groupID, c.uids, c.nicknames, c.ifRevisions, c.ifExists, c.ifEmpty, c.actor, c.batch, key, fingerprint,
		c.expiries, c.asOf, c.subgroups, c.subgroupExpiries, c.maxDepth, c.maxAncestors, c.principal, c.attributes)
	if err != nil {
		if ctx.Err() != nil {
			return outcome{err: membership.Errorf(membership.CodeUnavailable,
				"the database did not confirm the change within %s: it may still be applied; read the group to know", s.opts.CommitTimeout)}
		}
		var refused *pgconn.PgError
		if pgconn.SafeToRetry(err) || errors.As(err, &refused) { // nothing was sent, or the database refused it
			return outcome{err: membership.Errorf(membership.CodeUnavailable, "the database did not take the change (%v); nothing was changed", err)}
		}
		return outcome{err: membership.Errorf(membership.CodeUnavailable,
			"the database did not confirm the change (%v): it may still be applied; read the group to know", err)}
	}
	s.kickSequencer()
	select {
	case o := <-done:
		return o
	case <-ctx.Done():
		return outcome{err: membership.Errorf(membership.CodeUnavailable,
			"the change is in the database, but was not applied here within %s; it will be: read the group to see it", s.opts.CommitTimeout)}
	case <-s.stop:
		return outcome{err: membership.Errorf(membership.CodeUnavailable, "the store is closing; the change is in the database and will be applied")}
	}
}

// kickSequencer has the sequencer place the changes written, soon.
func (s *Store) kickSequencer() {
	select {
	case s.kick <- struct{}{}:
	default: // it will run already
	}
}

// pending says whether a change of this instance waits to be applied.
func (s *Store) pending() bool {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	return len(s.waiters) > 0
}

// sequenceSQL places up to sequenceRows committed changes in the log, in
// the order of their ids, after the last placed. The caller holds the
// sequencer's lock, so no other transaction places changes meanwhile: what
// is placed is placed once, with no gap (the unique index on pos would
// refuse a second sequencer's places besides). A change that commits
// later is placed by a later run, after these: the log's order is the
// order in which the sequencer found the changes committed.
const sequenceSQL = `
WITH last AS (SELECT coalesce(max(pos), 0) AS pos FROM membership_changes),
ready AS (
	SELECT id, row_number() OVER (ORDER BY id) AS n FROM (
		SELECT id FROM membership_changes WHERE pos IS NULL ORDER BY id LIMIT $1) r),
placed AS (
	UPDATE membership_changes c SET pos = last.pos + ready.n, sequenced_at = clock_timestamp()
	FROM ready, last WHERE c.id = ready.id
	RETURNING c.pos)
SELECT count(*), coalesce(max(pos), 0) FROM placed`

// sequence places the changes that can be placed, unless another instance
// is placing changes now, and tells every instance of them. It returns how
// many it placed.
func (s *Store) sequence(ctx context.Context) (int64, error) {
	var placed, last int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The lock is the transaction's: should this instance freeze
		// holding it, the server ends the session after 2 s idle, and
		// another instance places the changes.
		var locked bool
		if err := tx.QueryRow(ctx, "SELECT set_config('idle_in_transaction_session_timeout', '2s', true) IS NOT NULL AND pg_try_advisory_xact_lock($1)",
			int64(sequenceLockKey)).Scan(&locked); err != nil || !locked {
			return err // another instance is placing changes: it will say so
		}
		if err := tx.QueryRow(ctx, sequenceSQL, sequenceRows).Scan(&placed, &last); err != nil || placed == 0 {
			return err
		}
		_, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", notifyChannel, fmt.Sprint(last))
		return err
	})
	return placed, err
}

// sequenceLoop places changes when this instance wrote one, again and
// again while one of its changes waits, and every idleInterval.
func (s *Store) sequenceLoop() {
	defer s.stopped.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-s.stop; cancel() }()
	timer := time.NewTimer(idleInterval)
	defer timer.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
		case <-timer.C:
		}
		placed, err := s.sequence(ctx)
		if err != nil && ctx.Err() == nil && s.down.Load() == nil { // a lost database is logged once, by followLoop
			s.logger.Warn("placing changes in the log failed", "err", err)
		}
		next := idleInterval
		if s.pending() || placed == sequenceRows {
			next = retryInterval
		}
		timer.Reset(next)
	}
}

// querier is a connection, or the pool.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// catchUp applies the log from the last change applied to its end,
// reading it through q.
func (s *Store) catchUp(ctx context.Context, q querier) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	for {
		n, err := s.applyPage(ctx, q)
		if err != nil || n < fetchRows {
			return err
		}
	}
}

// applyPage applies up to fetchRows changes after the last applied, and
// returns how many. The caller holds applyMu.
func (s *Store) applyPage(ctx context.Context, q querier) (int, error) {
	rows, err := q.Query(ctx, `SELECT pos, ticket, op, group_id, uids, nicknames, if_revisions, if_exists, if_empty, actor, batch,
		idem_key, idem_fingerprint, expiries, as_of, subgroups, subgroup_expiries, max_depth, max_ancestors, principal, attributes,
		coalesce(sequenced_at, appended_at), extract(epoch FROM clock_timestamp() - appended_at)::float8
		FROM membership_changes WHERE pos > $1 ORDER BY pos LIMIT $2`, s.applied.Load(), fetchRows)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var c logEntry
		var key *string
		var fingerprint []byte
		if err := rows.Scan(&c.pos, &c.ticket, &c.op, &c.groupID, &c.uids, &c.nicknames,
			&c.ifRevisions, &c.ifExists, &c.ifEmpty, &c.actor, &c.batch, &key, &fingerprint, &c.expiries, &c.asOf,
			&c.subgroups, &c.subgroupExpiries, &c.maxDepth, &c.maxAncestors, &c.principal, &c.attributes, &c.sequencedAt, &c.age); err != nil {
			return n, err
		}
		why := ""
		if applied := s.applied.Load(); c.pos != applied+1 {
			why = fmt.Sprintf("the log has a gap: after change %d comes %d; this instance stops taking changes: restart it", applied, c.pos)
		} else if !c.known() {
			why = fmt.Sprintf("change %d of the log has op %d, which this build does not know: "+
				"this instance stops taking changes: restart it on the build that wrote it", c.pos, c.op)
		} else if bad := c.unreadable(); bad != "" {
			// The database's checks refuse these too (0006).
			why = fmt.Sprintf("change %d of the log cannot be applied as written: %s; this instance stops taking changes", c.pos, bad)
		} else if key != nil && (*key == "" || len(fingerprint) != len(c.idem.Fingerprint)) {
			// The database's check refuses these: a row that holds one
			// anyway is not applied without its key, nor skipped.
			why = fmt.Sprintf("change %d of the log has an Idempotency-Key that cannot be read (%d bytes of fingerprint): "+
				"this instance stops taking changes", c.pos, len(fingerprint))
		} else if c.op == opBatch {
			if c.writes, err = decodeBatch(c.batch); err != nil {
				why = fmt.Sprintf("change %d of the log is a batch that cannot be read (%v): "+
					"this instance stops taking changes", c.pos, err)
			}
		}
		if why != "" {
			s.broken.Store(&why)
			return n, errors.New(why)
		}
		if key != nil {
			c.idem.Key = *key
			copy(c.idem.Fingerprint[:], fingerprint)
		}
		s.apply(ctx, c) // which marks c.pos applied
		n++
	}
	return n, rows.Err()
}

// logEntry is a change read from the log.
type logEntry struct {
	change
	pos, ticket int64
	age         float64 // seconds since it was written, by the database's clock
	// writes are a batch's, decoded from its batch column.
	writes []membership.Write
}

// apply applies c to memory, marks its position applied, and answers its
// writer, if it waits here.
// Memory decides, every instance alike, whether c's precondition holds:
// one that does not is its writer's answer, and changes nothing anywhere.
// So it decides whether c's Idempotency key repeats a keyed change it
// remembers, as of c's time: a repeat changes nothing, and its writer
// gets the first change's result, Replayed; the key of another request,
// CodeIdempotencyKeyReused. The change takes the time, actor and
// principal of its row, so every instance gives it the same ones.
func (s *Store) apply(ctx context.Context, c logEntry) {
	start := time.Now()
	var o outcome
	if c.op == opBatch {
		o.batch, o.err = s.mem.Batch(ctx, c.batchOf(c.writes))
	} else {
		o.res, o.err = s.mem.Write(ctx, c.write())
	}
	if err := o.err; err != nil {
		switch membership.ErrorCode(err) {
		case membership.CodePreconditionFailed, membership.CodeIdempotencyKeyReused, membership.CodeCycle, membership.CodeTooDeep,
			membership.CodeTooManyAncestors:
		default:
			// Memory refuses nothing else: the writers' Service checked it.
			// A cycle or a chain too deep is found here, against the
			// state before c, by every instance alike.
			s.logger.Error("applying a change of the log failed", "pos", c.pos, "err", err)
		}
	}
	s.lag.Observe(time.Duration(c.age*float64(time.Second)) + time.Since(start))
	// Applied before its writer is answered: the writer's next write asks
	// caughtUp, which must count this change, or it would send a write
	// memory could answer to the log.
	s.applied.Store(c.pos)
	s.waitMu.Lock()
	done := s.waiters[c.ticket]
	s.waitMu.Unlock()
	if done != nil {
		select {
		case done <- o:
		default: // answered already: a ticket is in the log once
		}
	}
}

// followLoop listens for the sequencer's word on a connection of its own
// and applies the log as it grows. When the database cannot be reached, it
// says so (Writable), and tries again until it can.
func (s *Store) followLoop() {
	defer s.stopped.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-s.stop; cancel() }()
	for ctx.Err() == nil {
		err := s.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		// Clients are told no more than that: the error names the
		// database's address and user, which the log keeps.
		why := "the database cannot be reached (the service's log says why); nothing was changed: try again later"
		if s.down.Swap(&why) == nil {
			s.logger.Warn("lost the database; trying again", "err", err)
		}
		select {
		case <-s.stop:
			return
		case <-time.After(retryInterval * 20):
		}
	}
}

// follow listens and applies until the connection fails or ctx ends.
func (s *Store) follow(ctx context.Context) error {
	// The listening connection is taken out of the pool: when the server
	// has no slot left, an idle connection of the pool serves.
	pooled, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pooled.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	for {
		// The log is read on this connection: following needs no other.
		if err := s.catchUp(ctx, conn); err != nil {
			return err
		}
		if s.down.Swap(nil) != nil {
			s.logger.Info("the database is back")
		}
		if s.broken.Load() != nil {
			<-ctx.Done()
			return ctx.Err()
		}
		wait, cancel := context.WithTimeout(ctx, idleInterval)
		_, err := conn.WaitForNotification(wait)
		cancel()
		if err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if s.pending() {
			s.kickSequencer() // it may have been busy elsewhere
		}
	}
}
