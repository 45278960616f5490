-- Subtransactions: SAVEPOINT / ROLLBACK TO / RELEASE and PL/pgSQL exception blocks
-- undo exactly their own writes (rows and index entries).
CREATE TABLE sp (id int PRIMARY KEY, v text);
CREATE UNIQUE INDEX sp_v ON sp (v);
BEGIN;
INSERT INTO sp VALUES (1, 'a');
SAVEPOINT s1;
INSERT INTO sp VALUES (2, 'b');
UPDATE sp SET v = 'a2' WHERE id = 1;
SELECT * FROM sp ORDER BY id;
ROLLBACK TO SAVEPOINT s1;
SELECT * FROM sp ORDER BY id;
SELECT id FROM sp WHERE v = 'a';
SELECT id FROM sp WHERE v = 'a2';
INSERT INTO sp VALUES (2, 'b2');
SAVEPOINT s2;
INSERT INTO sp VALUES (3, 'c');
RELEASE SAVEPOINT s2;
SAVEPOINT s3;
INSERT INTO sp VALUES (4, 'a');
ROLLBACK TO SAVEPOINT s3;
INSERT INTO sp VALUES (4, 'd');
COMMIT;
SELECT * FROM sp ORDER BY id;
-- Nested savepoints; rolling back the outer one undoes both.
BEGIN;
SAVEPOINT a;
UPDATE sp SET v = v || '!' WHERE id = 1;
SAVEPOINT b;
UPDATE sp SET v = v || '?' WHERE id = 1;
ROLLBACK TO SAVEPOINT a;
SELECT v FROM sp WHERE id = 1;
UPDATE sp SET v = 'x' WHERE id = 1;
SAVEPOINT c;
DELETE FROM sp WHERE id = 1;
SELECT count(*) FROM sp WHERE id = 1;
ROLLBACK TO SAVEPOINT c;
SELECT v FROM sp WHERE id = 1;
COMMIT;
SELECT * FROM sp ORDER BY id;
-- A cursor opened before a savepoint keeps working after rolling back to it.
BEGIN;
DECLARE cur CURSOR FOR SELECT id FROM sp ORDER BY id;
FETCH 1 FROM cur;
SAVEPOINT d;
DELETE FROM sp WHERE id = 2;
ROLLBACK TO SAVEPOINT d;
FETCH 1 FROM cur;
COMMIT;
-- Rolling back to a savepoint after everything was rolled back to it before.
BEGIN;
SAVEPOINT e;
INSERT INTO sp VALUES (5, 'e');
ROLLBACK TO SAVEPOINT e;
INSERT INTO sp VALUES (5, 'e2');
ROLLBACK TO SAVEPOINT e;
SELECT count(*) FROM sp WHERE id = 5;
COMMIT;
-- PL/pgSQL exception blocks.
CREATE FUNCTION try_insert(i int, t text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO sp VALUES (i, t);
  RETURN 'ok';
EXCEPTION WHEN unique_violation THEN
  RETURN 'dup: ' || SQLERRM;
END $$;
SELECT try_insert(10, 'ten'), try_insert(11, 'ten'), try_insert(10, 'eleven');
SELECT * FROM sp WHERE id >= 10 ORDER BY id;
-- A block that writes and then fails: only its own writes are undone.
DO $$
BEGIN
  INSERT INTO sp VALUES (20, 'twenty');
  BEGIN
    INSERT INTO sp VALUES (21, 'twentyone');
    UPDATE sp SET v = 'changed' WHERE id = 20;
    PERFORM 1 / 0;
  EXCEPTION WHEN division_by_zero THEN
    RAISE NOTICE 'caught %', SQLERRM;
  END;
  INSERT INTO sp VALUES (22, 'twentytwo');
END $$;
SELECT * FROM sp WHERE id >= 20 ORDER BY id;
-- One exception block per row.
DO $$
DECLARE n int := 0;
BEGIN
  FOR i IN 1..30 LOOP
    BEGIN
      INSERT INTO sp VALUES (100 + i % 10, 'loop' || i);
      n := n + 1;
    EXCEPTION WHEN unique_violation THEN
      NULL;
    END;
  END LOOP;
  RAISE NOTICE 'inserted %', n;
END $$;
SELECT count(*), min(v), max(v) FROM sp WHERE id >= 100;
-- Tables created in a rolled-back savepoint are gone; earlier ones stay.
BEGIN;
CREATE TABLE sp_keep (id int PRIMARY KEY);
INSERT INTO sp_keep VALUES (1);
SAVEPOINT f;
CREATE TABLE sp_gone (id int PRIMARY KEY, v text);
CREATE INDEX sp_gone_v ON sp_gone (v);
INSERT INTO sp_gone VALUES (1, 'x');
ROLLBACK TO SAVEPOINT f;
INSERT INTO sp_keep VALUES (2);
COMMIT;
SELECT * FROM sp_keep ORDER BY id;
SELECT count(*) FROM pg_class WHERE relname IN ('sp_gone', 'sp_gone_v');
DROP TABLE sp, sp_keep;
DROP FUNCTION try_insert;
