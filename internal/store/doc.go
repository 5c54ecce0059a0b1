// Package store is what every membership.Store of this service has in
// common besides the contract (storetest): the figures it reports for
// monitoring (Stats), and how they are written to /metrics.
//
// The stores are in the packages below it:
//
//   - memory: the in-memory index (groups, the reverse index from users to
//     groups, the change feed); every other store serves its reads from one;
//   - durable: memory made durable in a data directory: a write-ahead log
//     fsynced before a change is applied, snapshots, MARK, recovery and
//     repair;
//   - snap: the format of snapshots and backups;
//   - wal: the log: its records' framing, naming, replay, repair and cuts,
//     and (wal/record) what a record holds;
//   - writecodec: the layout of a write's users, uids, subgroups and
//     precondition, shared by the log's records and PostgreSQL's batches;
//   - storetest: the contract every store passes, a package for each part
//     (memberstest, feedtest, batchtest, expirytest, nestingtest), and the
//     helpers their tests share.
//
// The PostgreSQL store (module postgres) is a memory.Store that follows a
// log kept in the database.
package store
