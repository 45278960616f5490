-- INSERT ... ON CONFLICT on the primary key and on a unique index.
CREATE TABLE oc (id int PRIMARY KEY, name text UNIQUE, hits int DEFAULT 0);
INSERT INTO oc VALUES (1, 'a'), (2, 'b');
INSERT INTO oc VALUES (1, 'z') ON CONFLICT DO NOTHING;
INSERT INTO oc VALUES (3, 'a') ON CONFLICT DO NOTHING;
INSERT INTO oc VALUES (1, 'a') ON CONFLICT (id) DO UPDATE SET hits = oc.hits + 1;
INSERT INTO oc VALUES (1, 'a') ON CONFLICT (id) DO UPDATE SET hits = oc.hits + 1 RETURNING *;
INSERT INTO oc VALUES (9, 'b') ON CONFLICT (name) DO UPDATE SET hits = excluded.id;
INSERT INTO oc VALUES (4, 'd'), (5, 'e'), (4, 'dd') ON CONFLICT (id) DO NOTHING;
INSERT INTO oc VALUES (6, 'f'), (6, 'ff') ON CONFLICT (id) DO UPDATE SET name = excluded.name;
INSERT INTO oc VALUES (7, 'g') ON CONFLICT (id) DO UPDATE SET name = 'never' WHERE oc.hits > 100;
INSERT INTO oc VALUES (1, 'x') ON CONFLICT (id) DO UPDATE SET name = 'cond' WHERE oc.hits > 1;
SELECT * FROM oc ORDER BY id;
DROP TABLE oc;
-- One row at a time into a table whose only index is the primary key (on Pinax
-- written at once, see insert_at_once): the row counts and rows PostgreSQL gives.
CREATE TABLE oc1 (id int PRIMARY KEY, v text NOT NULL, n int DEFAULT 7 CHECK (n > 0));
INSERT INTO oc1 VALUES (1, 'a') ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
INSERT INTO oc1 VALUES (1, 'b') ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
INSERT INTO oc1 VALUES (2, 'c') ON CONFLICT (id) DO NOTHING;
\echo :ROW_COUNT
INSERT INTO oc1 (v, id) VALUES ('d', (SELECT max(id) + 1 FROM oc1)) ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
INSERT INTO oc1 VALUES (4, NULL) ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
INSERT INTO oc1 VALUES (4, 'e', -1) ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
INSERT INTO oc1 VALUES (4, 'e', 1) ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
DELETE FROM oc1 WHERE id = 4;
\echo :ROW_COUNT
INSERT INTO oc1 VALUES (4, 'f', 2) ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
-- REPEATABLE READ: rows the snapshot sees, and the transaction's own.
BEGIN ISOLATION LEVEL REPEATABLE READ;
INSERT INTO oc1 VALUES (1, 'x') ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
INSERT INTO oc1 VALUES (9, 'x') ON CONFLICT DO NOTHING;
INSERT INTO oc1 VALUES (9, 'y') ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
INSERT INTO oc1 VALUES (9, 'z') ON CONFLICT (id) DO UPDATE SET v = 'upd';
COMMIT;
SELECT * FROM oc1 ORDER BY id;
-- The upsert that sets every other column from EXCLUDED (on Pinax one blind
-- write, see insert_at_once): absent, present, defaults, errors before the write.
INSERT INTO oc1 VALUES (20, 'u1', 1) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, n = EXCLUDED.n;
\echo :ROW_COUNT
INSERT INTO oc1 VALUES (20, 'u2', 2) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, n = EXCLUDED.n;
\echo :ROW_COUNT
INSERT INTO oc1 VALUES (1, 'u3', 3) ON CONFLICT (id) DO UPDATE SET n = excluded.n, id = excluded.id, v = excluded.v;
\echo :ROW_COUNT
INSERT INTO oc1 (id, v) VALUES (2, 'u4') ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, n = EXCLUDED.n;
\echo :ROW_COUNT
INSERT INTO oc1 VALUES (21, NULL, 1) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, n = EXCLUDED.n;
INSERT INTO oc1 VALUES (20, 'u5', 0) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, n = EXCLUDED.n;
INSERT INTO oc1 VALUES (20, 'u6', 6) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v || '!', n = EXCLUDED.n;
\echo :ROW_COUNT
INSERT INTO oc1 VALUES (20, 'u7', 7) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v;
\echo :ROW_COUNT
INSERT INTO oc1 VALUES (20, 'u8', 8) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, n = EXCLUDED.n WHERE oc1.n > 100;
\echo :ROW_COUNT
DELETE FROM oc1 WHERE id = 20;
INSERT INTO oc1 VALUES (20, 'u9', 9) ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, n = EXCLUDED.n;
\echo :ROW_COUNT
SELECT * FROM oc1 ORDER BY id;
DROP TABLE oc1;
-- A key whose equal values can differ (numeric 1.0 = 1.00): the stored key stays.
CREATE TABLE ocn (id numeric PRIMARY KEY, v text);
INSERT INTO ocn VALUES (1.0, 'a');
INSERT INTO ocn VALUES (1.00, 'b') ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v;
SELECT * FROM ocn;
DROP TABLE ocn;
-- Arbiters whose conflicts PostgreSQL's look-up and Pinax's storage must judge
-- alike: when they did not, the speculative insertion retried forever (a
-- NULLS NOT DISTINCT key holding a NULL spun until statement_timeout).
SET statement_timeout = '60s';
CREATE TABLE ocnn (i int UNIQUE NULLS NOT DISTINCT, t text);
INSERT INTO ocnn VALUES (NULL, 'a');
INSERT INTO ocnn (t) VALUES ('x') ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
INSERT INTO ocnn (t) VALUES ('y') ON CONFLICT (i) DO NOTHING;
\echo :ROW_COUNT
INSERT INTO ocnn (t) VALUES ('z') ON CONFLICT (i) DO UPDATE SET t = ocnn.t || EXCLUDED.t;
\echo :ROW_COUNT
INSERT INTO ocnn VALUES (1, 'b'), (NULL, 'c'), (1, 'd') ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
INSERT INTO ocnn VALUES (NULL, 'e');
BEGIN;
DELETE FROM ocnn WHERE i IS NULL;
INSERT INTO ocnn VALUES (NULL, 'f') ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
INSERT INTO ocnn VALUES (NULL, 'g') ON CONFLICT (i) DO UPDATE SET t = EXCLUDED.t;
COMMIT;
SELECT * FROM ocnn ORDER BY i NULLS FIRST;
CREATE TABLE ocnn2 (a int, b int, t text, UNIQUE NULLS NOT DISTINCT (a, b));
INSERT INTO ocnn2 VALUES (1, NULL, 'a'), (NULL, NULL, 'b');
INSERT INTO ocnn2 VALUES (1, NULL, 'c'), (NULL, NULL, 'd'), (NULL, 1, 'e'), (1, 1, 'f') ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
INSERT INTO ocnn2 VALUES (NULL, NULL, 'g') ON CONFLICT (a, b) DO UPDATE SET t = EXCLUDED.t;
SELECT * FROM ocnn2 ORDER BY a NULLS FIRST, b NULLS FIRST;
-- The default (NULLS DISTINCT): NULLs never conflict.
CREATE TABLE ocnd (i int UNIQUE, t text);
INSERT INTO ocnd VALUES (NULL, 'a');
INSERT INTO ocnd VALUES (NULL, 'b') ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
INSERT INTO ocnd VALUES (NULL, 'c') ON CONFLICT (i) DO UPDATE SET t = 'never';
SELECT * FROM ocnd ORDER BY t;
-- An expression arbiter.
CREATE TABLE ocx (t text, n int);
CREATE UNIQUE INDEX ocx_lower ON ocx (lower(t));
INSERT INTO ocx VALUES ('Abc', 1);
INSERT INTO ocx VALUES ('aBC', 2) ON CONFLICT (lower(t)) DO UPDATE SET n = ocx.n + EXCLUDED.n;
INSERT INTO ocx VALUES ('ABC', 5) ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
INSERT INTO ocx VALUES ('xyz', 7) ON CONFLICT (lower(t)) DO NOTHING;
SELECT * FROM ocx ORDER BY t;
-- A partial arbiter: only rows its predicate holds for conflict.
CREATE TABLE ocp (i int, active bool, n int);
CREATE UNIQUE INDEX ocp_active ON ocp (i) WHERE active;
INSERT INTO ocp VALUES (1, true, 1), (1, false, 1);
INSERT INTO ocp VALUES (1, true, 2) ON CONFLICT (i) WHERE active DO UPDATE SET n = ocp.n + 10;
INSERT INTO ocp VALUES (1, false, 3) ON CONFLICT (i) WHERE active DO UPDATE SET n = ocp.n + 100;
INSERT INTO ocp VALUES (1, true, 4) ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
SELECT * FROM ocp ORDER BY active, n;
-- A deferrable constraint beside the arbiter is checked at commit; as the
-- arbiter it is refused.
CREATE TABLE ocd (id int PRIMARY KEY, u int UNIQUE DEFERRABLE INITIALLY DEFERRED);
INSERT INTO ocd VALUES (1, 1);
INSERT INTO ocd VALUES (1, 2) ON CONFLICT (id) DO NOTHING;
\echo :ROW_COUNT
INSERT INTO ocd VALUES (2, 1) ON CONFLICT (id) DO NOTHING;
INSERT INTO ocd VALUES (2, 1) ON CONFLICT (u) DO NOTHING;
BEGIN;
INSERT INTO ocd VALUES (3, 1) ON CONFLICT (id) DO NOTHING;
UPDATE ocd SET u = 5 WHERE id = 1;
COMMIT;
SELECT * FROM ocd ORDER BY id;
-- A unique index with INCLUDE columns as the arbiter.
CREATE TABLE oci (i int, j int, t text);
CREATE UNIQUE INDEX oci_i ON oci (i) INCLUDE (j);
INSERT INTO oci VALUES (1, 1, 'a');
INSERT INTO oci VALUES (1, 2, 'b') ON CONFLICT (i) DO UPDATE SET j = EXCLUDED.j, t = EXCLUDED.t;
INSERT INTO oci VALUES (1, 3, 'c') ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
SELECT * FROM oci;
-- An exclusion constraint (btree, WITH =) as the arbiter of DO NOTHING.
CREATE TABLE ocex (i int, t text, EXCLUDE USING btree (i WITH =));
INSERT INTO ocex VALUES (1, 'a');
INSERT INTO ocex VALUES (1, 'b') ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
INSERT INTO ocex VALUES (1, 'c');
INSERT INTO ocex VALUES (NULL, 'n'), (NULL, 'm'), (2, 'd'), (2, 'e') ON CONFLICT DO NOTHING;
\echo :ROW_COUNT
SELECT * FROM ocex ORDER BY i, t;
-- A statement that updates one row twice, the row there before it.
INSERT INTO ocnn VALUES (NULL, 'p'), (NULL, 'q') ON CONFLICT (i) DO UPDATE SET t = EXCLUDED.t;
INSERT INTO oci VALUES (1, 4, 'p'), (1, 5, 'q') ON CONFLICT (i) DO UPDATE SET t = EXCLUDED.t;
CREATE TABLE ocpk (id int PRIMARY KEY, t text);
INSERT INTO ocpk VALUES (1, 'a');
INSERT INTO ocpk VALUES (1, 'p'), (2, 'b'), (1, 'q') ON CONFLICT (id) DO UPDATE SET t = EXCLUDED.t;
WITH w AS (INSERT INTO ocpk VALUES (1, 'r'), (1, 's') ON CONFLICT (id) DO UPDATE SET t = EXCLUDED.t RETURNING t) SELECT count(*) FROM w;
INSERT INTO ocpk VALUES (1, 'u'), (2, 'v') ON CONFLICT (id) DO UPDATE SET t = EXCLUDED.t;
SELECT * FROM ocpk ORDER BY id;
RESET statement_timeout;
DROP TABLE ocnn, ocnn2, ocnd, ocx, ocp, ocd, oci, ocpk, ocex;
