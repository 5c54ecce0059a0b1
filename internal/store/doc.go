// Package store holds the implementations of membership.Store: Memory, in
// memory, and Durable, the same behind a write-ahead log and snapshots; and
// the backups of both (Backup, Restore).
//
// # Concurrency
//
// These are all the locks, and the one order they are taken in. A lock
// later in the list is never held while one earlier is taken.
//
//  1. shard.mu (Memory.shards): a group's shard. A change holds its group's
//     shard, and only that one, from start to end; a reader of a group holds
//     it for reading. A backup holds every shard for reading, in index
//     order, while it copies the state (Memory.Backup).
//  2. reverseShard.mu (Memory.reverse): the reverse index of the uids that
//     hash to it. A change holds the reverse shards of every uid it names,
//     taken in ascending index order (lockReverse), from its first update of
//     the reverse index until its revision is recorded, so that each user's
//     groups change in the order of the revisions. UserGroups holds one for
//     reading.
//  3. groupNumbers.mu: the interned group ids. A change takes it with its
//     shard held, but never with a reverse shard held (a group's number is
//     drawn before lockReverse and freed after unlockReverse); UserGroups
//     takes it for reading with its reverse shard held.
//  4. nicknamesMu (Memory): the nicknames. A change that sets or clears
//     nicknames takes it after its reverse shards; a list takes it for
//     reading after its shard.
//  5. feed.mu: the change feed. Taken last, by feed.record (which runs the
//     change's published func under it, before any reader can see the
//     revision), and alone by readers of the feed.
//
// Every counter read without a lock (storeCounts, nicknameCount, the
// revisions in Memory) is an atomic, written under the lock of what it
// counts.
//
// Durable adds goroutines, not locks on the data: one committer goroutine
// (commitLoop) writes the log, fsyncs it and then applies each change to
// Memory, so Memory sees changes in log order; it alone writes the log's
// fields (Durable.data, log, logSeq, logSize, broken), except recover before
// it starts and Close after it stopped. A snapshot is copied by the
// committer (nothing else changes Memory, so the copy is consistent) and
// written by a goroutine of its own, which touches only files and atomics
// (snapping, stats) and is waited for by snapshotWG. The marker goroutine
// (markLoop) writes MARK from Durable.synced, which the committer sets under
// syncedMu after each fsync of the log; marker.mu serializes the writes of
// MARK and is held across their fsync. Neither lock is held while another is
// taken, and the committer never waits for the marker: a slow MARK delays
// no change. Writable, Metrics and Budgets read atomics only, from any
// goroutine.
package store
