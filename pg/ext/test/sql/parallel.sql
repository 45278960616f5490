-- Parallel sequential scans: the planner's parallel plans run, their workers
-- reading the table's tablets at the leader's read point.
CREATE TABLE par (id int PRIMARY KEY, g int NOT NULL, v text);
INSERT INTO par SELECT i, i % 7, 'v' || i FROM generate_series(1, 20000) i;
ANALYZE par;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET parallel_leader_participation = off;
SELECT g, count(*), sum(id), max(v) FROM par WHERE v LIKE '%3%' GROUP BY g ORDER BY g;
SELECT count(*) FROM par WHERE length(v) > 4;
SELECT a.g, count(*) FROM par a JOIN par b ON b.id = a.id + 1 WHERE a.id % 100 = 0 GROUP BY a.g ORDER BY a.g;
-- A transaction's own writes are seen by its workers, its later ones not.
BEGIN;
INSERT INTO par SELECT i, 99, 'new' FROM generate_series(20001, 20500) i;
UPDATE par SET g = 98 WHERE id <= 100;
DELETE FROM par WHERE id BETWEEN 101 AND 150;
SELECT g, count(*) FROM par WHERE g >= 98 OR id <= 200 GROUP BY g ORDER BY g;
SELECT count(*) FROM par WHERE length(v) > 0;
ROLLBACK;
-- REPEATABLE READ: workers read the transaction's snapshot.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM par WHERE length(v) > 0;
SELECT count(*) FROM par WHERE length(v) > 0;
COMMIT;
-- A rescan of a parallel scan (the inner side of a nested loop under Gather).
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT count(*) FROM (VALUES (1), (2), (3)) x(n) JOIN LATERAL (SELECT count(*) c FROM par WHERE g = x.n AND length(v) > 0) y ON true;
RESET ALL;
DROP TABLE par;
