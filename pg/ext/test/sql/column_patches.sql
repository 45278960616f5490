-- Column-level writes: an UPDATE that keeps the key stores only the columns it
-- changed (a patch); reads merge the patches over the row. Every read path must
-- see the merged row: sequential scans with and without pushed-down filters and
-- aggregates, primary-key and secondary index scans, index-only scans, own
-- uncommitted patches, savepoints, columns added and dropped. A heap twin gets
-- the same statements; the two must agree. (Concurrency: isolation/specs/
-- column-conflicts.spec.)
CREATE TABLE cp (id int PRIMARY KEY, a int, b float8, c text, d date, e int DEFAULT 0);
CREATE INDEX cp_c ON cp (c);
CREATE TABLE cp_heap (LIKE cp INCLUDING ALL) USING heap;
INSERT INTO cp SELECT g, g, g / 4.0, 'c' || g, DATE '2026-01-01' + g, 0 FROM generate_series(1, 200) g;
INSERT INTO cp_heap SELECT * FROM cp;
CREATE FUNCTION cp_apply(stmt text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format(stmt, 'cp');
  EXECUTE format(stmt, 'cp_heap');
END $$;
CREATE FUNCTION cp_diff() RETURNS TABLE (side text, n bigint) LANGUAGE sql AS $$
  SELECT 'pinax only', count(*) FROM (SELECT * FROM cp EXCEPT ALL SELECT * FROM cp_heap) x
  UNION ALL
  SELECT 'heap only', count(*) FROM (SELECT * FROM cp_heap EXCEPT ALL SELECT * FROM cp) x
$$;
-- One column at a time, many times over (rows 1..20 get more patches than a
-- row keeps before it is stored whole again).
DO $$
BEGIN
  FOR i IN 1..12 LOOP
    PERFORM cp_apply(format('UPDATE %%I SET a = a + %s WHERE id <= 20', i));
    PERFORM cp_apply(format('UPDATE %%I SET b = b * 2 WHERE mod(id, 3) = %s', i % 3));
    PERFORM cp_apply(format('UPDATE %%I SET c = c || %L WHERE mod(id, 7) = %s', i, i % 7));
  END LOOP;
END $$;
SELECT * FROM cp_diff();
-- Own patches before commit, a savepoint rolled back.
BEGIN;
SELECT cp_apply('UPDATE %I SET d = d + 1 WHERE id BETWEEN 5 AND 15');
SAVEPOINT s;
SELECT cp_apply('UPDATE %I SET e = 99 WHERE id BETWEEN 10 AND 20');
SELECT * FROM cp_diff();
ROLLBACK TO SAVEPOINT s;
SELECT cp_apply('UPDATE %I SET a = -a WHERE id BETWEEN 12 AND 18');
SELECT * FROM cp_diff();
SELECT id, a, d, e FROM cp WHERE id BETWEEN 11 AND 13 ORDER BY id;
COMMIT;
SELECT * FROM cp_diff();
-- A column added (rows without it read its default) and one dropped.
ALTER TABLE cp ADD COLUMN f text DEFAULT 'f0';
ALTER TABLE cp_heap ADD COLUMN f text DEFAULT 'f0';
SELECT cp_apply('UPDATE %I SET b = b + 1 WHERE id <= 30');
SELECT cp_apply('UPDATE %I SET f = ''f1'' WHERE mod(id, 2) = 0');
ALTER TABLE cp DROP COLUMN e;
ALTER TABLE cp_heap DROP COLUMN e;
SELECT cp_apply('UPDATE %I SET a = a + 1 WHERE id <= 30');
SELECT * FROM cp_diff();
-- Every read path sees the merged rows.
SELECT (SELECT count(*) FROM cp WHERE a > 50) = (SELECT count(*) FROM cp_heap WHERE a > 50) AS filtered_count,
       (SELECT sum(a) FROM cp) = (SELECT sum(a) FROM cp_heap) AS storage_sum,
       (SELECT max(b) FROM cp) = (SELECT max(b) FROM cp_heap) AS storage_max,
       (SELECT array_agg(id ORDER BY id) FROM cp WHERE b > 100) = (SELECT array_agg(id ORDER BY id) FROM cp_heap WHERE b > 100) AS filtered_rows,
       (SELECT sum(a) FROM cp GROUP BY f ORDER BY f LIMIT 1) = (SELECT sum(a) FROM cp_heap GROUP BY f ORDER BY f LIMIT 1) AS grouped;
SET enable_seqscan = off;
SELECT (SELECT array_agg(c ORDER BY c) FROM cp WHERE c LIKE 'c1%') = (SELECT array_agg(c ORDER BY c) FROM cp_heap WHERE c LIKE 'c1%') AS by_secondary_index;
EXPLAIN (COSTS OFF) SELECT * FROM cp WHERE c = 'c7' || '1';
SELECT * FROM cp WHERE c = (SELECT c FROM cp_heap WHERE id = 7);
EXPLAIN (COSTS OFF) SELECT c FROM cp WHERE c > 'c19';
SELECT (SELECT array_agg(c ORDER BY c) FROM cp WHERE c > 'c19') = (SELECT array_agg(c ORDER BY c) FROM cp_heap WHERE c > 'c19') AS index_only;
SELECT (SELECT row(cp.*)::text FROM cp WHERE id = 14) = (SELECT row(cp_heap.*)::text FROM cp_heap WHERE id = 14) AS by_primary_key;
RESET enable_seqscan;
-- Updates as whole rows (column-level conflicts off) read the same.
SET pinax.column_conflicts = off;
SELECT cp_apply('UPDATE %I SET a = a * 2 WHERE id <= 25');
RESET pinax.column_conflicts;
SELECT cp_apply('UPDATE %I SET f = ''f2'' WHERE id <= 25');
SELECT * FROM cp_diff();
DROP TABLE cp, cp_heap;
DROP FUNCTION cp_apply(text), cp_diff();
-- Nested statements: an UPDATE whose SET calls a function that writes the same
-- table (INSERT ... ON CONFLICT DO UPDATE; an UPDATE caught by an exception
-- block), and an UPDATE of a partition through its parent.
CREATE TABLE e1 (id int PRIMARY KEY, a int, b int);
INSERT INTO e1 SELECT g, g, g FROM generate_series(1, 5) g;
CREATE FUNCTION e1_bump(i int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO e1 VALUES (i + 100, 0, 0) ON CONFLICT (id) DO UPDATE SET b = e1.b + 1;
  UPDATE e1 SET b = b + 10 WHERE id = i + 100;
  RETURN i * 10;
END $$;
UPDATE e1 SET a = e1_bump(id) WHERE id <= 3;
UPDATE e1 SET a = e1_bump(id) WHERE id = 1;
SELECT * FROM e1 ORDER BY id;
CREATE FUNCTION e1_safe(i int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    UPDATE e1 SET b = 1 / 0 WHERE id = i;
  EXCEPTION WHEN division_by_zero THEN
    RETURN -1;
  END;
  RETURN 0;
END $$;
UPDATE e1 SET a = e1_safe(id) WHERE id = 4;
SELECT * FROM e1 WHERE id = 4;
CREATE TABLE ept (id int PRIMARY KEY, a int, b int) PARTITION BY RANGE (id);
CREATE TABLE ept1 PARTITION OF ept FOR VALUES FROM (0) TO (100) USING pinax;
INSERT INTO ept SELECT g, g, g FROM generate_series(1, 6) g;
UPDATE ept SET a = a + 1 WHERE id < 4;
UPDATE ept SET b = -b WHERE id > 2;
SELECT * FROM ept ORDER BY id;
DROP TABLE e1, ept;
DROP FUNCTION e1_bump(int), e1_safe(int);
