-- Accounts and group attributes: what an identity provider keeps of users
-- and groups (SCIM).
--
-- New ops: 12 set_user, 13 delete_user, 14 set_group. A set_user and a
-- delete_user name their user in uids (one uid) and no group (group_id
-- ''); their precondition (if_revisions, if_exists, if_empty) is of the
-- user: its account's revision, that it has an account, that the uid is
-- free. A set_group names its group and no uid, its precondition of the
-- group as any other write's.
--
-- attributes holds a set_user's account or a set_group's attributes, as
-- package writecodec lays them out (AppendAccount, AppendGroupAttributes);
-- NULL for every other op. A batch (op 6) may hold set_group writes, in
-- its batch column (batch.go).
--
-- The accounts and attributes themselves are not a table: as the
-- memberships, they are the state the log builds in every instance's
-- memory, which checks, as it applies each row in the order of pos, that
-- no other account has the user name, and refuses an add of an inactive
-- user: every instance decides alike.
--
-- A build that predates it stops taking changes at the first row of op 12
-- to 14, or at a batch holding a set_group (an op it does not know). It
-- cannot start on a database at this version, but one still running goes
-- on applying the log: stop every old instance before an identity
-- provider writes.
ALTER TABLE membership_changes DROP CONSTRAINT membership_changes_op_check;
-- NOT VALID: the rows already written hold 1 to 11, which the new check
-- admits; it is not worth reading the whole log under this lock to see so.
ALTER TABLE membership_changes ADD CONSTRAINT membership_changes_op_check
	CHECK (op BETWEEN 1 AND 14) NOT VALID;
ALTER TABLE membership_changes ADD COLUMN attributes bytea;
-- A set_user and a set_group have their attributes, and no other row has
-- any.
ALTER TABLE membership_changes ADD CONSTRAINT membership_changes_attributes_check
	CHECK ((op IN (12, 14)) = (attributes IS NOT NULL)) NOT VALID;
