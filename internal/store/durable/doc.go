// Package durable is a membership.Store that keeps its state in a
// memory.Store and makes every change durable in a data directory before
// applying it: a write-ahead log (package wal, its records package
// record's) fsynced before a change is applied or acknowledged, snapshots
// (package snap) that let the log restart, and DATA, which says what the
// directory holds. The store runs the commit loop, applies what the log
// holds to memory, and decides when to snapshot; the log owns its files.
// Open recovers the directory (recover.go), refusing damage or, with
// Options.Repair, mending it; Restore writes a directory from a backup.
//
// # Writes
//
// The log holds write requests (package record), not their effects: each is
// applied to memory as it was when it was written, so a replay gives every
// change its revision again. A write is first checked against memory
// (memory.Store.Check), read only: one that would change nothing, or whose
// precondition fails already, is answered without a record. The check is
// advice: memory checks the precondition again when the committer applies
// the write, in log order, so a write that another overtook in between is
// logged, answered CodePreconditionFailed, takes no revision, and fails the
// same way when the log is replayed. A batch is one record, applied by
// memory's Batch; only a precondition that fails already keeps it out of
// the log (batch.go).
//
// A write or batch with an Idempotency-Key keeps its key in its record
// (the key and its fingerprint, flagged in the op byte: package record), not in
// a file of its own, so the keys are remembered as the changes are: across
// restarts, crashes, snapshots (which hold the keys memory remembers), and
// backups. Before any check, memory is asked, read only, whether it
// remembers the key (memory.Store.ReplayWrite, ReplayBatch): a repeat is answered the first
// result, Replayed, without a record; a key remembered for another request
// is refused. A keyed write is logged even when it would change nothing,
// so that its key is remembered; one whose precondition fails already is
// not, and its key stays free. Memory decides each keyed record when the
// committer applies it, as of the record's time: two writes with one key
// that both came before the first was applied are both logged, and the
// second is a replay, answered the first's result, then and on every
// replay of the log. The keys memory remembers thus depend on the log
// alone (and the retention and budget of keys), never on when a caller
// asked.
//
// # Expiries
//
// A membership's expiry (membership.Expiry) is in the record of the add
// or replace that set it, as a time: the committer turns a TTL into the
// time it sets as of the commit (SetTime, with the time the record's
// stamp keeps) before it encodes the record, and memory applies the
// record as so resolved, then and on every replay. A write of an expiry
// the record cannot hold, at or before 1970, is refused. Memory keeps the
// expiries and their due set (the store's DueExpiries and friends are
// memory's); the expirer (package expiry) ends the memberships due with
// Write of a membership.OpExpire, which is logged as any write (op 7: the
// group, at most record.MaxExpireUIDs uids, and the time they were due as of),
// and not at all when it would end none. Replaying it ends the same
// memberships: a uid whose expiry was extended before the record was
// applied stays, then and on replay. Snapshots hold the members'
// expiries, and the feed's changes with theirs, and so do backups (but
// for the feed); what came due while the store was closed is due at once
// after Open, and the server ends it before it answers reads.
//
// # Groups in groups
//
// A nesting write (add_groups, remove_groups, replace_groups) is logged as
// any write is, its subgroups' expiries resolved to times as users' are.
// Memory's Check refuses a cycle, a chain too deep or a group below too
// many before the write is logged; the record keeps the bounds it was
// checked against (membership.Write.MaxDepth and MaxAncestors, a batch's
// Batch.MaxDepth and MaxAncestors), and memory applies the record with
// them, on commit and on replay: a write
// that another overtook between its check and its turn (a into b racing b
// into a) is logged, refused, and refused again on every replay, and a
// replay never depends on the bound the service runs with now. A batch's
// nesting writes apply each after the writes before it, so a check
// against the state before the batch can only refuse its first nesting
// write, and only when nothing before it can have changed the nesting
// (batch.go). Nestings that end by themselves are ended by the expirer's
// expire_groups (op 11, at most record.MaxExpireGroups subgroups), logged
// as expires are. Snapshots and backups hold the nestings and the groups
// that have subgroups but no member; the transitive reads are memory's.
//
// # Concurrency
//
// The store adds goroutines, not locks on the data (the memory.Store's
// locks are in its package's documentation; applyMu, below, only keeps
// backups out of a commit's applies): one committer goroutine
// (commitLoop) saves to the log (it writes and fsyncs it) and then
// applies each change to memory, so memory sees changes in log order; it
// alone saves, cuts and closes the log (Store.log), writes Store.dataFile
// and sets health.broken, except recover before it starts and Close after
// it stopped. A snapshot is copied by the committer (nothing else changes
// memory, so the copy is consistent) and written by a goroutine of its
// own, which touches only files and atomics (snapping, stats) and is
// waited for by snapshotWG. The marker goroutine (markLoop) writes MARK
// (wal.Log.Mark) from what the committer records after each fsync of the
// log (wal.Log.SetSynced); the log's lock for it is its own, held while
// no other is taken, and the committer never waits for the marker: a slow
// MARK delays no change. The committer holds applyMu
// while it applies a commit's changes to memory, and Backup while it
// copies memory, so that a backup never comes between a keyed write's
// change and memory remembering its key; memory's locks are taken under
// it, never the other way round, and it is held across no I/O. Writable,
// Stats, WriteMetrics and Budgets read atomics only, from any goroutine.
package durable
