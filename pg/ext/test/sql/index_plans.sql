-- Plans of index paths on Pinax tables (answers are checked against PostgreSQL's
-- in index_paths): bitmap scans, a bitmap too big for work_mem (lossy pages),
-- ordered reads under a hash prefix.
CREATE TABLE bmp (w int, i int, q int, PRIMARY KEY (w, i));
CREATE INDEX bmp_q ON bmp (q);
INSERT INTO bmp SELECT 1 + g % 2, g, g % 100 FROM generate_series(1, 2000) g;
ANALYZE bmp;
-- TPC-C's stock look-up: a BitmapOr of primary-key probes, not a scan of the table.
EXPLAIN (COSTS OFF) SELECT * FROM bmp WHERE (w, i) IN ((1, 2), (1, 4), (2, 5)) FOR UPDATE;
SELECT * FROM bmp WHERE (w, i) IN ((1, 2), (1, 4), (2, 5)) ORDER BY i FOR UPDATE;
EXPLAIN (COSTS OFF) SELECT * FROM bmp WHERE q = 3 OR (w = 1 AND i = 10);
SET enable_seqscan = off;
SET enable_indexscan = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM bmp WHERE q = 3 AND w = 2;
-- No parallel bitmap heap scans (the TIDs are the reading process's).
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET min_parallel_index_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT count(*) FROM bmp WHERE q = 3 OR q = 4;
SELECT count(*) FROM bmp WHERE q = 3 OR q = 4;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET min_parallel_index_scan_size;
RESET max_parallel_workers_per_gather;
-- Lossy pages: 300,000 rows in a bitmap of 64 kB.
INSERT INTO bmp SELECT 3, g, g % 100 FROM generate_series(1, 300000) g;
SET work_mem = '64kB';
CREATE FUNCTION bmp_plan(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE l text;
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
    RETURN NEXT regexp_replace(l, '=[1-9][0-9]*', '=N', 'g');
  END LOOP;
END $$;
SELECT * FROM bmp_plan('SELECT count(*) FROM bmp WHERE (w = 3 AND i > 1000) OR w = 1');
SELECT count(*), sum(i::bigint) FROM bmp WHERE (w = 3 AND i > 1000) OR w = 1;
RESET work_mem;
SELECT count(*), sum(i::bigint) FROM bmp WHERE (w = 3 AND i > 1000) OR w = 1;
DROP FUNCTION bmp_plan;
DROP TABLE bmp;
RESET enable_seqscan;
RESET enable_indexscan;
-- Ordered reads under a hash prefix: TPC-C's oldest new order of a district is
-- the first entry of one range, no sort; the hash column not given (or by
-- = ANY) leaves the rows in hash order: a sort.
CREATE TABLE no (w int, d int, o int, v text, PRIMARY KEY (w, d, o));
CREATE INDEX no_v ON no (w, v);
INSERT INTO no SELECT 1 + g % 3, 1 + (g / 3) % 10, g, 'v' || (g % 7) FROM generate_series(1, 3000) g;
ANALYZE no;
EXPLAIN (COSTS OFF) SELECT o FROM no WHERE w = 1 AND d = 3 ORDER BY o LIMIT 1;
EXPLAIN (COSTS OFF) SELECT o FROM no WHERE w = 1 AND d = 3 ORDER BY o DESC LIMIT 1;
EXPLAIN (COSTS OFF) SELECT max(o) FROM no WHERE w = 3 AND d = 7;
EXPLAIN (COSTS OFF) SELECT o FROM no WHERE w = 1 AND d = 3 AND o > 2000 ORDER BY o LIMIT 3;
EXPLAIN (COSTS OFF) SELECT v, o FROM no WHERE w = 2 AND v >= 'v5' ORDER BY v LIMIT 3;
EXPLAIN (COSTS OFF) SELECT w, d, o FROM no WHERE w IN (1, 2, 3) AND d = 1 ORDER BY w, d, o LIMIT 4;
EXPLAIN (COSTS OFF) SELECT w, d, o FROM no ORDER BY w, d, o LIMIT 4;
-- How many rows storage ships for the first: one.
SET pinax.trace_scans = on;
SELECT o FROM no WHERE w = 1 AND d = 3 ORDER BY o LIMIT 1;
RESET pinax.trace_scans;
DROP TABLE no;

-- Primary-key rows named one by one: one read of them all (one request per
-- tablet holding some), in the order of the scan; a cursor over such a scan
-- both ways (rows not there skipped both ways).
CREATE TABLE pts_r (id int PRIMARY KEY, v text) WITH (pinax.sharding = 'range', pinax.split_at = '10');
INSERT INTO pts_r SELECT g, 'v' || g FROM generate_series(1, 3000) g;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT id, v FROM pts_r WHERE id = ANY (ARRAY[20, 10, 30, 5000, 10]);
SET pinax.trace_scans = on;
SELECT id, v FROM pts_r WHERE id = ANY (ARRAY[20, 10, 30, 5000, 10, 1]);
SELECT id, v FROM pts_r WHERE id IN (20, 10, 30, 5000, 1) ORDER BY id DESC;
RESET pinax.trace_scans;
BEGIN;
DECLARE c SCROLL CURSOR FOR SELECT id FROM pts_r WHERE id = ANY (ARRAY[1, 5, 6000, 9, 13, 17, 7000]) ORDER BY id;
FETCH 3 FROM c;
FETCH BACKWARD 2 FROM c;
FETCH 4 FROM c;
FETCH BACKWARD 1 FROM c;
FETCH LAST FROM c;
FETCH BACKWARD 5 FROM c;
FETCH BACKWARD 1 FROM c;
FETCH NEXT FROM c;
COMMIT;
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP TABLE pts_r;
