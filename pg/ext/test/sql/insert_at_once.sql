-- Which INSERT ... ON CONFLICT DO NOTHING statements write their row at once,
-- without looking the key up first (DEBUG1), and what they leave. Only an
-- autocommit statement inserting one row (VALUES, no RETURNING) into a table
-- whose only index is its primary key, without AFTER INSERT triggers (iao_fk's
-- foreign key check; iao's triggers, for the keys it is referenced by, run on
-- UPDATE and DELETE only). onconflict checks
-- the answers against PostgreSQL's.
CREATE TABLE iao (id int PRIMARY KEY, v text NOT NULL, n int DEFAULT 7 CHECK (n > 0));
CREATE TABLE iao_ix (id int PRIMARY KEY, v text);
CREATE INDEX ON iao_ix (v);
CREATE TABLE iao_fk (id int PRIMARY KEY, p int REFERENCES iao);
-- A statement whose transaction wrote WAL is not written at once; pruning a
-- catalog page (dead rows of earlier tests' DDL) writes WAL: clean them first.
VACUUM pg_catalog.pg_class, pg_catalog.pg_attribute, pg_catalog.pg_index, pg_catalog.pg_constraint, pg_catalog.pg_trigger, pg_catalog.pg_type, pg_catalog.pg_depend, pg_catalog.pg_attrdef;
SET client_min_messages = debug1;
INSERT INTO iao VALUES (1, 'a') ON CONFLICT DO NOTHING;
INSERT INTO iao VALUES (1, 'b') ON CONFLICT DO NOTHING;
INSERT INTO iao VALUES (2, 'c') ON CONFLICT (id) DO NOTHING;
INSERT INTO iao (v, id) VALUES ('d' || 3, (SELECT max(id) + 1 FROM iao)) ON CONFLICT DO NOTHING;
-- Errors before the write: nothing written.
INSERT INTO iao VALUES (4, NULL) ON CONFLICT DO NOTHING;
INSERT INTO iao VALUES (4, 'e', -1) ON CONFLICT DO NOTHING;
-- Not at once: several rows, RETURNING, DO UPDATE, a transaction block, the
-- setting off, SERIALIZABLE, a function's statement.
INSERT INTO iao VALUES (5, 'f'), (1, 'g') ON CONFLICT DO NOTHING;
INSERT INTO iao VALUES (6, 'h') ON CONFLICT DO NOTHING RETURNING id;
INSERT INTO iao VALUES (1, 'i') ON CONFLICT (id) DO UPDATE SET v = 'i';
BEGIN;
INSERT INTO iao VALUES (7, 'j') ON CONFLICT DO NOTHING;
INSERT INTO iao VALUES (7, 'k') ON CONFLICT DO NOTHING;
COMMIT;
SET pinax.enable_insert_at_once = off;
INSERT INTO iao VALUES (8, 'l') ON CONFLICT DO NOTHING;
RESET pinax.enable_insert_at_once;
SET default_transaction_isolation = serializable;
INSERT INTO iao VALUES (9, 'm') ON CONFLICT DO NOTHING;
RESET default_transaction_isolation;
CREATE FUNCTION iao_put(i int) RETURNS void LANGUAGE sql AS $$ INSERT INTO iao VALUES (i, 'fn') ON CONFLICT DO NOTHING $$;
SELECT iao_put(10);
-- Tables with a secondary index or an AFTER INSERT trigger: not at once.
INSERT INTO iao_ix VALUES (1, 'a') ON CONFLICT DO NOTHING;
INSERT INTO iao_fk VALUES (1, 1) ON CONFLICT DO NOTHING;
-- The table is not looked at before the write: a row count tells what happened.
INSERT INTO iao VALUES (11, 'n') ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
INSERT INTO iao VALUES (11, 'o') ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
RESET client_min_messages;
SELECT * FROM iao ORDER BY id;
SELECT * FROM iao_ix;
SELECT * FROM iao_fk;
-- The upsert setting every column but the key from EXCLUDED, under READ
-- COMMITTED: one blind put of the row, whether the key exists or not.
CREATE TABLE iau (id int PRIMARY KEY, v text NOT NULL, n int DEFAULT 7 CHECK (n > 0));
CREATE TABLE iau_num (id numeric PRIMARY KEY, v text);
CREATE TABLE iau_trg (id int PRIMARY KEY, v text);
CREATE FUNCTION iau_noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER iau_upd BEFORE UPDATE ON iau_trg FOR EACH STATEMENT EXECUTE FUNCTION iau_noop();
CREATE TABLE iau_gen (id int PRIMARY KEY, v int, w int GENERATED ALWAYS AS (v * 2) STORED);
CREATE TABLE iau_rls (id int PRIMARY KEY, v text);
ALTER TABLE iau_rls ENABLE ROW LEVEL SECURITY;
CREATE TABLE iau_txt (id text COLLATE "C" PRIMARY KEY, v text);
VACUUM pg_catalog.pg_class, pg_catalog.pg_attribute, pg_catalog.pg_index, pg_catalog.pg_constraint, pg_catalog.pg_trigger, pg_catalog.pg_type, pg_catalog.pg_depend, pg_catalog.pg_attrdef;
SET client_min_messages = debug1;
INSERT INTO iau VALUES (1, 'a', 1) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, n = EXCLUDED.n;
INSERT INTO iau VALUES (1, 'b', 2) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, n = EXCLUDED.n;
\echo :ROW_COUNT
INSERT INTO iau (id, v) VALUES (2, 'c') ON CONFLICT (id) DO UPDATE SET id = EXCLUDED.id, n = EXCLUDED.n, v = EXCLUDED.v;
INSERT INTO iau_txt VALUES ('k', 'a') ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v;
INSERT INTO iau_txt VALUES ('k', 'b') ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v;
-- Errors before the write.
INSERT INTO iau VALUES (1, NULL, 1) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, n = EXCLUDED.n;
INSERT INTO iau VALUES (1, 'x', -1) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, n = EXCLUDED.n;
-- Not at once: a column kept or computed, a WHERE, REPEATABLE READ, a key whose
-- equal values can differ, an UPDATE trigger, a generated column, row-level
-- security.
INSERT INTO iau VALUES (1, 'd', 3) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v;
INSERT INTO iau VALUES (1, 'e', 4) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v || '!', n = EXCLUDED.n;
INSERT INTO iau VALUES (1, 'f', 5) ON CONFLICT (id) DO UPDATE SET v = iau.v, n = EXCLUDED.n;
INSERT INTO iau VALUES (1, 'g', 6) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, n = EXCLUDED.n WHERE iau.n < 100;
SET default_transaction_isolation = 'repeatable read';
INSERT INTO iau VALUES (1, 'h', 7) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, n = EXCLUDED.n;
RESET default_transaction_isolation;
INSERT INTO iau_num VALUES (1.0, 'a') ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v;
INSERT INTO iau_trg VALUES (1, 'a') ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v;
INSERT INTO iau_gen VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v;
INSERT INTO iau_rls VALUES (1, 'a') ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v;
RESET client_min_messages;
SELECT * FROM iau ORDER BY id;
SELECT * FROM iau_txt;
DROP TABLE iau, iau_num, iau_trg, iau_gen, iau_rls, iau_txt;
DROP FUNCTION iau_noop;
DROP TABLE iao_fk, iao_ix, iao;
DROP FUNCTION iao_put;
