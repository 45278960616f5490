-- Filter pushdown: a sequential scan's WHERE conditions on columns go to the
-- tablets (Custom Scan (PinaxScan), "Storage Filter"), which ship only rows that
-- may match. Every condition is checked against a heap copy of the same rows
-- (pd_check: rows found, rows that differ between the two, whether it was pushed).
CREATE TABLE pd (id int PRIMARY KEY, i2 int2, i4 int, i8 int8, f4 float4, f8 float8, b bool,
                 t text, vc varchar(20), by bytea, d date, ts timestamp, tz timestamptz, u uuid, n numeric);
CREATE TABLE pd_heap (LIKE pd) USING heap;
-- Written to heap first: its long text values are compressed, and a Pinax table
-- keeps compressed values as they come.
INSERT INTO pd_heap
SELECT g,
       CASE WHEN g % 11 = 0 THEN NULL ELSE g % 20 END,
       CASE WHEN g % 13 = 0 THEN NULL ELSE g % 100 END,
       g * 1000000000::int8 % 97,
       CASE g % 17 WHEN 0 THEN 'NaN'::float4 WHEN 1 THEN '-0'::float4 ELSE g / 8.0 END,
       CASE g % 19 WHEN 0 THEN 'NaN' WHEN 1 THEN '-0' WHEN 2 THEN 'Infinity' WHEN 3 THEN NULL ELSE g / 4.0 END,
       CASE WHEN g % 23 = 0 THEN NULL ELSE g % 3 = 0 END,
       CASE g % 29 WHEN 0 THEN NULL WHEN 1 THEN '' WHEN 2 THEN repeat('x', 5000) ELSE chr(97 + g % 26) || g % 5 END,
       'vc' || g % 9,
       CASE WHEN g % 31 = 0 THEN NULL ELSE int2send((g % 300)::int2) END,
       date '2020-01-01' + g,
       timestamp '2020-01-01' + g * interval '1 hour',
       timestamptz '2020-01-01 00:00+00' + g * interval '37 minutes',
       CASE WHEN g % 37 = 0 THEN NULL ELSE md5((g % 50)::text)::uuid END,
       g / 3.0
FROM generate_series(1, 1000) g;
INSERT INTO pd SELECT * FROM pd_heap;

CREATE FUNCTION pd_check(cond text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  line text;
  pushed bool := false;
  n bigint;
  diff bigint;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) SELECT * FROM pd WHERE ' || cond LOOP
    pushed := pushed OR line LIKE '%Storage Filter%';
  END LOOP;
  EXECUTE 'SELECT count(*) FROM pd WHERE ' || cond INTO n;
  EXECUTE format('SELECT count(*) FROM ((SELECT * FROM pd WHERE %1$s EXCEPT ALL SELECT * FROM pd_heap WHERE %1$s)
                  UNION ALL (SELECT * FROM pd_heap WHERE %1$s EXCEPT ALL SELECT * FROM pd WHERE %1$s)) x', cond) INTO diff;
  RETURN format('%s rows, %s differ, %s', n, diff, CASE WHEN pushed THEN 'pushed' ELSE 'not pushed' END);
END $$;

SELECT cond, pd_check(cond) FROM (VALUES
  ('i4 = 5'), ('i4 <> 5'), ('i2 < 10'), ('i8 >= 90'), ('50 > i4'), ('i4 = 5::int8'), ('i8 = 7::int2'), ('i2 <= 3::int4'),
  ('f8 > 100'), ('f8 = ''NaN'''), ('f8 < ''NaN'''), ('f8 >= ''Infinity'''), ('f8 = 0'), ('f8 <> 0'), ('f4 >= 60.5'), ('f4 = ''NaN''::float4'), ('f4 = 0'),
  ('b'), ('NOT b'), ('b = false'), ('b <> true'), ('b IS NULL'), ('b IS NOT NULL'),
  ('t = ''c1'''), ('t <> ''c1'''), ('t = '''''), ('t COLLATE "C" < ''c'''), ('t COLLATE "C" >= ''x'''), ('t = repeat(''x'', 5000)'),
  ('vc = ''vc3'''), ('vc <> ''vc3'''), ('vc IN (''vc1'', ''vc2'')'),
  ('by = ''\x0102''::bytea'), ('by > ''\x0100''::bytea'), ('by < ''\x00''::bytea'),
  ('d >= ''2022-01-01'''), ('ts < ''2020-01-10 12:00'''), ('tz > ''2020-01-20 00:00+00'''), ('d < ''2020-02-01''::timestamp'),
  ('u = md5(''7'')::uuid'), ('u <> md5(''7'')::uuid'), ('n > 300'),
  ('i4 IS NULL OR t IS NOT NULL'), ('NOT (i4 > 50 AND f8 < 100)'), ('(i4 = 1 OR i4 = 2) AND b'), ('i4 + 1 = 5'), ('i4 = 4 AND i4 + 1 = 5'),
  ('i4 > NULL::int'), ('NOT (i4 IS NULL)'), ('t IS NULL AND i2 IS NULL'),
  ('i4 IN (1, 2, 3)'), ('i4 NOT IN (1, 2)'), ('t IN (''a1'', ''b2'')'), ('i4 IN (1, NULL)'), ('i4 NOT IN (1, NULL)'),
  ('f8 = ANY (ARRAY[1.0, 2.5, ''NaN''])'), ('i8 > ALL (ARRAY[10, 20])'), ('NOT (i2 IN (3, 4) OR b)'), ('i4 IN (SELECT 1)')
) v(cond);

-- The tablets drop rows: PostgreSQL's filter removes none (with pushdown off it
-- removes 990). A value the tablets cannot read in place (compressed text) is
-- shipped and left to PostgreSQL.
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT id FROM pd WHERE i4 = 7;
SET pinax.enable_filter_pushdown = off;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT id FROM pd WHERE i4 = 7;
RESET pinax.enable_filter_pushdown;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT id FROM pd WHERE t = 'x';
EXPLAIN (VERBOSE, COSTS OFF) SELECT p.id FROM pd p JOIN pd_heap h USING (id) WHERE p.i4 = 7 AND p.f8 > 10;

-- count(*) over a scan whose every condition is pushed: the tablets count the
-- rows that match (none is shipped), and ship only those they cannot decide
-- (compressed values) for PostgreSQL to check. With a condition left here
-- (i4 + 1 = 8), rows are shipped and counted here.
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM pd WHERE i4 = 7 AND f8 > 10;
PREPARE long_t(text) AS SELECT count(*) FROM pd WHERE t = $1;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE long_t(repeat('x', 5000));
RESET plan_cache_mode;
DEALLOCATE long_t;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM pd WHERE i4 = 7 AND i4 + 1 = 8;
SELECT (SELECT count(*) FROM pd WHERE t <> 'a1' OR i4 IS NULL) AS pinax, (SELECT count(*) FROM pd_heap WHERE t <> 'a1' OR i4 IS NULL) AS heap;
SELECT (SELECT count(*) FROM pd WHERE t = repeat('x', 5000)) AS pinax, (SELECT count(*) FROM pd_heap WHERE t = repeat('x', 5000)) AS heap;

-- Aggregates over one table, no GROUP BY: count, and sum, avg, min, max of
-- integer and float columns, computed in the tablets (Storage Aggregates); rows
-- the tablets cannot decide are shipped and folded here. The answers are the
-- heap table's (floats in the data are exact in binary, so sums do not depend
-- on the order of addition).
-- pd_same: query Q (@T for the table) on pd and on pd_heap, its rows x summed up
-- by SUMMARY: equal or not, and whether EXPLAIN on pd shows Storage Aggregates.
CREATE FUNCTION pd_same(q text, summary text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  line text;
  pushed bool := false;
  a text;
  b text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || replace(q, '@T', 'pd') LOOP
    pushed := pushed OR line LIKE '%Storage Aggregates%';
  END LOOP;
  EXECUTE format('SELECT %s FROM (%s) x', summary, replace(q, '@T', 'pd')) INTO a;
  EXECUTE format('SELECT %s FROM (%s) x', summary, replace(q, '@T', 'pd_heap')) INTO b;
  RETURN format('%s %s %s', a, CASE WHEN a IS NOT DISTINCT FROM b THEN '=' ELSE '<> heap ' || b END, CASE WHEN pushed THEN 'pushed' ELSE 'not pushed' END);
END $$;
CREATE FUNCTION pd_agg(sel text, cond text DEFAULT 'true') RETURNS text LANGUAGE sql AS $$
  SELECT pd_same(format('SELECT %s FROM @T WHERE %s', sel, cond), '(x)::text')
$$;
SELECT sel, cond, pd_agg(sel, cond) FROM (VALUES
  ('count(*), count(i4), sum(i4), avg(i4), min(i4), max(i4)', 'true'),
  ('sum(i2), avg(i2), min(i2), max(i2), sum(i8), avg(i8), min(i8), max(i8)', 'true'),
  ('count(f8), min(f8), max(f8), min(f4), max(f4)', 'true'),
  ('sum(f8), avg(f8), sum(f4), avg(f4)', 'f8 < ''Infinity'' AND f4 < 100 AND f4 > 0'),
  ('count(t), count(u), count(*)', 'i4 < 30'),
  ('sum(i4), max(f8)', 'b AND i2 IS NOT NULL'),
  ('sum(i4), count(*)', 'i4 > 1000'),
  ('sum(i4) + 1, max(i4) - min(i4)', 'i4 <> 3'),
  ('sum(i4 + 1)', 'true'),
  ('count(DISTINCT i4)', 'true'),
  ('sum(i4) FILTER (WHERE b)', 'true'),
  ('min(d), max(d), min(ts), max(ts), min(tz), max(tz)', 'true'),
  ('max(tz), count(*)', 'tz < ''2020-01-05'''),
  ('sum(n), min(d)', 'true'),
  ('sum(i4)', 'i4 + 1 = 5')
) v(sel, cond);
EXPLAIN (COSTS OFF) SELECT sum(i4), avg(f8), count(*) FROM pd WHERE i2 < 5;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT sum(i4), max(f8) FROM pd WHERE b;
-- GROUP BY one column (a hashed aggregate): the tablets compute the groups.
CREATE FUNCTION pd_grp(sel text, grp text, cond text DEFAULT 'true') RETURNS text LANGUAGE sql AS $$
  SELECT pd_same(format('SELECT %s FROM @T WHERE %s GROUP BY %s', sel, cond, grp), 'count(*) || '' groups, '' || md5(string_agg(x::text, '';'' ORDER BY x::text))')
$$;
SET enable_sort = off;
SELECT sel, grp, cond, pd_grp(sel, grp, cond) FROM (VALUES
  ('i2, count(*), sum(i4), min(f8), max(f8), avg(i8)', 'i2', 'true'),
  ('b, count(*), count(t), max(i4)', 'b', 'true'),
  ('t, count(*), sum(i2)', 't', 'i4 < 50'),
  ('f4, count(*)', 'f4', 'true'),
  ('f8, count(*), sum(i4)', 'f8', 'f8 < 10 OR f8 IS NULL OR f8 = ''NaN'''),
  ('d, max(i4)', 'd', 'i4 > 90'),
  ('u, count(*)', 'u', 'true'),
  ('vc, sum(i4)', 'vc', 'true'),
  ('by, count(*)', 'by', 'true'),
  ('i2 % 3, count(*)', 'i2 % 3', 'true'),
  ('i2, count(*)', 'i2, b', 'true'),
  ('n, count(*)', 'n', 'i4 < 5')
) v(sel, grp, cond);
EXPLAIN (COSTS OFF) SELECT i2, sum(i4) FROM pd WHERE b GROUP BY i2 HAVING sum(i4) > 100;
SELECT i2, sum(i4) FROM pd WHERE b GROUP BY i2 HAVING sum(i4) > 900 ORDER BY 1;
SELECT i2, sum(i4) FROM pd_heap WHERE b GROUP BY i2 HAVING sum(i4) > 900 ORDER BY 1;
SELECT v, (SELECT string_agg(s::text, ',' ORDER BY s) FROM (SELECT sum(i4) s FROM pd WHERE i2 = v GROUP BY b) x) FROM generate_series(1, 3) v;
SELECT v, (SELECT string_agg(s::text, ',' ORDER BY s) FROM (SELECT sum(i4) s FROM pd_heap WHERE i2 = v GROUP BY b) x) FROM generate_series(1, 3) v;
RESET enable_sort;
SELECT sum(i4) FROM pd HAVING sum(i4) > 0;
SELECT sum(i4) FROM pd HAVING sum(i4) < 0;
SELECT v, (SELECT sum(i4) FROM pd WHERE i2 = v) AS pinax, (SELECT sum(i4) FROM pd_heap WHERE i2 = v) AS heap FROM generate_series(1, 3) v;

-- Parameters: a generic plan's values are taken when the scan starts; a
-- correlated subquery's at each rescan; a NULL value pushes nothing.
PREPARE q(int, float8) AS SELECT count(*) FROM pd WHERE i4 = $1 AND f8 > $2;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE q(5, 0);
EXECUTE q(5, 0);
EXECUTE q(6, 100);
EXECUTE q(NULL, 0);
RESET plan_cache_mode;
DEALLOCATE q;
SELECT v, (SELECT count(*) FROM pd WHERE i4 = v) AS pinax, (SELECT count(*) FROM pd_heap WHERE i4 = v) AS heap FROM generate_series(3, 5) v;
SELECT left(v, 5), (SELECT count(*) FROM pd WHERE t = v) AS pinax, (SELECT count(*) FROM pd_heap WHERE t = v) AS heap FROM (VALUES ('b3'), (repeat('x', 5000)), (NULL)) x(v);
-- count(*) alone: the aggregate takes the tablets' number and makes no row per
-- counted row (the scan node returns only the rows the tablets cannot decide);
-- with HAVING and expressions of it. Beside another aggregate that reads no
-- column (sum(1)) the scan's rows are made and aggregated here. A sequential
-- scan only counted (no custom path) hands over its number the same way.
SELECT count(*), count(*) + 1 AS more FROM pd WHERE i4 < 50 HAVING count(*) > 0;
SELECT count(*), count(*) + 1 AS more FROM pd_heap WHERE i4 < 50 HAVING count(*) > 0;
SELECT count(*) FROM pd WHERE i4 < 50 HAVING count(*) > 100000;
SELECT count(*), sum(1) FROM pd WHERE i4 < 50;
SELECT count(*), sum(1) FROM pd_heap WHERE i4 < 50;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*), sum(1) FROM pd WHERE i4 < 50;
SET pinax.enable_filter_pushdown = off;
SET enable_indexonlyscan = off;
SET enable_bitmapscan = off;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM pd;
SELECT (SELECT count(*) FROM pd) AS pinax, (SELECT count(*) FROM pd_heap) AS heap, (SELECT count(*) FROM pd HAVING count(*) < 0) AS none;
SELECT v, (SELECT count(*) FROM pd WHERE v > 3) AS pinax, (SELECT count(*) FROM pd_heap WHERE v > 3) AS heap FROM generate_series(3, 4) v;
RESET enable_indexonlyscan;
RESET enable_bitmapscan;
-- The same over an index-only scan that reads no column (the whole index
-- counted in storage). A qual of the scan's own runs on each row: a volatile
-- one keeps the rows coming one by one (every other row passes).
SET enable_seqscan = off;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM pd;
SELECT (SELECT count(*) FROM pd) AS pinax, (SELECT count(*) FROM pd_heap) AS heap;
CREATE SEQUENCE pd_s1;
CREATE SEQUENCE pd_s2;
EXPLAIN (COSTS OFF) SELECT count(*) FROM pd WHERE nextval('pd_s1') % 2 = 0;
SELECT (SELECT count(*) FROM pd WHERE nextval('pd_s1') % 2 = 0) AS pinax, (SELECT count(*) FROM pd_heap WHERE nextval('pd_s2') % 2 = 0) AS heap;
DROP SEQUENCE pd_s1, pd_s2;
RESET enable_seqscan;
RESET pinax.enable_filter_pushdown;

-- Writes through a pushed-down scan; the transaction's own writes are filtered
-- as they are seen; row locks.
UPDATE pd SET f8 = f8 + 1 WHERE i4 = 3;
UPDATE pd_heap SET f8 = f8 + 1 WHERE i4 = 3;
DELETE FROM pd WHERE i2 = 19 AND b;
DELETE FROM pd_heap WHERE i2 = 19 AND b;
BEGIN;
INSERT INTO pd (id, i4, t) VALUES (5001, 3, 'new');
UPDATE pd SET i4 = 3 WHERE id = 1;
SELECT id, t FROM pd WHERE i4 = 3 AND (t = 'new' OR id = 1) ORDER BY id;
SELECT id FROM pd WHERE i4 = 4 ORDER BY id LIMIT 2 FOR UPDATE;
ROLLBACK;
SELECT pd_check('i4 = 3'), pd_check('i2 = 19');

-- Columns added and dropped after rows were written: a row written before a
-- column existed has its default from the catalog (PostgreSQL decides it); the
-- layout still counts a dropped column's bytes.
ALTER TABLE pd ADD COLUMN extra int DEFAULT 7;
ALTER TABLE pd_heap ADD COLUMN extra int DEFAULT 7;
INSERT INTO pd (id, i4, extra) VALUES (6001, 1, 8), (6002, 1, NULL);
INSERT INTO pd_heap (id, i4, extra) VALUES (6001, 1, 8), (6002, 1, NULL);
SELECT pd_check('extra = 7'), pd_check('extra = 8'), pd_check('extra IS NULL');
SELECT pd_agg('sum(extra), count(extra), max(extra)'), pd_agg('count(*), sum(i4)', 'extra = 7');
ALTER TABLE pd DROP COLUMN i2;
ALTER TABLE pd_heap DROP COLUMN i2;
SELECT pd_check('i4 = 5'), pd_check('f8 > 200 AND b'), pd_check('u = md5(''7'')::uuid');
DROP FUNCTION pd_check(text);
DROP FUNCTION pd_agg(text, text);
DROP FUNCTION pd_grp(text, text, text);
DROP FUNCTION pd_same(text, text);
DROP TABLE pd, pd_heap;
