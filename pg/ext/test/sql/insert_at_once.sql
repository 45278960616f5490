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
DROP TABLE iao_fk, iao_ix, iao;
DROP FUNCTION iao_put;
