-- Tablespaces of tables and indexes: created in one, moved there and back (one
-- relation, ALL IN TABLESPACE), in transactions and savepoints that roll back,
-- created, moved and dropped in one transaction, PostgreSQL's checks, and the
-- tablespace dropped once empty. On Pinax a move is a catalog change (the rows
-- stay in their tablets); heap copies the files. Both print the same.
SET allow_in_place_tablespaces = on;
SELECT 'regress_ts_' || current_database() AS ts \gset
CREATE TABLESPACE :"ts" LOCATION '';
CREATE TABLE tsp (id int PRIMARY KEY, v text, w int);
CREATE INDEX tsp_v ON tsp (v);
INSERT INTO tsp SELECT g, 'v' || g, g FROM generate_series(1, 200) g;
CREATE VIEW tsp_where AS
  SELECT c.relname, coalesce(t.spcname = current_setting('regress.ts'), false) AS in_ts
  FROM pg_class c LEFT JOIN pg_tablespace t ON t.oid = c.reltablespace
  WHERE c.relname IN ('tsp', 'tsp_pkey', 'tsp_v', 'tsp3', 'tsp3_pkey', 'tsp3_v') ORDER BY 1;
SELECT set_config('regress.ts', :'ts', false) IS NOT NULL AS set;
ALTER TABLE tsp SET TABLESPACE :"ts";
ALTER INDEX tsp_v SET TABLESPACE :"ts";
SELECT * FROM tsp_where;
SELECT count(*), sum(w) FROM tsp;
SET enable_seqscan = off;
SELECT id FROM tsp WHERE v = 'v7';
SELECT v FROM tsp WHERE id = 9;
RESET enable_seqscan;
INSERT INTO tsp VALUES (201, 'new', 201);
UPDATE tsp SET v = 'upd' WHERE id = 1;
DELETE FROM tsp WHERE id = 2;
-- A move rolled back, and one in a savepoint rolled back: nothing moved, nothing lost.
BEGIN;
ALTER TABLE tsp SET TABLESPACE pg_default;
SELECT count(*) FROM tsp;
ROLLBACK;
BEGIN;
SAVEPOINT a;
ALTER INDEX tsp_v SET TABLESPACE pg_default;
ROLLBACK TO a;
INSERT INTO tsp VALUES (202, 'in-txn', 202);
SAVEPOINT b;
ALTER INDEX tsp_v SET TABLESPACE pg_default;
RELEASE b;
COMMIT;
-- Back where it was (Pinax: a checkpoint removes the tombstone of its old file).
ALTER INDEX tsp_v SET TABLESPACE :"ts";
SELECT * FROM tsp_where;
SET enable_seqscan = off;
SELECT id FROM tsp WHERE v IN ('v7', 'upd', 'in-txn', 'new', 'v2') ORDER BY id;
RESET enable_seqscan;
SELECT count(*), sum(w) FROM tsp;
-- Created in the tablespace; then everything back with ALL IN TABLESPACE.
CREATE TABLE tsp3 (id int PRIMARY KEY, v text) TABLESPACE :"ts";
CREATE INDEX tsp3_v ON tsp3 (v) TABLESPACE :"ts";
INSERT INTO tsp3 SELECT g, 'x' || g FROM generate_series(1, 50) g;
SELECT * FROM tsp_where;
ALTER TABLE ALL IN TABLESPACE :"ts" SET TABLESPACE pg_default;
SELECT * FROM tsp_where;
ALTER INDEX ALL IN TABLESPACE :"ts" SET TABLESPACE pg_default NOWAIT;
SELECT * FROM tsp_where;
SET enable_seqscan = off;
SELECT id FROM tsp3 WHERE v = 'x42';
SELECT id FROM tsp WHERE v = 'v8';
RESET enable_seqscan;
SELECT count(*) FROM tsp3;
-- Created, moved and dropped in one transaction.
BEGIN;
CREATE TABLE tsp2 (id int PRIMARY KEY, v text);
INSERT INTO tsp2 VALUES (1, 'a'), (2, 'b');
ALTER TABLE tsp2 SET TABLESPACE :"ts";
SELECT count(*) FROM tsp2;
DROP TABLE tsp2;
COMMIT;
-- PostgreSQL's checks.
\set VERBOSITY terse
ALTER TABLE tsp SET TABLESPACE pg_global;
ALTER TABLE tsp SET TABLESPACE no_such_tablespace;
CREATE ROLE regress_tsp_user;
SET ROLE regress_tsp_user;
ALTER TABLE tsp SET TABLESPACE :"ts";
ALTER INDEX tsp_v SET TABLESPACE :"ts";
RESET ROLE;
ALTER TABLE tsp OWNER TO regress_tsp_user;
SET ROLE regress_tsp_user;
DO $$ BEGIN
  EXECUTE format('ALTER TABLE tsp SET TABLESPACE %I', current_setting('regress.ts'));
EXCEPTION WHEN insufficient_privilege THEN RAISE NOTICE 'no CREATE on the tablespace: %', SQLSTATE;
END $$;
RESET ROLE;
\set VERBOSITY default
ALTER TABLE tsp OWNER TO CURRENT_USER;
DROP ROLE regress_tsp_user;
SELECT * FROM tsp_where;
-- Two commands in one statement; IF EXISTS of a missing table.
ALTER TABLE tsp SET TABLESPACE :"ts", ADD COLUMN z int DEFAULT 5;
SELECT * FROM tsp_where;
SELECT count(*), sum(z) FROM tsp;
ALTER TABLE IF EXISTS tsp_missing SET TABLESPACE :"ts";
ALTER TABLE tsp SET TABLESPACE pg_default;
-- Empty again: the tablespace can be dropped.
DROP VIEW tsp_where;
DROP TABLE tsp, tsp3;
DROP TABLESPACE :"ts";
