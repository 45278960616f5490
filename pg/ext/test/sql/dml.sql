-- Basic DML on tables with and without primary keys.
CREATE TABLE kv (k int PRIMARY KEY, v text);
INSERT INTO kv VALUES (1, 'one'), (2, 'two'), (3, 'three');
INSERT INTO kv SELECT g, 'n' || g FROM generate_series(4, 100) g;
SELECT count(*), sum(k), min(v), max(v) FROM kv;
SELECT * FROM kv WHERE k = 2;
SELECT * FROM kv WHERE k IN (1, 3, 99, 1000) ORDER BY k;
SELECT * FROM kv WHERE k BETWEEN 10 AND 14 ORDER BY k;
SELECT k FROM kv WHERE v LIKE 'n9%' ORDER BY k;
UPDATE kv SET v = upper(v) WHERE k <= 3;
SELECT * FROM kv WHERE k <= 5 ORDER BY k;
-- Each row is updated once (a statement does not see its own writes).
UPDATE kv SET k = k + 1000 WHERE k > 95;
SELECT k FROM kv WHERE k > 95 ORDER BY k;
WITH u AS (UPDATE kv SET v = v || '!' WHERE k < 5 RETURNING k, v) SELECT * FROM u ORDER BY 1;
WITH d AS (DELETE FROM kv WHERE k % 10 = 0 RETURNING k) SELECT k FROM d ORDER BY k;
SELECT count(*) FROM kv;
DELETE FROM kv;
SELECT count(*) FROM kv;
-- No primary key: generated row ids; duplicates allowed.
CREATE TABLE nopk (a int, b text);
INSERT INTO nopk VALUES (1, 'x'), (1, 'x'), (2, NULL);
SELECT * FROM nopk ORDER BY a, b;
UPDATE nopk SET b = 'y' WHERE a = 1;
SELECT * FROM nopk ORDER BY a, b;
DELETE FROM nopk WHERE b IS NULL;
SELECT * FROM nopk ORDER BY a, b;
-- Multi-column and text primary keys.
CREATE TABLE mk (a text, b int, c float8, PRIMARY KEY (a, b));
INSERT INTO mk VALUES ('x', 1, 1.5), ('x', 2, 2.5), ('y', 1, 3.5);
SELECT * FROM mk WHERE a = 'x' ORDER BY b;
SELECT * FROM mk WHERE a = 'x' AND b = 2;
UPDATE mk SET b = 3 WHERE a = 'y';
SELECT * FROM mk ORDER BY a, b;
-- Duplicate primary key.
INSERT INTO mk VALUES ('x', 1, 0);
INSERT INTO kv VALUES (7, 'a'), (7, 'b');
SELECT count(*) FROM kv;
-- UPDATE ... FROM and DELETE ... USING.
CREATE TABLE src (k int PRIMARY KEY, d int);
INSERT INTO kv SELECT g, 'v' FROM generate_series(1, 5) g;
INSERT INTO src VALUES (1, 10), (2, 20), (3, 30);
UPDATE kv SET v = 'from' || src.d FROM src WHERE src.k = kv.k;
SELECT * FROM kv ORDER BY k;
DELETE FROM kv USING src WHERE src.k = kv.k AND src.d > 15;
SELECT * FROM kv ORDER BY k;
-- Joins and aggregates over Pinax tables.
SELECT kv.k, src.d FROM kv LEFT JOIN src ON src.k = kv.k ORDER BY 1;
SELECT d / 10 AS g, count(*) FROM src GROUP BY 1 ORDER BY 1;
DROP TABLE kv, nopk, mk, src;
