-- Who made each change, as the service authenticated it.
--
-- principal is the name of the credential the request presented (a line
-- of the ACL file, or "token" for the service's single token), NULL when
-- it presented none or the service made the change itself. It is not the
-- credential: no secret is ever written here. Every instance reads it
-- from the row, so every instance's feed names the same principal.
--
-- An Idempotency-Key is its principal's own: memory remembers a row's key
-- for the row's principal, so that another principal's request with the
-- same key is a request of its own. A build that predates this version
-- ignores the column: it would take such a request for a repeat, or for
-- the key of another request, and its state would part from the others'.
-- It cannot start on the migrated database (its schema is newer), but one
-- still running goes on applying the log: upgrade every instance before a
-- second principal writes.
ALTER TABLE membership_changes ADD COLUMN principal text;
-- A name as membership.ValidatePrincipal takes it. NOT VALID: the rows
-- already written hold NULL, which the check admits.
ALTER TABLE membership_changes ADD CONSTRAINT membership_changes_principal_check
	CHECK (principal ~ '^[A-Za-z0-9._@:-]{1,64}$') NOT VALID;
