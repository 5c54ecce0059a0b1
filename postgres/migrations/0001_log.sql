-- The log of changes is the truth: every instance applies it, in the order
-- of pos, to the state it serves from memory.
CREATE TABLE membership_meta (
	key   text PRIMARY KEY,
	value bigint NOT NULL
);

CREATE TABLE membership_changes (
	id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	-- The change's place in the log, 1, 2, 3, … with no gap; NULL until
	-- the sequencer gives it one.
	pos          bigint UNIQUE,
	-- Chosen by the writer, to find its own change when it is applied.
	ticket       bigint NOT NULL,
	appended_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
	sequenced_at timestamptz,
	op           smallint NOT NULL CHECK (op IN (1, 2)), -- 1 add, 2 remove
	group_id     text NOT NULL,
	uids         bigint[] NOT NULL,
	-- For an add: each user's nickname (UTF-8, which may hold NUL), NULL
	-- for none given.
	nicknames    bytea[]
);

CREATE INDEX membership_changes_unplaced ON membership_changes (id) WHERE pos IS NULL;
