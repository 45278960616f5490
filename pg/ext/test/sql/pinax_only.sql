-- Pinax-specific behaviour (runs on Pinax only): storage, plans, options.
SELECT amname FROM pg_am WHERE amname = 'pinax';
SHOW default_table_access_method;
CREATE TABLE h (id int PRIMARY KEY, v text);
CREATE TABLE r (id int PRIMARY KEY, v text) WITH (pinax.sharding = 'range', pinax.split_at = '10,20');
CREATE TABLE t16 (id int PRIMARY KEY) WITH (pinax.tablets = 16);
CREATE TABLE bad (id int PRIMARY KEY) WITH (pinax.sharding = 'sideways');
CREATE TABLE bad (id int PRIMARY KEY) WITH (pinax.colour = 'red');
SELECT c.relname, a.amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.relname IN ('h', 'r', 't16', 'h_pkey') ORDER BY 1;
INSERT INTO h SELECT g, 'v' || g FROM generate_series(1, 50) g;
INSERT INTO r SELECT g, 'v' || g FROM generate_series(1, 50) g;
-- Primary-key lookups go through the (virtual) primary key index.
EXPLAIN (COSTS OFF) SELECT * FROM h WHERE id = 7;
SELECT * FROM h WHERE id = 7;
-- A range-sharded table serves ORDER BY pk in key order without a sort.
EXPLAIN (COSTS OFF) SELECT * FROM r WHERE id BETWEEN 5 AND 25 ORDER BY id;
SELECT id FROM r WHERE id BETWEEN 5 AND 25 ORDER BY id;
SELECT id FROM r WHERE id > 45 ORDER BY id DESC;
-- A table rewrite (ALTER COLUMN TYPE) keeps the range sharding.
ALTER TABLE r ALTER COLUMN v TYPE varchar(20) USING lower(v);
ANALYZE r;
EXPLAIN (COSTS OFF) SELECT * FROM r ORDER BY id LIMIT 3;
SELECT id FROM r LIMIT 3;
SELECT count(*) FROM r;
-- A hash-sharded key has no order: the planner sorts.
EXPLAIN (COSTS OFF) SELECT * FROM h ORDER BY id LIMIT 3;
SELECT id FROM h ORDER BY id LIMIT 3;
-- ANALYZE samples rows; the planner then knows the row count.
ANALYZE h;
SELECT reltuples FROM pg_class WHERE relname = 'h';
-- Unsupported features fail clearly.
-- GIN and hash indexes are stored by Pinax (their entries in tablets of their own,
-- the local files stay as built) and used by index scans whose rows are rechecked;
-- GiST, SP-GiST and BRIN are kept in the catalog, not stored or used.
CREATE INDEX h_gin ON h USING gin (to_tsvector('simple', v));
CREATE INDEX h_hash ON h USING hash (v);
CREATE INDEX h_brin ON h USING brin (id);
SELECT pg_relation_size('h_gin') AS gin_bytes, pg_relation_size('h_hash') AS hash_bytes, pg_relation_size('h_brin') AS brin_bytes \gset
INSERT INTO h SELECT g, 'more ' || g FROM generate_series(1001, 1500) g;
SELECT pg_relation_size('h_gin') = :gin_bytes AS gin_unchanged, pg_relation_size('h_hash') = :hash_bytes AS hash_unchanged,
  pg_relation_size('h_brin') = :brin_bytes AS brin_unchanged;
SELECT count(*) > 0 AS gin_tablets FROM pinax_tablets('h') WHERE relation = 'h_gin'::regclass;
SET enable_seqscan = off;
SET pinax.enable_filter_pushdown = off;
EXPLAIN (COSTS OFF) SELECT id FROM h WHERE v = 'more 1200';
SELECT id FROM h WHERE v = 'more 1200';
EXPLAIN (COSTS OFF) SELECT id FROM h WHERE to_tsvector('simple', v) @@ to_tsquery('simple', '1201 | 1202');
SELECT id FROM h WHERE to_tsvector('simple', v) @@ to_tsquery('simple', '1201 | 1202') ORDER BY id;
DELETE FROM h WHERE id > 1000;
SELECT id FROM h WHERE v = 'more 1200';
SELECT id FROM h WHERE to_tsvector('simple', v) @@ to_tsquery('simple', '1201 | 1202') ORDER BY id;
RESET pinax.enable_filter_pushdown;
RESET enable_seqscan;
DROP INDEX h_gin, h_hash, h_brin;
CREATE TABLE ex (r int4range, EXCLUDE USING gist (r WITH &&));
-- Index keys compare bytes: a column whose equality is not byte equality
-- (a nondeterministic collation) cannot be a key; citext keys are stored by their
-- lower-case form.
CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE ci_pk (w text COLLATE ci PRIMARY KEY);
CREATE TABLE ci_t (id int PRIMARY KEY, w text COLLATE ci);
CREATE INDEX ci_t_w ON ci_t (w);
INSERT INTO ci_t VALUES (1, 'Hello'), (2, 'HELLO');
SELECT id FROM ci_t WHERE w = 'hello' ORDER BY id;
DROP TABLE ci_t;
DROP COLLATION ci;
CREATE EXTENSION citext;
CREATE TABLE ct (id int PRIMARY KEY, e citext UNIQUE);
-- (GIN and hash indexes of citext are stored too: GIN keys by their lower-case form.)
CREATE INDEX ct_arr ON ct USING gin ((ARRAY[e]));
CREATE INDEX ct_hash ON ct USING hash (e);
INSERT INTO ct VALUES (1, 'Alice@Example.com');
INSERT INTO ct VALUES (2, 'ALICE@example.COM');
SELECT id FROM ct WHERE e = 'alice@EXAMPLE.com';
SET enable_seqscan = off;
DROP INDEX ct_hash;
EXPLAIN (COSTS OFF) SELECT id FROM ct WHERE e = 'alice@EXAMPLE.com';
SELECT id FROM ct WHERE e = 'alice@EXAMPLE.com';
CREATE INDEX ct_hash ON ct USING hash (e);
ALTER TABLE ct DROP CONSTRAINT ct_e_key;
EXPLAIN (COSTS OFF) SELECT id FROM ct WHERE e = 'alice@EXAMPLE.com';
SELECT id FROM ct WHERE e = 'alice@EXAMPLE.com';
EXPLAIN (COSTS OFF) SELECT id FROM ct WHERE ARRAY[e] @> ARRAY['ALICE@example.com'::citext];
SELECT id FROM ct WHERE ARRAY[e] @> ARRAY['ALICE@example.com'::citext];
RESET enable_seqscan;
DROP TABLE ct;
DROP EXTENSION citext;
-- CREATE INDEX CONCURRENTLY builds in steps (concurrent_index.rs); the index ends valid.
CREATE INDEX CONCURRENTLY h_v ON h (v);
SELECT indisvalid, indisready FROM pg_index WHERE indexrelid = 'h_v'::regclass;
SET enable_seqscan = off;
SELECT count(*) = (SELECT count(*) FROM h) AS same FROM h WHERE v >= '';
RESET enable_seqscan;
DROP INDEX h_v;
-- UNIQUE: built, or over duplicates failed and left not valid (as PostgreSQL's).
CREATE UNIQUE INDEX CONCURRENTLY h_uv ON h (id, v);
\set VERBOSITY terse
CREATE UNIQUE INDEX CONCURRENTLY h_dup ON h ((length(v)));
\set VERBOSITY default
SELECT indexrelid::regclass, indisvalid FROM pg_index WHERE indexrelid IN ('h_uv'::regclass, 'h_dup'::regclass) ORDER BY 1;
DROP INDEX h_uv, h_dup;
CLUSTER h USING h_pkey;
CREATE TABLE dpk (id int PRIMARY KEY DEFERRABLE INITIALLY DEFERRED);
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT count(*) FROM h WHERE id = 1;
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY;
SELECT count(*) FROM h WHERE id = 1;
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM h WHERE id = 1;
COMMIT;
-- COPY sends rows in batches: a duplicate is reported when the batch is sent.
COPY h FROM stdin;
5000	a
7	dup
\.
SELECT count(*) FROM h WHERE id = 5000;
DROP TABLE h, r, t16;
-- Index-only scans return index entries without visiting the table (no visibility
-- map: entries are versioned with their rows); with pinax.index_only_fetch_rows,
-- PostgreSQL's own node fetches every row.
CREATE TABLE ios (id int PRIMARY KEY, a int, f float8, b text);
CREATE INDEX ios_a ON ios (a);
CREATE INDEX ios_f ON ios (f);
INSERT INTO ios SELECT g, g % 10, g / 2.0, 'x' FROM generate_series(1, 100) g;
ANALYZE ios;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT a FROM ios WHERE a = 3;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT id FROM ios WHERE id = 42;
SET pinax.index_only_fetch_rows = on;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT a FROM ios WHERE a = 3;
RESET pinax.index_only_fetch_rows;
-- Floats are not returned from keys (-0 and NaN are normalized): an index scan.
EXPLAIN (COSTS OFF) SELECT f FROM ios WHERE f = 1.5;
SELECT f FROM ios WHERE f = 1.5;
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP TABLE ios;
-- A varchar key compared with a text value is one key lookup (no rows to recheck).
CREATE TABLE vk (k varchar PRIMARY KEY, v int);
INSERT INTO vk SELECT 'key' || g, g FROM generate_series(1, 200) g;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT v FROM vk WHERE k = 'key' || 7::text;
DROP TABLE vk;

-- ANALYZE samples in the tablets once the table's size is known (every k-th row
-- is shipped, the others counted): the row count stays exact, the statistics
-- right. A table that shrank since is sampled again, densely.
SET default_statistics_target = 10;
CREATE TABLE an (id int PRIMARY KEY, v int);
INSERT INTO an SELECT g, g % 7 FROM generate_series(1, 20000) g;
SET client_min_messages = debug1;
ANALYZE an;
SELECT reltuples FROM pg_class WHERE relname = 'an';
ANALYZE an;
RESET client_min_messages;
SELECT reltuples FROM pg_class WHERE relname = 'an';
SELECT n_distinct, array_length(most_common_vals, 1) AS mcvs FROM pg_stats WHERE tablename = 'an' AND attname = 'v';
SELECT n_distinct FROM pg_stats WHERE tablename = 'an' AND attname = 'id';
DELETE FROM an WHERE id > 1000;
SET client_min_messages = debug1;
ANALYZE an;
RESET client_min_messages;
SELECT reltuples FROM pg_class WHERE relname = 'an';
RESET default_statistics_target;
DROP TABLE an;

-- A statement's writes go to the tablets in batches of pinax.write_buffer_size
-- bytes: here dozens of batches, then a duplicate key in the last batch of a
-- statement whose earlier batches were sent (the whole statement is undone).
SET pinax.write_buffer_size = '4kB';
SHOW pinax.write_buffer_size;
CREATE TABLE wb (id int PRIMARY KEY, v text);
INSERT INTO wb SELECT g, repeat('x', 20) FROM generate_series(1, 5000) g;
SELECT count(*), sum(id), min(v), max(v) FROM wb;
INSERT INTO wb SELECT g, 'y' FROM generate_series(5001, 8000) g UNION ALL SELECT 3, 'dup';
SELECT count(*), max(id) FROM wb;
UPDATE wb SET v = 'z' WHERE id % 2 = 0;
SELECT v, count(*) FROM wb GROUP BY v ORDER BY v;
RESET pinax.write_buffer_size;
DROP TABLE wb;
-- pinax_tablets: a table's tablets and its indexes' (key intervals in hex, leader,
-- replicas, bytes on disk); the intervals of each relation cover every key once.
CREATE TABLE tabs (id int PRIMARY KEY, v text) WITH (pinax.sharding = 'range', pinax.split_at = '10,20');
CREATE INDEX tabs_v ON tabs (v);
INSERT INTO tabs SELECT g, 'v' || g FROM generate_series(1, 30) g;
SELECT relation, count(*) AS tablets, bool_and(leader IS NOT NULL) AS led, bool_and(cardinality(replicas) = 1) AS one_replica,
  bool_and(approximate_bytes >= 0) AS sized, count(*) FILTER (WHERE start_key = '') AS first, count(*) FILTER (WHERE end_key IS NULL) AS last
  FROM pinax_tablets('tabs') GROUP BY relation ORDER BY relation::text;
SELECT count(*) AS gaps FROM (SELECT end_key, lead(start_key) OVER (PARTITION BY relation ORDER BY start_key) AS next FROM pinax_tablets('tabs')) s
  WHERE end_key IS DISTINCT FROM next;
SELECT * FROM pinax_tablets('pg_class');
-- Moving a Pinax table and its index to another tablespace is a catalog change:
-- they keep their tablets (the same ids), and the index keeps working.
SET allow_in_place_tablespaces = on;
CREATE TABLESPACE regress_tabs_ts LOCATION '';
CREATE TEMP TABLE tabs_before AS SELECT relation::text AS relation, tablet FROM pinax_tablets('tabs');
ALTER TABLE tabs SET TABLESPACE regress_tabs_ts;
ALTER INDEX tabs_v SET TABLESPACE regress_tabs_ts;
SELECT (SELECT count(*) FROM tabs_before) AS tablets,
  (SELECT count(*) FROM (SELECT relation::text, tablet FROM pinax_tablets('tabs') EXCEPT SELECT * FROM tabs_before) s) AS new_tablets;
SELECT relname, reltablespace <> 0 AS moved FROM pg_class WHERE relname IN ('tabs', 'tabs_v', 'tabs_pkey') ORDER BY 1;
SET enable_seqscan = off;
SELECT id FROM tabs WHERE v = 'v7';
RESET enable_seqscan;
-- Not back to the tablespace it left in the same transaction (its old file is
-- deleted only at commit); after the commit it can.
BEGIN;
ALTER TABLE tabs SET TABLESPACE pg_default;
ALTER TABLE tabs SET TABLESPACE regress_tabs_ts;
ROLLBACK;
ALTER TABLE tabs SET TABLESPACE pg_default;
ALTER TABLE tabs SET TABLESPACE regress_tabs_ts;
SELECT count(*) FROM tabs;
DROP TABLE tabs, tabs_before;
DROP TABLESPACE regress_tabs_ts;
