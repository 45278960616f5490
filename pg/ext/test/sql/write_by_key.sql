-- UPDATE and DELETE of one row by its whole primary key, in autocommit: on Pinax
-- one storage write without reading the row (Custom Scan (PinaxWriteByKey);
-- write_by_key_plans shows when). Every statement must give PostgreSQL's answers:
-- row counts (ROW_COUNT: pg_regress's psql hides command tags), values, errors.
CREATE TABLE wbk (id int PRIMARY KEY, a text, b int NOT NULL DEFAULT 0, c varchar(5));
INSERT INTO wbk SELECT g, 'a' || g, g, 'c' || g FROM generate_series(1, 20) g;
UPDATE wbk SET a = 'x' WHERE id = 3;
\echo rows :ROW_COUNT
UPDATE wbk SET a = 'y' WHERE id = 99;
\echo rows :ROW_COUNT
UPDATE wbk SET a = 'z', c = NULL WHERE id = 4;
\echo rows :ROW_COUNT
UPDATE wbk SET a = 'n' WHERE id = NULL;
\echo rows :ROW_COUNT
UPDATE wbk SET b = NULL WHERE id = 6;
\echo rows :ROW_COUNT
UPDATE wbk SET c = 'toolong' WHERE id = 7;
\echo rows :ROW_COUNT
UPDATE wbk SET b = DEFAULT WHERE id = 8;
\echo rows :ROW_COUNT
UPDATE wbk SET a = md5(random()::text) WHERE id = 1;
\echo rows :ROW_COUNT
SELECT length(a) FROM wbk WHERE id = 1;
DELETE FROM wbk WHERE id = 5;
\echo rows :ROW_COUNT
DELETE FROM wbk WHERE id = 5;
\echo rows :ROW_COUNT
-- Twenty updates of one row, alternating columns: more than a row carries as patches.
SELECT format('UPDATE wbk SET %s = %L WHERE id = 2', CASE WHEN g % 2 = 0 THEN 'a' ELSE 'c' END, 'v' || g) FROM generate_series(1, 20) g
\gexec
SELECT * FROM wbk WHERE id = 2;
-- Prepared, with parameters (a generic plan after five executions).
PREPARE u(text, int) AS UPDATE wbk SET a = $1 WHERE id = $2;
EXECUTE u('p1', 9);
\echo rows :ROW_COUNT
EXECUTE u('p2', 9);
\echo rows :ROW_COUNT
EXECUTE u('p3', 9);
\echo rows :ROW_COUNT
EXECUTE u('p4', 9);
\echo rows :ROW_COUNT
EXECUTE u('p5', 9);
\echo rows :ROW_COUNT
EXECUTE u('p6', 9);
\echo rows :ROW_COUNT
EXECUTE u('p7', 9);
\echo rows :ROW_COUNT
EXECUTE u('p8', 1000);
\echo rows :ROW_COUNT
PREPARE d(int) AS DELETE FROM wbk WHERE id = $1;
EXECUTE d(10);
\echo rows :ROW_COUNT
EXECUTE d(10);
\echo rows :ROW_COUNT
-- Text and composite keys.
CREATE TABLE wbk2 (k1 varchar(10), k2 int, v text, PRIMARY KEY (k1, k2));
INSERT INTO wbk2 VALUES ('a', 1, 'one'), ('a', 2, 'two'), ('b', 1, 'three');
UPDATE wbk2 SET v = 'uno' WHERE k1 = 'a' AND k2 = 1;
\echo rows :ROW_COUNT
UPDATE wbk2 SET v = 'none' WHERE k1 = 'a' AND k2 = 3;
\echo rows :ROW_COUNT
UPDATE wbk2 SET v = 'dos' WHERE k1 = 'a'::text AND k2 = 2;
\echo rows :ROW_COUNT
UPDATE wbk2 SET v = 'partial' WHERE k1 = 'b';
\echo rows :ROW_COUNT
DELETE FROM wbk2 WHERE k2 = 2 AND k1 = 'a';
\echo rows :ROW_COUNT
SELECT * FROM wbk2 ORDER BY k1, k2;
-- Inside transaction blocks: rolled back, then committed; after an insert of the row.
BEGIN;
UPDATE wbk SET a = 'rolled back' WHERE id = 11;
\echo rows :ROW_COUNT
DELETE FROM wbk WHERE id = 12;
\echo rows :ROW_COUNT
ROLLBACK;
BEGIN;
UPDATE wbk SET a = 'in block' WHERE id = 11;
\echo rows :ROW_COUNT
SELECT a FROM wbk WHERE id = 11;
COMMIT;
BEGIN;
INSERT INTO wbk VALUES (30, 'new', 30);
UPDATE wbk SET a = 'newer' WHERE id = 30;
\echo rows :ROW_COUNT
COMMIT;
-- More in transaction blocks (READ COMMITTED: by key as provisional writes):
-- the statement's own later reads, a second update of the row (read first), an
-- update and a delete of a row deleted in the block, savepoints, an abort.
INSERT INTO wbk SELECT g, 'a' || g, g, 'c' || g FROM generate_series(21, 26) g;
BEGIN;
SELECT a, b FROM wbk WHERE id = 21;
UPDATE wbk SET a = 'one' WHERE id = 21;
\echo rows :ROW_COUNT
SELECT a, b FROM wbk WHERE id = 21;
UPDATE wbk SET b = 2121 WHERE id = 21;
\echo rows :ROW_COUNT
UPDATE wbk SET c = 'c21' WHERE id = 21;
\echo rows :ROW_COUNT
SELECT a, b, c FROM wbk WHERE id = 21;
UPDATE wbk SET a = 'two' WHERE id = 22;
\echo rows :ROW_COUNT
DELETE FROM wbk WHERE id = 22;
\echo rows :ROW_COUNT
UPDATE wbk SET a = 'gone' WHERE id = 22;
\echo rows :ROW_COUNT
DELETE FROM wbk WHERE id = 22;
\echo rows :ROW_COUNT
UPDATE wbk SET a = 'none' WHERE id = 999;
\echo rows :ROW_COUNT
SAVEPOINT s1;
UPDATE wbk SET a = 'undone' WHERE id = 23;
\echo rows :ROW_COUNT
DELETE FROM wbk WHERE id = 24;
\echo rows :ROW_COUNT
ROLLBACK TO SAVEPOINT s1;
SELECT id, a FROM wbk WHERE id IN (23, 24) ORDER BY id;
UPDATE wbk SET a = 'kept' WHERE id = 23;
\echo rows :ROW_COUNT
RELEASE SAVEPOINT s1;
SAVEPOINT s2;
UPDATE wbk SET b = NULL WHERE id = 24;
ROLLBACK TO SAVEPOINT s2;
UPDATE wbk SET b = 2424 WHERE id = 24;
\echo rows :ROW_COUNT
COMMIT;
SELECT id, a, b, c FROM wbk WHERE id BETWEEN 21 AND 24 ORDER BY id;
BEGIN;
UPDATE wbk SET a = 'aborted' WHERE id = 25;
DELETE FROM wbk WHERE id = 26;
SELECT id, a FROM wbk WHERE id IN (25, 26) ORDER BY id;
ROLLBACK;
SELECT id, a FROM wbk WHERE id IN (25, 26) ORDER BY id;
BEGIN ISOLATION LEVEL REPEATABLE READ;
UPDATE wbk SET a = 'rr' WHERE id = 25;
\echo rows :ROW_COUNT
COMMIT;
SELECT id, a FROM wbk WHERE id = 25;
-- Triggers see the old and new rows.
CREATE TABLE wbk_log (op text, old_a text, new_a text);
CREATE FUNCTION wbk_trg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO wbk_log VALUES (TG_OP, OLD.a, CASE WHEN TG_OP = 'UPDATE' THEN NEW.a END);
  RETURN NULL;
END $$;
CREATE TRIGGER wbk_t AFTER UPDATE OR DELETE ON wbk FOR EACH ROW EXECUTE FUNCTION wbk_trg();
UPDATE wbk SET a = 'trig' WHERE id = 13;
\echo rows :ROW_COUNT
DELETE FROM wbk WHERE id = 14;
\echo rows :ROW_COUNT
SELECT * FROM wbk_log ORDER BY op DESC;
DROP TRIGGER wbk_t ON wbk;
-- RETURNING.
UPDATE wbk SET a = 'ret' WHERE id = 15 RETURNING id, a, b;
DELETE FROM wbk WHERE id = 16 RETURNING *;
-- A secondary index: its entries follow (an update of another column keeps them).
CREATE INDEX wbk_a ON wbk (a);
UPDATE wbk SET c = 'idx' WHERE id = 17;
\echo rows :ROW_COUNT
UPDATE wbk SET a = 'indexed' WHERE id = 17;
\echo rows :ROW_COUNT
DELETE FROM wbk WHERE id = 18;
\echo rows :ROW_COUNT
SET enable_seqscan = off;
SELECT id, a, c FROM wbk WHERE a IN ('indexed', 'a17', 'a18') ORDER BY id;
RESET enable_seqscan;
-- A CHECK constraint, a function's statement.
ALTER TABLE wbk ADD CONSTRAINT wbk_b CHECK (b >= 0);
UPDATE wbk SET b = -1 WHERE id = 19;
\echo rows :ROW_COUNT
CREATE FUNCTION wbk_set(i int, v text) RETURNS void LANGUAGE sql AS $$ UPDATE wbk SET a = v WHERE id = i $$;
SELECT wbk_set(20, 'via function');
SELECT id, CASE WHEN id = 1 THEN length(a)::text ELSE a END AS a, b, c FROM wbk ORDER BY id;
DROP TABLE wbk, wbk2, wbk_log;
DROP FUNCTION wbk_trg(), wbk_set(int, text);
