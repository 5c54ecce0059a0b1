-- Groups in groups.
--
-- New ops: 8 add_groups, 9 remove_groups, 10 replace_groups, 11
-- expire_groups. group_id is the parent; subgroups are the children the
-- write names, in its order; uids is empty.
--
-- subgroup_expiries goes with subgroups on an add_groups (op 8) or a
-- replace_groups (op 10): each nesting's expiry, in milliseconds since
-- 1970; 0 for a nesting the write makes permanent; NULL for a subgroup it
-- names none for, whose nesting keeps the expiry it has (none for a new
-- one). The column is NULL when the write names no expiry at all. A TTL
-- is turned into a time before the row is written, by the clock of the
-- instance that writes it, as for users: the log holds times only.
--
-- max_depth is the bound on the depth of a chain of nestings that the
-- writer's service set (its -max-depth), on an add_groups, a
-- replace_groups and a batch (op 6, whose nesting writes are in its batch
-- column); NULL or 0: no bound. It is in the row, not read from each
-- instance's flags, because the cycle and depth checks are made when the
-- row is applied, by every instance in the order of pos against the state
-- the log built before it: every instance, and one started later that
-- replays the whole log, must refuse or apply the row alike. Of two rows
-- racing (a into b, b into a), the first in the log is applied and the
-- second refused, on every instance; a refused row changes nothing and
-- takes no revision.
--
-- expire_groups (op 11) ends the nestings of subgroups in group_id whose
-- expiry is at or before as_of, as op 7 does for memberships.
--
-- The nestings themselves are not a table: as the memberships, they are
-- the state the log builds in every instance's memory, which answers the
-- reads and keeps the indexes both ways (subgroups and parents).
--
-- A build that predates it stops taking changes at the first row of op 8
-- to 11, or at a batch holding a nesting write (an op it does not know).
-- It cannot start on a database at this version, but one still running
-- goes on applying the log: stop every old instance before clients nest
-- groups.
ALTER TABLE membership_changes DROP CONSTRAINT membership_changes_op_check;
-- NOT VALID: the rows already written hold 1 to 7, which the new check
-- admits; it is not worth reading the whole log under this lock to see so.
ALTER TABLE membership_changes ADD CONSTRAINT membership_changes_op_check
	CHECK (op BETWEEN 1 AND 11) NOT VALID;
ALTER TABLE membership_changes
	ADD COLUMN subgroups text[],
	ADD COLUMN subgroup_expiries bigint[],
	ADD COLUMN max_depth integer;
-- An expire row of either kind has its time, and no other row has one.
ALTER TABLE membership_changes DROP CONSTRAINT membership_changes_as_of_check;
ALTER TABLE membership_changes ADD CONSTRAINT membership_changes_as_of_check
	CHECK ((op IN (7, 11)) = (as_of IS NOT NULL)) NOT VALID;
-- A nesting row names its subgroups (and no uid), and no other row does;
-- their expiries go with them one for one, on an add or a replace, not
-- before 1970; a bound on depth is not negative, and only on the rows
-- that may deepen a chain.
ALTER TABLE membership_changes ADD CONSTRAINT membership_changes_subgroups_check
	CHECK ((op BETWEEN 8 AND 11) = (subgroups IS NOT NULL)
		AND (subgroups IS NULL OR (cardinality(uids) = 0 AND array_position(subgroups, NULL) IS NULL))) NOT VALID;
ALTER TABLE membership_changes ADD CONSTRAINT membership_changes_subgroup_expiries_check
	CHECK (subgroup_expiries IS NULL OR (op IN (8, 10) AND cardinality(subgroup_expiries) = cardinality(subgroups)
		AND 0 <= ALL (subgroup_expiries))) NOT VALID;
ALTER TABLE membership_changes ADD CONSTRAINT membership_changes_max_depth_check
	CHECK (max_depth IS NULL OR (op IN (6, 8, 10) AND max_depth >= 0)) NOT VALID;
