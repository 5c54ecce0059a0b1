-- A bound on the groups a group may be below (the service's
-- -max-ancestors).
--
-- max_ancestors is, as max_depth (0007), the writer's bound, on an
-- add_groups, a replace_groups and a batch: each instance, applying the
-- row in the order of pos, refuses a nesting that would put a group below
-- more groups than it, so that every instance, and one that replays the
-- whole log later, refuses or applies the row alike. NULL or 0: no bound,
-- as on every row written before this version.
--
-- A build that predates it ignores the column and applies such a row
-- without the bound: stop every old instance before this version writes.
ALTER TABLE membership_changes ADD COLUMN max_ancestors integer;
ALTER TABLE membership_changes ADD CONSTRAINT membership_changes_max_ancestors_check
	CHECK (max_ancestors IS NULL OR (op IN (6, 8, 10) AND max_ancestors >= 0)) NOT VALID;
