-- Memberships that end by themselves (issue 28).
--
-- expiries goes with uids on an add (op 1) or a replace (op 3): each user's
-- expiry, in milliseconds since 1970; 0 for a membership the write makes
-- permanent; NULL for a user it names none for, whose membership keeps the
-- expiry it has (none for a new member). The column is NULL when the write
-- names no expiry at all, as for every row written before this version,
-- which apply as they did. A batch (op 6) keeps its users' expiries in its
-- batch column (batch.go). A TTL is turned into a time before the row is
-- written, by the clock of the instance that writes it: the log holds
-- times only.
--
-- New op 7, expire: the memberships of uids in group_id whose expiry is at
-- or before as_of end. as_of is the time at which the expirer that wrote
-- the row found them due, by its instance's clock. Every instance runs an
-- expirer, so two instances may write rows for the same expiries: every
-- instance applies the log in the order of pos, and a row ends only the
-- memberships whose expiry, by then, is still at or before its as_of, so
-- the second row changes nothing and takes no revision, everywhere alike.
--
-- A build that predates it ignores the expiries column, and stops taking
-- changes at the first row of op 7 (an op it does not know). It cannot
-- start on a database at this version (the schema is newer than it
-- knows), but one still running goes on applying the log: stop every old
-- instance before clients send expiries.
ALTER TABLE membership_changes DROP CONSTRAINT membership_changes_op_check;
-- NOT VALID: the rows already written hold 1 to 6, which the new check
-- admits; it is not worth reading the whole log under this lock to see so.
ALTER TABLE membership_changes ADD CONSTRAINT membership_changes_op_check
	CHECK (op BETWEEN 1 AND 7) NOT VALID;
ALTER TABLE membership_changes
	ADD COLUMN expiries bigint[],
	ADD COLUMN as_of timestamptz;
-- Expiries go with the uids of an add or a replace, one for one, and are
-- not before 1970; an expire row has its time, and no other row has one.
-- NOT VALID: the rows already written hold NULL in both, and no op 7.
ALTER TABLE membership_changes ADD CONSTRAINT membership_changes_expiries_check
	CHECK (expiries IS NULL OR (op IN (1, 3) AND cardinality(expiries) = cardinality(uids) AND 0 <= ALL (expiries))) NOT VALID;
ALTER TABLE membership_changes ADD CONSTRAINT membership_changes_as_of_check
	CHECK ((op = 7) = (as_of IS NOT NULL)) NOT VALID;
