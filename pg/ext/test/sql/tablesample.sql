-- TABLESAMPLE: which rows a sample holds depends on the storage's layout (heap
-- pages, Pinax's rows cut into blocks of a page's worth), so what is checked is
-- what every layout must give: all or nothing at 100 and 0 percent, about the
-- percentage asked for, only rows of the table, the same sample again with
-- REPEATABLE, and exactly N rows from tsm_system_rows.
CREATE TABLE ts (id int PRIMARY KEY, v text);
INSERT INTO ts SELECT g, repeat('x', 20) || g FROM generate_series(1, 5000) g;
ANALYZE ts;
SELECT count(*) AS all_rows FROM ts TABLESAMPLE BERNOULLI (100);
SELECT count(*) AS all_rows FROM ts TABLESAMPLE SYSTEM (100);
SELECT count(*) AS no_rows FROM ts TABLESAMPLE BERNOULLI (0);
SELECT count(*) AS no_rows FROM ts TABLESAMPLE SYSTEM (0);
SELECT count(*) BETWEEN 2000 AND 3000 AS about_half FROM ts TABLESAMPLE BERNOULLI (50) REPEATABLE (7);
SELECT count(*) BETWEEN 1000 AND 4000 AS about_half FROM ts TABLESAMPLE SYSTEM (50) REPEATABLE (7);
-- Rows of the table, whole, each once.
SELECT count(*) = count(DISTINCT s.id) AS once, bool_and(s.v = t.v) AS whole
  FROM ts s TABLESAMPLE BERNOULLI (10) REPEATABLE (3) JOIN ts t ON t.id = s.id;
-- REPEATABLE gives the same sample again.
SELECT (SELECT array_agg(id ORDER BY id) FROM ts TABLESAMPLE BERNOULLI (5) REPEATABLE (11))
     = (SELECT array_agg(id ORDER BY id) FROM ts TABLESAMPLE BERNOULLI (5) REPEATABLE (11)) AS same_bernoulli;
SELECT (SELECT array_agg(id ORDER BY id) FROM ts TABLESAMPLE SYSTEM (20) REPEATABLE (11))
     = (SELECT array_agg(id ORDER BY id) FROM ts TABLESAMPLE SYSTEM (20) REPEATABLE (11)) AS same_system;
-- A filter over the sample, and a sample in a transaction that wrote rows first.
SELECT count(*) FILTER (WHERE id > 5000) AS none_above FROM ts TABLESAMPLE BERNOULLI (30);
BEGIN;
INSERT INTO ts SELECT g, 'new' FROM generate_series(5001, 6000) g;
SELECT count(*) AS own_rows_seen FROM ts TABLESAMPLE SYSTEM (100);
ROLLBACK;
-- tsm_system_rows picks blocks in a random order.
CREATE EXTENSION tsm_system_rows;
SELECT count(*) AS exactly_25 FROM ts TABLESAMPLE SYSTEM_ROWS (25);
SELECT count(*) = count(DISTINCT id) AS distinct_rows FROM ts TABLESAMPLE SYSTEM_ROWS (1000);
SELECT count(*) AS capped FROM ts TABLESAMPLE SYSTEM_ROWS (9000);
DROP EXTENSION tsm_system_rows;
-- An empty table.
CREATE TABLE ts_empty (id int PRIMARY KEY);
SELECT count(*) AS empty FROM ts_empty TABLESAMPLE SYSTEM (50);
SELECT count(*) AS empty FROM ts_empty TABLESAMPLE BERNOULLI (50);
DROP TABLE ts, ts_empty;
