-- Idempotency-Keys (safe retries): a keyed write or batch is applied once
-- for its key, whichever instance takes the retry.
--
-- idem_key is the request's Idempotency-Key, and idem_fingerprint the
-- fingerprint of what it asked (membership.Fingerprint, 16 bytes); both
-- NULL for a change without a key, as for the rows written before this
-- version, which apply as they did. Every instance applies the log, in the
-- order of pos, through the memory store, which decides whether a keyed
-- row repeats one it remembers as of the row's time (sequenced_at): so
-- every instance, and one started later that replays the whole log,
-- decides alike. A repeat changes nothing and takes no revision; its
-- writer gets the first change's result.
--
-- A build that predates it ignores the columns: it would apply a repeat
-- again, and its state would part from the others'. It cannot start on the
-- migrated database (its schema is newer), but one still running goes on
-- applying the log: upgrade every instance before a client sends an
-- Idempotency-Key.
ALTER TABLE membership_changes
	ADD COLUMN idem_key text,
	ADD COLUMN idem_fingerprint bytea;
-- A key is not empty, and comes with its fingerprint; no key, with none.
-- NOT VALID: the rows already written hold NULL in both, which the check
-- admits; it is not worth reading the whole log under this lock to see so.
ALTER TABLE membership_changes ADD CONSTRAINT membership_changes_idem_check
	CHECK (CASE WHEN idem_key IS NULL THEN idem_fingerprint IS NULL
		ELSE idem_key <> '' AND coalesce(length(idem_fingerprint) = 16, false) END) NOT VALID;
