-- Index paths of Pinax tables (plans in index_plans). Bitmap scans of Pinax
-- indexes (amgetbitmap): BitmapOr of primary-key probes (row-value IN lists,
-- ORs), BitmapAnd of two indexes, rows matched by several arms returned once,
-- FOR UPDATE, own writes, rescans. Then ordered reads under a hash prefix.
SET enable_seqscan = off;
SET enable_indexscan = off;
CREATE TABLE bm (a int, b int, c text, d int, PRIMARY KEY (a, b));
CREATE INDEX bm_c ON bm (c);
CREATE INDEX bm_d ON bm (d);
INSERT INTO bm SELECT g / 100, g % 100, 'c' || (g % 37), g % 11 FROM generate_series(0, 9999) g;
-- A row-value IN list: one primary-key probe per row value.
SELECT a, b, c FROM bm WHERE (a, b) IN ((1, 5), (1, 77), (3, 3), (99, 99), (200, 1)) ORDER BY a, b;
SELECT a, b FROM bm WHERE (a = 7 AND b = 7) OR (a = 8 AND b = 8) OR (a = 7 AND b = 7) ORDER BY a, b;
-- ORs over two indexes: a row both arms find comes back once.
SELECT count(*), sum(a * 100 + b) FROM bm WHERE c = 'c1' OR a = 2;
SELECT count(*), sum(a * 100 + b) FROM bm WHERE c = 'c1' OR d = 3 OR (a, b) IN ((2, 2), (4, 4));
-- AND of two indexes.
SELECT a, b FROM bm WHERE c = 'c5' AND d = 5 ORDER BY a, b;
SELECT count(*) FROM bm WHERE c = 'c5' AND d = 5 AND (a = 1 OR a = 30);
-- Nothing found.
SELECT count(*) FROM bm WHERE c = 'nothing' OR (a, b) IN ((1000, 1));
-- FOR UPDATE, then the rows changed and read back in the same transaction.
BEGIN;
SELECT a, b, c FROM bm WHERE (a, b) IN ((1, 5), (2, 6)) ORDER BY a, b FOR UPDATE;
UPDATE bm SET c = 'changed' WHERE (a, b) IN ((1, 5), (2, 6));
SELECT a, b, c FROM bm WHERE c = 'changed' OR (a, b) IN ((1, 5), (3, 7)) ORDER BY a, b;
DELETE FROM bm WHERE c = 'changed' OR d = 100;
SELECT count(*) FROM bm WHERE c = 'changed' OR (a, b) IN ((1, 5), (2, 6), (3, 7));
ROLLBACK;
SELECT a, b, c FROM bm WHERE (a, b) IN ((1, 5), (2, 6)) ORDER BY a, b;
-- The same statement twice in a transaction: each reads at its own time.
BEGIN;
SELECT count(*) FROM bm WHERE c = 'c2' OR d = 2;
UPDATE bm SET d = 2 WHERE a = 9;
SELECT count(*) FROM bm WHERE c = 'c2' OR d = 2;
ROLLBACK;
-- A bitmap scan on the inner side of a nested loop, rescanned per outer row.
CREATE TABLE bm_outer (x int, y int);
INSERT INTO bm_outer VALUES (1, 5), (2, 6), (2, 6), (50, 50), (500, 1);
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT o.x, o.y, bm.c FROM bm_outer o JOIN bm ON (bm.a = o.x AND bm.b = o.y) OR (bm.a = o.y AND bm.b = o.x) ORDER BY 1, 2, 3;
RESET enable_hashjoin;
RESET enable_mergejoin;
-- UPDATE and DELETE through bitmap scans.
UPDATE bm SET d = d + 1000 WHERE c = 'c3' OR (a, b) IN ((0, 0));
SELECT count(*), sum(d) FROM bm WHERE d >= 1000;
DELETE FROM bm WHERE d >= 1000 OR (a, b) IN ((0, 1));
SELECT count(*) FROM bm;
DROP TABLE bm, bm_outer;
RESET enable_seqscan;
RESET enable_indexscan;

-- Ordered reads of a hash-sharded key whose first column is given: ORDER BY,
-- LIMIT, min/max, backward, bounds on the next columns; and the same keys with the
-- first column not given, or given by = ANY (hash order: a sort).
CREATE TABLE no (w int, d int, o int, v text, PRIMARY KEY (w, d, o));
CREATE INDEX no_v ON no (w, v);
INSERT INTO no SELECT 1 + g % 3, 1 + (g / 3) % 10, g, 'v' || (g % 7) FROM generate_series(1, 3000) g;
SELECT o FROM no WHERE w = 1 AND d = 3 ORDER BY o LIMIT 3;
SELECT o FROM no WHERE w = 1 AND d = 3 ORDER BY o DESC LIMIT 3;
SELECT d, o FROM no WHERE w = 2 ORDER BY d, o LIMIT 4;
SELECT d, o FROM no WHERE w = 2 ORDER BY d DESC, o DESC LIMIT 4;
SELECT min(o), max(o), count(*) FROM no WHERE w = 3 AND d = 7;
SELECT o FROM no WHERE w = 1 AND d = 3 AND o > 2000 ORDER BY o LIMIT 3;
SELECT o FROM no WHERE w = 1 AND d = 3 AND o BETWEEN 100 AND 400 ORDER BY o;
SELECT o FROM no WHERE w = 1 AND d = 3 AND o < 100 ORDER BY o DESC;
SELECT v, o FROM no WHERE w = 2 AND v >= 'v5' ORDER BY v, o LIMIT 3;
SELECT w, d, o FROM no WHERE w IN (1, 2, 3) AND d = 1 ORDER BY w, d, o LIMIT 4;
SELECT w, d, o FROM no WHERE d = 1 AND o < 40 ORDER BY w, d, o;
SELECT w, d, o FROM no ORDER BY w, d, o LIMIT 4;
-- A cursor walking an ordered range both ways.
BEGIN;
DECLARE c SCROLL CURSOR FOR SELECT o FROM no WHERE w = 1 AND d = 3 ORDER BY o;
FETCH 3 FROM c;
FETCH BACKWARD 2 FROM c;
FETCH LAST FROM c;
FETCH BACKWARD 2 FROM c;
COMMIT;
-- A merge join or nested loop on the ordered columns.
SELECT count(*), sum(a.o + b.o) FROM no a JOIN no b ON a.o = b.o + 3 WHERE a.w = 1 AND a.d = 2 AND b.w = 1 AND b.d = 2;
DROP TABLE no;

-- Primary-key rows named one by one (= ANY, IN): read together, rows not
-- there skipped, duplicates once; FOR UPDATE, UPDATE and DELETE; more values
-- than one batch holds; prepared; rescanned. (Both directions of a cursor over
-- such a scan: index_plans, on a range-sharded table.)
SET enable_seqscan = off;
SET enable_bitmapscan = off;
CREATE TABLE pts (id int PRIMARY KEY, v text);
INSERT INTO pts SELECT g, 'v' || g FROM generate_series(1, 3000) g;
SELECT id, v FROM pts WHERE id = ANY (ARRAY[5, 77, 3, 100000, 42, -1]) ORDER BY id;
SELECT id, v FROM pts WHERE id IN (7, 7, 8, 2999) ORDER BY id DESC;
SELECT count(*), sum(id) FROM pts WHERE id = ANY (ARRAY(SELECT g FROM generate_series(-50, 4000, 3) g));
SELECT count(*) FROM pts WHERE id = ANY (ARRAY[1, 1, 1, 2]);
PREPARE by_ids(int[]) AS SELECT id, v FROM pts WHERE id = ANY ($1) ORDER BY id;
EXECUTE by_ids('{1, 2, 3}');
EXECUTE by_ids('{3000, 3001}');
EXECUTE by_ids('{}');
EXECUTE by_ids('{4, NULL, 5}');
DEALLOCATE by_ids;
BEGIN;
SELECT id, v FROM pts WHERE id IN (11, 12, 13) ORDER BY id FOR UPDATE;
UPDATE pts SET v = 'changed' WHERE id = ANY (ARRAY[11, 13, 9999]);
SELECT id, v FROM pts WHERE id IN (11, 12, 13) ORDER BY id;
DELETE FROM pts WHERE id IN (12, 13, 14);
SELECT id, v FROM pts WHERE id IN (11, 12, 13, 14, 15) ORDER BY id;
ROLLBACK;
SELECT id, v FROM pts WHERE id IN (11, 12, 13, 14) ORDER BY id;
-- As the inner side of a nested loop, rescanned per outer row.
CREATE TABLE pts_outer (ids int[]);
INSERT INTO pts_outer VALUES ('{1, 2}'), ('{2, 9000}'), ('{}'), ('{3000, 2999, 1}');
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT o.ids, p.id FROM pts_outer o JOIN pts p ON p.id = ANY (o.ids) ORDER BY 1, 2;
RESET enable_hashjoin;
RESET enable_mergejoin;
DROP TABLE pts, pts_outer;
RESET enable_seqscan;
RESET enable_bitmapscan;
