-- DDL on Pinax tables.
CREATE TABLE d1 (id int PRIMARY KEY, a text DEFAULT 'dflt', b int CHECK (b > 0));
INSERT INTO d1 (id, b) VALUES (1, 5);
INSERT INTO d1 VALUES (2, 'x', 0);
ALTER TABLE d1 ADD COLUMN c int DEFAULT 42;
ALTER TABLE d1 ADD COLUMN d text;
INSERT INTO d1 VALUES (3, 'y', 7, 8, 'dd');
SELECT * FROM d1 ORDER BY id;
ALTER TABLE d1 DROP COLUMN a;
ALTER TABLE d1 RENAME COLUMN b TO bb;
SELECT * FROM d1 ORDER BY id;
ALTER TABLE d1 ALTER COLUMN d SET NOT NULL;
UPDATE d1 SET d = 'filled' WHERE d IS NULL;
ALTER TABLE d1 ALTER COLUMN d SET NOT NULL;
INSERT INTO d1 VALUES (4, 1, 1, NULL);
ALTER TABLE d1 ADD CONSTRAINT c_pos CHECK (c > 0);
INSERT INTO d1 VALUES (5, 1, -1, 'z');
ALTER TABLE d1 DROP CONSTRAINT c_pos;
INSERT INTO d1 VALUES (5, 1, -1, 'z');
-- A column type change rewrites the table.
ALTER TABLE d1 ALTER COLUMN c TYPE bigint;
SELECT * FROM d1 ORDER BY id;
-- ... also of a column a secondary index covers, in a table with a primary key
-- (the index is re-created first and built after the rewrite; the primary key's
-- build wrote entries to its storage before it had any).
CREATE INDEX d1_c ON d1 (c);
ALTER TABLE d1 ALTER COLUMN c TYPE numeric USING c * 10;
SET enable_seqscan = off;
SELECT id, c FROM d1 WHERE c > 0 ORDER BY c;
RESET enable_seqscan;
DROP INDEX d1_c;
ALTER TABLE d1 RENAME TO d1r;
SELECT count(*) FROM d1r;
-- TRUNCATE, also rolled back.
BEGIN;
TRUNCATE d1r;
SELECT count(*) FROM d1r;
ROLLBACK;
SELECT count(*) FROM d1r;
TRUNCATE d1r;
SELECT count(*) FROM d1r;
INSERT INTO d1r VALUES (1, 1, 1, 'again');
SELECT * FROM d1r;
-- CREATE TABLE AS, SELECT INTO, views, materialized views.
CREATE TABLE src AS SELECT g AS id, g * 2 AS dbl FROM generate_series(1, 10) g;
SELECT count(*), sum(dbl) FROM src;
SELECT id INTO sel_into FROM src WHERE id < 4;
SELECT * FROM sel_into ORDER BY id;
CREATE VIEW v_src AS SELECT id, dbl FROM src WHERE id % 2 = 0;
SELECT * FROM v_src ORDER BY id;
CREATE MATERIALIZED VIEW mv_src AS SELECT sum(dbl) AS s FROM src;
SELECT * FROM mv_src;
INSERT INTO src VALUES (11, 22);
REFRESH MATERIALIZED VIEW mv_src;
SELECT * FROM mv_src;
-- Temporary tables stay heap tables.
CREATE TEMP TABLE tmp1 (x int);
INSERT INTO tmp1 VALUES (1);
SELECT x, (SELECT amname FROM pg_am a JOIN pg_class c ON c.relam = a.oid WHERE c.relname = 'tmp1') FROM tmp1;
-- Temporary partitioned tables: the parent has no access method, its
-- temporary partitions are heap.
CREATE TEMP TABLE tmp_parted (a int, b text) PARTITION BY LIST (a);
CREATE TEMP TABLE tmp_parted_1 PARTITION OF tmp_parted FOR VALUES IN (1, 2);
CREATE TEMP TABLE tmp_parted_3 PARTITION OF tmp_parted FOR VALUES IN (3) PARTITION BY LIST (b);
CREATE TEMP TABLE tmp_parted_3x PARTITION OF tmp_parted_3 FOR VALUES IN ('x');
INSERT INTO tmp_parted VALUES (1, 'one'), (2, 'two'), (3, 'x');
SELECT c.relname, a.amname FROM pg_class c LEFT JOIN pg_am a ON a.oid = c.relam
  WHERE c.relname LIKE 'tmp_parted%' ORDER BY 1;
SELECT tableoid::regclass, * FROM tmp_parted ORDER BY a;
DROP TABLE tmp_parted;
-- Partitioned tables with Pinax partitions.
CREATE TABLE parted (k int, v text, PRIMARY KEY (k)) PARTITION BY RANGE (k);
CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (100);
CREATE TABLE parted_2 PARTITION OF parted FOR VALUES FROM (100) TO (200);
INSERT INTO parted SELECT g, 'p' || g FROM generate_series(95, 105) g;
SELECT tableoid::regclass, count(*) FROM parted GROUP BY 1 ORDER BY 1;
UPDATE parted SET k = k + 50 WHERE k = 96;
SELECT tableoid::regclass, k FROM parted WHERE k IN (96, 146);
INSERT INTO parted VALUES (97, 'dup');
DROP TABLE d1r, src, sel_into, parted CASCADE;
DROP MATERIALIZED VIEW IF EXISTS mv_src;
