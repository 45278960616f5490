-- LIMIT pushdown: a scan of a Pinax table or index right under a Limit node asks
-- storage for the LIMIT's rows (plus OFFSET) in its first read; further reads
-- (rows a filter rejects, WITH TIES) grow fourfold as without it.
-- pinax.trace_scans shows each read's size. Every query's answer is compared with
-- the same query on a heap copy.
CREATE TABLE lp (k int PRIMARY KEY, v text, w int) WITH (pinax.sharding = 'range');
INSERT INTO lp SELECT g, 'v' || g, g % 7 FROM generate_series(1, 600) g;
CREATE TABLE lp_heap (LIKE lp) USING heap;
INSERT INTO lp_heap SELECT * FROM lp;
ANALYZE lp;
ANALYZE lp_heap;
CREATE FUNCTION lp_same(q text) RETURNS bool LANGUAGE plpgsql AS $$
DECLARE a text; b text;
BEGIN
  EXECUTE format('SELECT string_agg(x::text, '','') FROM (%s) x', q) INTO a;
  EXECUTE format('SELECT string_agg(x::text, '','') FROM (%s) x', replace(q, 'FROM lp ', 'FROM lp_heap ')) INTO b;
  RETURN a IS NOT DISTINCT FROM b;
END $$;

EXPLAIN (COSTS OFF) SELECT * FROM lp WHERE k >= 100 ORDER BY k LIMIT 5;
SET pinax.trace_scans = on;
-- One read of exactly the rows needed: index scan, index-only scan, backwards.
SELECT * FROM lp WHERE k >= 100 ORDER BY k LIMIT 5;
-- (`k > 200` starts past 200: no row for the recheck to drop.)
SELECT k FROM lp WHERE k > 200 ORDER BY k LIMIT 3 OFFSET 4;
SELECT k FROM lp ORDER BY k DESC LIMIT 2;
-- A sequential scan under a LIMIT.
SELECT count(*) FROM (SELECT * FROM lp LIMIT 40) s;
-- A filter that rejects rows: the first read is the LIMIT's, the next ones grow.
SELECT k FROM lp WHERE k >= 100 AND w = 3 ORDER BY k LIMIT 3;
-- WITH TIES reads past the count when it must.
SELECT w FROM lp WHERE k >= 1 ORDER BY k FETCH FIRST 2 ROWS WITH TIES;
-- A parameter as the count (prepared statement, generic plan). The index-only
-- scan evaluates its runtime key ($1) before its first read (it used to start
-- at the index's first entry and drop the rows below $1 in the recheck).
SET plan_cache_mode = force_generic_plan;
PREPARE lp_q(int, int) AS SELECT k FROM lp WHERE k >= $1 ORDER BY k LIMIT $2;
EXECUTE lp_q(300, 4);
EXECUTE lp_q(500, 1);
DEALLOCATE lp_q;
RESET plan_cache_mode;
-- LIMIT 0 reads nothing; a LIMIT above a sort is not passed down (all rows read).
SELECT k FROM lp WHERE k >= 100 ORDER BY k LIMIT 0;
SELECT k FROM lp WHERE k >= 590 ORDER BY v LIMIT 2;
-- Off: pages of 16, 64, ...
SET pinax.enable_limit_pushdown = off;
SELECT k FROM lp WHERE k >= 100 ORDER BY k LIMIT 20;
RESET pinax.enable_limit_pushdown;
RESET pinax.trace_scans;

-- The same answers as PostgreSQL's, with and without.
SELECT q, lp_same(q) AS same FROM (VALUES
  ('SELECT * FROM lp WHERE k >= 100 ORDER BY k LIMIT 5'),
  ('SELECT k FROM lp WHERE k > 200 ORDER BY k LIMIT 3 OFFSET 4'),
  ('SELECT k FROM lp ORDER BY k DESC LIMIT 2 OFFSET 7'),
  ('SELECT k FROM lp WHERE k >= 100 AND w = 3 ORDER BY k LIMIT 30'),
  ('SELECT w FROM lp WHERE k >= 1 ORDER BY w, k LIMIT 9'),
  ('SELECT k FROM lp WHERE k BETWEEN 10 AND 20 ORDER BY k LIMIT 50'),
  ('SELECT k FROM lp WHERE k IN (5, 50, 500) ORDER BY k LIMIT 2')) t(q);
SET pinax.enable_limit_pushdown = off;
SELECT lp_same('SELECT k FROM lp WHERE k >= 100 AND w = 3 ORDER BY k LIMIT 30') AS same_off;
RESET pinax.enable_limit_pushdown;

-- An error inside the scan under a LIMIT leaves nothing behind: the next scans
-- of the table read as usual.
SELECT k / (k - 105) FROM lp WHERE k >= 100 ORDER BY k LIMIT 10;
SET pinax.trace_scans = on;
SELECT sum(w) FROM (SELECT w FROM lp WHERE k >= 100 ORDER BY k) s;
SELECT k FROM lp WHERE k >= 100 ORDER BY k LIMIT 2;
RESET pinax.trace_scans;
DROP TABLE lp, lp_heap;
DROP FUNCTION lp_same(text);
