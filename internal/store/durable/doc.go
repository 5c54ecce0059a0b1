// Package durable is a membership.Store that keeps its state in a
// memory.Store and makes every change durable in a data directory before
// applying it: a write-ahead log (records framed by package wal) fsynced
// before a change is applied or acknowledged, snapshots (package snap) that
// let the log restart, MARK, which says how far the newest log is known
// complete, and DATA, which says what the directory holds. Open recovers
// the directory (recover.go), refusing damage or, with Options.Repair,
// mending it; Restore writes a directory from a backup.
//
// # Writes
//
// The log holds write requests (entry.go), not their effects: each is
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
// # Concurrency
//
// The store adds goroutines, not locks on the data (the memory.Store's
// locks are in its package's documentation): one committer goroutine
// (commitLoop) writes the log, fsyncs it and then applies each change to
// memory, so memory sees changes in log order; it alone writes the log's
// fields (Store.dataFile, log, logSeq, logSize) and sets health.broken,
// except recover before it starts and Close after it stopped. A snapshot
// is copied by the committer (nothing else changes memory, so the copy is
// consistent) and written by a goroutine of its own, which touches only
// files and atomics (snapping, stats) and is waited for by snapshotWG. The
// marker goroutine (markLoop) writes MARK from Store.synced, which the
// committer sets under syncedMu after each fsync of the log; marker.mu
// serializes the writes of MARK and is held across their fsync. Neither
// lock is held while another is taken, and the committer never waits for
// the marker: a slow MARK delays no change. Writable, Stats, WriteMetrics
// and Budgets read atomics only, from any goroutine.
package durable
