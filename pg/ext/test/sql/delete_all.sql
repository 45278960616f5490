-- DELETE with no WHERE: on Pinax tables without secondary indexes, triggers or
-- RETURNING, an autocommit one is done in the tablets (one tombstone per tablet:
-- write_by_key_plans shows when). Answers must be PostgreSQL's.
CREATE TABLE da (id int PRIMARY KEY, v text);
INSERT INTO da SELECT g, 'v' || g FROM generate_series(1, 500) g;
DELETE FROM da WHERE id % 5 = 0;
UPDATE da SET v = 'u' WHERE id % 7 = 0;
DELETE FROM da;
\echo rows :ROW_COUNT
SELECT count(*) FROM da;
DELETE FROM da;
\echo rows :ROW_COUNT
-- Rows written after it are there; a second deletion takes them.
INSERT INTO da SELECT g, 'w' || g FROM generate_series(1, 50) g;
INSERT INTO da VALUES (3, 'three again');
SELECT count(*), min(id), max(id) FROM da;
SELECT * FROM da WHERE id = 3;
DELETE FROM da;
\echo rows :ROW_COUNT
SELECT count(*) FROM da;
-- Inside a transaction block (PostgreSQL's plan): own writes before and after.
INSERT INTO da SELECT g, 'x' FROM generate_series(1, 20) g;
BEGIN;
INSERT INTO da VALUES (100, 'mine');
DELETE FROM da;
\echo rows :ROW_COUNT
INSERT INTO da VALUES (101, 'after');
SELECT * FROM da ORDER BY id;
ROLLBACK;
SELECT count(*) FROM da;
-- The first write of a transaction block (in the tablets on Pinax): later
-- statements see no older row, write the same keys again, roll back or commit.
BEGIN;
DELETE FROM da;
\echo rows :ROW_COUNT
SELECT count(*) FROM da;
INSERT INTO da VALUES (1, 'again'), (200, 'new');
UPDATE da SET v = v || '!' WHERE id = 1;
SELECT * FROM da ORDER BY id;
ROLLBACK;
SELECT count(*) FROM da;
BEGIN;
DELETE FROM da;
INSERT INTO da SELECT g, 'y' FROM generate_series(1, 5) g;
DELETE FROM da WHERE id = 5;
\echo rows :ROW_COUNT
SAVEPOINT s;
DELETE FROM da;
\echo rows :ROW_COUNT
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT * FROM da ORDER BY id;
BEGIN;
SAVEPOINT s;
DELETE FROM da;
ROLLBACK TO SAVEPOINT s;
SELECT count(*) FROM da;
COMMIT;
-- A table without a primary key, and one with a secondary index.
CREATE TABLE da_nopk (a int, b text);
INSERT INTO da_nopk SELECT g, 'b' FROM generate_series(1, 30) g;
DELETE FROM da_nopk;
\echo rows :ROW_COUNT
SELECT count(*) FROM da_nopk;
-- Secondary indexes (a unique one too): their entries go with the rows.
CREATE TABLE da_idx (id int PRIMARY KEY, v int, w text UNIQUE);
CREATE INDEX ON da_idx (v);
INSERT INTO da_idx SELECT g, g % 7, 'w' || g FROM generate_series(1, 40) g;
DELETE FROM da_idx;
\echo rows :ROW_COUNT
SET enable_seqscan = off;
SELECT count(*) FROM da_idx WHERE v = 3;
SELECT count(*) FROM da_idx WHERE w = 'w5';
INSERT INTO da_idx SELECT g, g % 7, 'w' || g FROM generate_series(1, 10) g;
INSERT INTO da_idx VALUES (99, 1, 'w5');
SELECT id, v, w FROM da_idx WHERE v = 3 ORDER BY id;
SELECT id FROM da_idx WHERE w = 'w5';
RESET enable_seqscan;
-- RETURNING, and a table referenced by a foreign key.
DELETE FROM da;
INSERT INTO da SELECT g, 'r' FROM generate_series(1, 3) g;
WITH d AS (DELETE FROM da RETURNING id) SELECT count(*), sum(id) FROM d;
SELECT count(*) FROM da;
CREATE TABLE da_parent (id int PRIMARY KEY);
CREATE TABLE da_child (id int PRIMARY KEY, p int REFERENCES da_parent);
INSERT INTO da_parent VALUES (1), (2);
INSERT INTO da_child VALUES (1, 1);
DELETE FROM da_parent;
DELETE FROM da_child;
DELETE FROM da_parent;
\echo rows :ROW_COUNT
DROP TABLE da, da_nopk, da_idx, da_child, da_parent;
