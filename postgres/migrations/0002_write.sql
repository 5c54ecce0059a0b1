-- Whole-group changes and conditional writes (issue 26).
--
-- New ops: 3 replace (uids and nicknames as for an add: the group's whole
-- new membership), 4 delete_group (no uid), 5 remove_user (one uid,
-- group_id ''). A build that predates them must not apply them: upgrade
-- every instance before a client uses them.
--
-- The precondition is checked when the change is applied, by every
-- instance alike, in the order of pos; a change whose precondition fails
-- changes nothing and takes no revision. The defaults mean "no
-- precondition", so the rows written before this version apply as they
-- did. A revision is stored as the bigint with its bits (a uint64 above
-- 2^63-1 is negative here, and reads back the same).
ALTER TABLE membership_changes DROP CONSTRAINT membership_changes_op_check;
-- NOT VALID: the rows already written hold 1 and 2, which the new check
-- admits; it is not worth reading the whole log under this lock to see so.
ALTER TABLE membership_changes ADD CONSTRAINT membership_changes_op_check
	CHECK (op BETWEEN 1 AND 5) NOT VALID;
ALTER TABLE membership_changes
	-- If-Match: the group's revision must be one of these; NULL for none.
	ADD COLUMN if_revisions bigint[],
	-- If-Match: *: the group must have members.
	ADD COLUMN if_exists boolean NOT NULL DEFAULT false,
	-- If-None-Match: *: the group must have none.
	ADD COLUMN if_empty boolean NOT NULL DEFAULT false;
