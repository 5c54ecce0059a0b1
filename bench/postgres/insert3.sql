-- pgbench: one transaction that inserts 3 rows, as a POST of 3 users does.
\set g random(1, 1000)
\set a random(1, 1000000000)
\set b random(1, 1000000000)
\set c random(1, 1000000000)
BEGIN;
INSERT INTO bench_members (group_id, uid) VALUES ('g' || :g, :a), ('g' || :g, :b), ('g' || :g, :c) ON CONFLICT DO NOTHING;
END;
