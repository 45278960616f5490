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
