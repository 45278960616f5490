-- Which UPDATEs and DELETEs are written by key (Custom Scan (PinaxWriteByKey)):
-- plans, and at run time (DEBUG1) whether the row was written without reading it.
-- Their answers are checked against PostgreSQL's in write_by_key.
CREATE TABLE wbp (id int PRIMARY KEY, a text, b int);
INSERT INTO wbp SELECT g, 'a' || g, g FROM generate_series(1, 10) g;
EXPLAIN (COSTS OFF) UPDATE wbp SET a = 'x' WHERE id = 3;
EXPLAIN (COSTS OFF) DELETE FROM wbp WHERE id = 3;
-- The usual plans: a value read from the row, not the whole key, RETURNING.
EXPLAIN (COSTS OFF) UPDATE wbp SET b = b + 1 WHERE id = 3;
EXPLAIN (COSTS OFF) UPDATE wbp SET a = 'x' WHERE id = 3 AND b = 3;
EXPLAIN (COSTS OFF) UPDATE wbp SET a = 'x' WHERE id = 3 RETURNING a;
-- A volatile function of the user's could write elsewhere (committed later than
-- a write by key): the usual plan. Built-in volatile ones and the user's stable
-- ones are computed before the write.
CREATE FUNCTION wbp_volatile() RETURNS text LANGUAGE plpgsql VOLATILE AS $$ BEGIN RETURN 'v'; END $$;
CREATE FUNCTION wbp_stable() RETURNS text LANGUAGE plpgsql STABLE AS $$ BEGIN RETURN 's'; END $$;
EXPLAIN (COSTS OFF) UPDATE wbp SET a = wbp_volatile() WHERE id = 3;
EXPLAIN (COSTS OFF) UPDATE wbp SET a = wbp_stable() || random()::text WHERE id = 3;
SET client_min_messages = debug1;
UPDATE wbp SET a = 'x' WHERE id = 3;
UPDATE wbp SET a = 'x' WHERE id = 33;
DELETE FROM wbp WHERE id = 4;
-- More patches than a row carries: the tablet merges them into the whole row
-- (pinax.enable_tablet_folds) and no statement reads the row...
SELECT format('UPDATE wbp SET %s = %L WHERE id = 2', CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END, g) FROM generate_series(1, 10) g
\gexec
-- ...or, without the folds, every third reads the row and writes it whole.
SET pinax.enable_tablet_folds = off;
SELECT format('UPDATE wbp SET %s = %L WHERE id = 2', CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END, g) FROM generate_series(11, 20) g
\gexec
RESET pinax.enable_tablet_folds;
-- In a READ COMMITTED transaction block: by key, as provisional writes; a
-- second update of the row the transaction wrote reads it first.
BEGIN;
UPDATE wbp SET a = 'y' WHERE id = 5;
UPDATE wbp SET b = 55 WHERE id = 5;
DELETE FROM wbp WHERE id = 5;
UPDATE wbp SET a = 'y' WHERE id = 5;
COMMIT;
-- Not by key: a function's statement, REPEATABLE READ in a block, the settings
-- off, SERIALIZABLE.
CREATE FUNCTION wbp_set(i int) RETURNS void LANGUAGE sql AS $$ UPDATE wbp SET a = 'f' WHERE id = i $$;
BEGIN;
SELECT wbp_set(8);
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
UPDATE wbp SET a = 'y' WHERE id = 9;
COMMIT;
BEGIN;
SET LOCAL pinax.enable_single_row_writes_in_transactions = off;
UPDATE wbp SET a = 'y' WHERE id = 9;
COMMIT;
SET pinax.enable_single_row_writes = off;
UPDATE wbp SET a = 'z' WHERE id = 6;
RESET pinax.enable_single_row_writes;
SET default_transaction_isolation = serializable;
UPDATE wbp SET a = 's' WHERE id = 7;
RESET default_transaction_isolation;
RESET client_min_messages;
SELECT * FROM wbp ORDER BY id;
DROP TABLE wbp;
DROP FUNCTION wbp_volatile(), wbp_stable(), wbp_set(int);
-- DELETE with no WHERE: in the tablets (Operation: Delete All) when nothing needs
-- the rows, as the first write of a READ COMMITTED transaction (autocommit or in a
-- block); otherwise (REPEATABLE READ, the setting off, after a write) PostgreSQL's
-- plan runs.
CREATE TABLE wbd (id int PRIMARY KEY, v text);
CREATE TABLE wbd_idx (id int PRIMARY KEY, v text);
CREATE INDEX ON wbd_idx (v);
EXPLAIN (COSTS OFF) DELETE FROM wbd;
EXPLAIN (COSTS OFF) DELETE FROM wbd_idx;
EXPLAIN (COSTS OFF) DELETE FROM wbd RETURNING id;
EXPLAIN (COSTS OFF) DELETE FROM wbd WHERE v = 'a';
INSERT INTO wbd SELECT g, 'v' FROM generate_series(1, 100) g;
SET client_min_messages = debug1;
DELETE FROM wbd;
INSERT INTO wbd SELECT g, 'v' FROM generate_series(1, 10) g;
BEGIN;
DELETE FROM wbd;
ROLLBACK;
-- The rows are counted in the table's statistics as row-by-row deletions are (a
-- table of its own: the backend's pending counts still hold earlier statements').
CREATE TABLE wbd_stats (id int PRIMARY KEY);
INSERT INTO wbd_stats SELECT generate_series(1, 7);
BEGIN;
DELETE FROM wbd_stats;
SELECT n_tup_del FROM pg_stat_xact_user_tables WHERE relname = 'wbd_stats';
ROLLBACK;
DROP TABLE wbd_stats;
BEGIN;
INSERT INTO wbd VALUES (0, 'first');
DELETE FROM wbd;
ROLLBACK;
SET default_transaction_isolation = 'repeatable read';
DELETE FROM wbd;
RESET default_transaction_isolation;
SET pinax.enable_delete_all = off;
INSERT INTO wbd SELECT g, 'v' FROM generate_series(1, 10) g;
DELETE FROM wbd;
RESET pinax.enable_delete_all;
RESET client_min_messages;
SELECT count(*) FROM wbd;
DROP TABLE wbd, wbd_idx;
