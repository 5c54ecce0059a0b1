-- Batches (issue 27): writes to many groups, applied all or nothing as one
-- change with one revision.
--
-- A batch is one row of op 6, its writes in the batch column, in the
-- encoding of batch.go (a count, then each write: its op, group id, users
-- or uids, and precondition); group_id is '' and uids empty. Its actor is
-- the batch's, and its time, sequenced_at, the batch's. Every instance
-- applies it, in the order of pos, through the memory store's Batch, which
-- checks every write's precondition against the state before the batch:
-- so every instance decides alike whether it is applied. A build that
-- predates it stops at it (an op it does not know): upgrade every instance
-- before a client sends batches.
ALTER TABLE membership_changes DROP CONSTRAINT membership_changes_op_check;
-- NOT VALID: the rows already written hold 1 to 5, which the new check
-- admits.
ALTER TABLE membership_changes ADD CONSTRAINT membership_changes_op_check
	CHECK (op BETWEEN 1 AND 6) NOT VALID;
-- The writes of a batch (op 6); NULL for the other ops.
ALTER TABLE membership_changes ADD COLUMN batch bytea;
