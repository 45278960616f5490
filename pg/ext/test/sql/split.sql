-- Tablet splitting from SQL (pinax_split_tablet): tables and indexes, range and
-- hash sharded, at a key or at the middle; rows, order, uniqueness, cursors and
-- transactions carry on across the split.
CREATE TABLE sp (id int PRIMARY KEY, v text) WITH (pinax.sharding = 'range');
INSERT INTO sp SELECT g, 'v' || g FROM generate_series(1, 2000) g;
CREATE INDEX sp_v ON sp (v);
CREATE INDEX sp_words ON sp USING gin (to_tsvector('simple', v));
SELECT count(*) AS tablets FROM pinax_tablets('sp') WHERE relation = 'sp'::regclass;
-- A cursor open across the split, and a transaction writing on both sides of it.
BEGIN;
DECLARE c CURSOR FOR SELECT id FROM sp ORDER BY id;
FETCH 3 FROM c;
INSERT INTO sp VALUES (5000, 'in txn'), (-5, 'in txn');
SELECT cardinality(pinax_split_tablet('sp', '1000')) AS halves;
FETCH 3 FROM c;
MOVE 990 IN c;
FETCH 3 FROM c;
INSERT INTO sp VALUES (5001, 'in txn'), (-6, 'in txn');
SAVEPOINT s;
INSERT INTO sp VALUES (5002, 'gone'), (-7, 'gone');
ROLLBACK TO s;
COMMIT;
SELECT count(*) AS tablets, min(start_key) = '' AS from_start FROM pinax_tablets('sp') WHERE relation = 'sp'::regclass;
SELECT count(*), sum(id) FROM sp;
SELECT id FROM sp WHERE v = 'in txn' ORDER BY id;
SELECT id FROM sp WHERE id IN (999, 1000, 1001) ORDER BY id;
SELECT id FROM sp ORDER BY id DESC LIMIT 3;
SELECT id FROM sp WHERE id BETWEEN 995 AND 1004 ORDER BY id;
INSERT INTO sp VALUES (1000, 'dup');
UPDATE sp SET v = 'x' WHERE id BETWEEN 995 AND 1005;
SET enable_seqscan = off;
SELECT count(*) FROM sp WHERE v = 'x';
SELECT id FROM sp WHERE to_tsvector('simple', v) @@ to_tsquery('simple', 'v1500 | v500') ORDER BY id;
RESET enable_seqscan;
-- Again at the middle (the larger half), then the indexes' tablets.
SELECT cardinality(pinax_split_tablet('sp')) AS halves;
SELECT cardinality(pinax_split_tablet('sp_v')) AS halves;
SELECT cardinality(pinax_split_tablet('sp_words')) AS halves;
SELECT relation, count(*) FROM pinax_tablets('sp') GROUP BY 1 ORDER BY relation::text;
SELECT count(*), sum(id), count(DISTINCT v) FROM sp;
SET enable_seqscan = off;
SELECT id FROM sp WHERE v = 'v1234';
SELECT count(*) FROM sp WHERE to_tsvector('simple', v) @@ to_tsquery('simple', 'x');
RESET enable_seqscan;
-- Split into eight tablets or more: ORDER BY the key is still an ordered read
-- (no Sort) across every boundary, forward and backward; aggregates, LIMIT and
-- ranges across boundaries.
SELECT sum(cardinality(pinax_split_tablet('sp'))) AS halves FROM generate_series(1, 5);
SELECT count(*) >= 8 AS eight_or_more FROM pinax_tablets('sp') WHERE relation = 'sp'::regclass;
EXPLAIN (COSTS OFF) SELECT id FROM sp ORDER BY id;
EXPLAIN (COSTS OFF) SELECT id FROM sp ORDER BY id DESC;
SELECT count(*), array_agg(id) = array_agg(id ORDER BY id) AS in_order FROM (SELECT id FROM sp ORDER BY id) s;
SELECT count(*), array_agg(id) = array_agg(id ORDER BY id DESC) AS in_order FROM (SELECT id FROM sp ORDER BY id DESC) s;
SELECT min(id), max(id), count(*), sum(id), count(DISTINCT v) FROM sp;
SELECT id FROM sp ORDER BY id LIMIT 3 OFFSET 1500;
SELECT count(*), min(id), max(id) FROM sp WHERE id BETWEEN 100 AND 1900;
-- A hash-sharded table (its hash range split at a value's hash, or the middle).
CREATE TABLE sh (id int PRIMARY KEY, n int) WITH (pinax.tablets = 2);
INSERT INTO sh SELECT g, g % 10 FROM generate_series(1, 1000) g;
SELECT cardinality(pinax_split_tablet('sh')) AS halves;
SELECT cardinality(pinax_split_tablet('sh', '77')) AS halves;
SELECT count(*) AS tablets FROM pinax_tablets('sh') WHERE relation = 'sh'::regclass;
SELECT count(*), sum(id), sum(n) FROM sh;
SELECT n, count(*) FROM sh GROUP BY n ORDER BY n LIMIT 3;
-- Refused: a key outside the tablet's interior, a key for keys not made from
-- values, other relations, a non-owner.
-- (The message names the tablet: its SQLSTATE only.)
DO $$ BEGIN PERFORM pinax_split_tablet('sp', '1000'); EXCEPTION WHEN OTHERS THEN RAISE NOTICE 'refused: %', SQLSTATE; END $$;
SELECT pinax_split_tablet('sp_words', 'x');
CREATE TABLE heap_t (id int) USING heap;
SELECT pinax_split_tablet('heap_t');
CREATE ROLE split_stranger;
SET ROLE split_stranger;
SELECT pinax_split_tablet('sp');
RESET ROLE;
DROP ROLE split_stranger;
DROP TABLE sp, sh, heap_t;
-- pinax.auto_split: set at CREATE TABLE, followed by the table's indexes, kept by
-- TRUNCATE, changed by ALTER TABLE SET / RESET as the transaction commits (not if
-- it or its subtransaction aborts); only it can change after CREATE TABLE.
CREATE TABLE nosplit (id int PRIMARY KEY, v text) WITH (pinax.auto_split = off);
CREATE INDEX nosplit_v ON nosplit (v);
SELECT relation, bool_and(auto_split) AS auto_split FROM pinax_tablets('nosplit') GROUP BY 1 ORDER BY relation::text;
ALTER TABLE nosplit SET (pinax.auto_split = on);
SELECT relation, bool_and(auto_split) AS auto_split FROM pinax_tablets('nosplit') GROUP BY 1 ORDER BY relation::text;
BEGIN;
ALTER TABLE nosplit SET (pinax.auto_split = false);
ROLLBACK;
SELECT bool_and(auto_split) AS still_on FROM pinax_tablets('nosplit');
BEGIN;
ALTER TABLE nosplit SET (pinax.auto_split = off);
SAVEPOINT s;
ALTER TABLE nosplit RESET (pinax.auto_split);
ROLLBACK TO s;
COMMIT;
SELECT bool_or(auto_split) AS any_on FROM pinax_tablets('nosplit');
INSERT INTO nosplit VALUES (1, 'a'), (2, 'b');
TRUNCATE nosplit;
CREATE INDEX nosplit_v2 ON nosplit (v, id);
SELECT relation, bool_and(auto_split) AS auto_split FROM pinax_tablets('nosplit') GROUP BY 1 ORDER BY relation::text;
ALTER TABLE nosplit RESET (pinax.auto_split);
SELECT bool_and(auto_split) AS all_on FROM pinax_tablets('nosplit');
CREATE TABLE nosplit_range (id int PRIMARY KEY) WITH (pinax.sharding = 'range', pinax.auto_split = 'no');
SELECT bool_or(auto_split) AS any_on FROM pinax_tablets('nosplit_range');
-- Refused: layout options, a bad value, an index, a non-owner, an unknown option.
ALTER TABLE nosplit SET (pinax.sharding = 'range');
ALTER TABLE nosplit SET (pinax.auto_split = maybe);
CREATE TABLE nosplit_bad (id int) WITH (pinax.auto_split = 2);
ALTER INDEX nosplit_v SET (pinax.auto_split = off);
ALTER TABLE nosplit SET (pinax.colour = 'blue');
CREATE ROLE split_stranger;
SET ROLE split_stranger;
ALTER TABLE nosplit SET (pinax.auto_split = off);
RESET ROLE;
DROP ROLE split_stranger;
SELECT bool_and(auto_split) AS all_on FROM pinax_tablets('nosplit');
DROP TABLE nosplit, nosplit_range;
