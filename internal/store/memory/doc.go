// Package memory is the in-memory index of memberships. It is a
// membership.Store by itself (nothing survives the process), and the index
// the durable and PostgreSQL stores serve their reads from, applying every
// change to it themselves.
//
// Store holds the groups in locked shards and composes the parts below,
// each a package of its own that imports only the parts listed after it,
// and never the Store: the Store takes the locks, in the order below (the
// two parts that read or change it through a seam take them through it),
// and makes a change of their steps.
//
//   - transitive: the reads of groups in groups (Store embeds its Reader),
//     which read the Store through the seam of transitive.go and take its
//     locks in the order below;
//   - expiring: the expirer's side of the store (Store embeds its Queue):
//     the memberships and nestings due, and a round of them applied, through
//     the seam of expiring.go;
//   - batch: a batch's writes checked against their groups, and its
//     membership writes (and a group's attributes) applied to them, one
//     after another, with every lock held;
//   - directory: the accounts and the groups' attributes (Store embeds
//     its Directory): their writes applied with every lock held, and
//     their reads, through the seam of directory.go; and the removal of a
//     user from every group;
//   - nesting: the groups in groups, each nesting both ways with its end,
//     each group's ancestors, the nestings that end by themselves, and how
//     a nesting write changes them;
//   - group: a group (its members, their expiries, its revision) and how its
//     members change, the table of a shard's groups (their slots, which
//     number them, their ids, and the attributes of the few groups that
//     have some), and the index of the groups by id, for pages of groups;
//   - reverse: the reverse index, from users to the numbers of their groups;
//   - packed: the chunks of fixed-width deltas a group's members and the
//     reverse index's pairs are kept in;
//   - expiry: a group's expiries by member, and the due set of every expiry
//     by time;
//   - sortedset: the varint-delta chunks the expiries are kept in;
//   - nicknames: the nickname directory, and the accounts of provisioned
//     users (their attributes, account.Account) with the index of the
//     groups' attributes, which it guards;
//   - accounts: the accounts and that index, in tables without a lock;
//   - feed: the revisions and the change feed;
//   - keys: the Idempotency-Keys remembered;
//   - shards: a set of shards, locked in index order, and work spread over
//     them on every core.
//
// # Concurrency
//
// These are all the locks, and the one order they are taken in. A lock
// later in the list is never held while one earlier is taken.
//
//  0. the key table's applying lock (package keys): held for reading by a
//     write with an Idempotency key from before its change until its key
//     is remembered, and for writing by Backup (Table.Block), so that a
//     backup holds no change without its key.
//  1. nestMu (Store.nestMu): the nesting (package nesting, nest.go). A
//     nesting write, a group deletion, a batch that nests or deletes, the
//     expirer taking nestings due, and Check of a nesting write hold it
//     exclusively (Check of a group deletion, for reading); a transitive
//     read (package transitive) holds it for reading, then the shards of
//     what it reads: a list, the closure's, a piece at a time, letting go
//     of all between pieces; a member's record, the group's and the
//     user's groups', then the user's reverse shard; a check and a user's
//     groups, the users' reverse shards. A membership write never takes
//     it. It comes after the key table's applying lock, before every
//     other.
//  2. shard.mu (Store.shards): a group's shard. A change holds its group's
//     shard, and only that one, from start to end; a reader of a group holds
//     it for reading. A change of the nesting holds, in index order, the
//     shards of the groups at both ends of every nesting it can change
//     (nestingEnds), so that no change of their members comes between. A backup holds every shard for reading, in index
//     order, while it copies the state (Store.Backup).
//     Removing a user from every group holds every shard, in index order,
//     since it finds the user's groups in the reverse index, which comes
//     after. So does Groups, for reading, so that a page and its sizes are
//     of one revision. CheckMembers holds the shards of the groups it
//     checks, for reading, in index order, so that its answers are of one
//     revision.
//  3. indexMu: the group index, in id order (group.Index). A change takes
//     it, with its shard held, only to create or drop a group, and holds no
//     other lock then; Groups takes it for reading with every shard held.
//  4. a reverse shard's lock (package reverse, Store.reverse): the reverse
//     index of the uids that hash to it, and their revisions. A change
//     holds the reverse shards of every uid it names, taken in ascending
//     index order (Index.Lock), from its first update of the reverse index
//     until its revision is recorded (Index.UnlockAt, which gives the
//     users it changed their revision), so that each user's groups change
//     in the order of the revisions. UserGroups holds one for reading
//     (Index.RLock).
//  5. groupNumbers (group.Numbers): the ids of the groups' slots (group.Table), which
//     give the groups their numbers, and the groups' unnested revisions.
//     A change takes it with its shard held, to give a group a slot or
//     free one, or to note a group's unnested revision, but never with a
//     reverse shard held (a group's slot is taken before Index.Lock and
//     freed after Index.Unlock); UserGroups and the transitive reads take
//     it for reading with reverse shards held, the removal of a user from
//     every group (which holds every shard, so that no writer can want it)
//     with a reverse shard held, and the expirer alone, to read the id of
//     a number.
//  6. the nicknames' lock (package nicknames, Store.nicknames), which
//     guards the accounts and the index of groups' attributes too. A
//     change that sets or clears nicknames takes it after its reverse
//     shards; one that sets them holds it until its revision is published
//     (nicknames.Write), so that a list, which takes it for reading after
//     its shard, never shows a nickname with an older revision. A change
//     of an account (package directory) holds the user's reverse shard first,
//     so that no add of the user comes between its check and its change,
//     and, when it makes the account inactive, every shard before that,
//     as removing a user from every group does: an add or a replace,
//     which holds its group's shard, reads whether its users are inactive
//     (RefuseInactive) taking this lock for reading. A change of a group's
//     attributes holds the group's shard, and takes it to index them.
//  7. the change feed's lock (package feed). Taken by Feed.Record (which
//     runs the change's published func under it, before any reader can see
//     the revision), and alone by readers of the feed.
//  8. the due set's lock (expiry.Due, Store.due): the expiries of the
//     store by time, taken by a change that sets or ends an expiry, with
//     its shard held; by DueExpiries and NextExpiry alone; and by
//     RequeueExpiries with a shard held for reading.
//  9. the key table's mu (package keys): the Idempotency-Keys remembered.
//     A keyed write takes it alone, before its change to see whether the
//     key is known (and to mark it in flight) and after it to remember the
//     result; a backup takes it with every shard held, to copy the keys.
//  10. the leaves, after which nothing is taken: the nesting graph's map
//     of nodes (nesting.Graph's mapMu), taken by the deletion of a group
//     (NoteDropped) with its shard held, and by a nesting change with
//     nestMu held; and what the transitive reads keep (package
//     transitive): the closures', taken with the nesting held, and the
//     totals' and the merges', taken by a transitive list with its
//     closure's shards held.
//
// Every counter read without a lock (storeCounts, the reverse index's
// users, the nicknames' count and revision, the revisions in Store) is an
// atomic, written under the lock of what it counts.
package memory
