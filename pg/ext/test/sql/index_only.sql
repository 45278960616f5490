-- Index-only scans return exactly the stored values, for every kind of key column,
-- and see what the transaction sees (own writes, deletes, key changes, rollback).
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE io (
  id int PRIMARY KEY, i2 int2, i8 int8, t text, vc varchar(10), ba bytea, d date,
  tm time, ts timestamp, tz timestamptz, u uuid, b bool, o oid, ch "char", m mood,
  mac macaddr, ip inet, iv interval, ar int[], n numeric, f float8, bc char(4));
INSERT INTO io SELECT g, (g * 7 % 50)::int2, g * 1000000007::int8, 'text ' || g,
  'v' || (g % 13), decode(lpad(to_hex(g), 4, '0'), 'hex'), date '2020-01-01' + g,
  time '00:00' + g * interval '1 minute', timestamp '2020-01-01' + g * interval '1 hour',
  timestamptz '2020-01-01 00:00+00' + g * interval '1 day', md5(g::text)::uuid,
  g % 2 = 0, (g * 3)::oid, chr(65 + g % 26)::"char", (ARRAY['sad','ok','happy'])[1 + g % 3]::mood,
  ('08:00:2b:01:02:' || lpad(to_hex(g % 256), 2, '0'))::macaddr, ('10.0.' || (g % 7) || '.' || g % 250)::inet,
  g * interval '1 second', ARRAY[g, -g], g / 4.0, g * -0.5, chr(97 + g % 5)
FROM generate_series(1, 300) g;
INSERT INTO io (id, t) VALUES (1000, NULL), (1001, '');
CREATE INDEX io_i2 ON io (i2);
CREATE INDEX io_multi ON io (vc DESC NULLS FIRST, i8, t);
CREATE INDEX io_misc ON io (ba, d, tm, ts, tz);
CREATE INDEX io_misc2 ON io (u, b, o, ch, m);
CREATE INDEX io_misc3 ON io (mac, ip, iv, ar);
CREATE INDEX io_lossy ON io (n, f, bc);
CREATE INDEX io_t ON io (t) INCLUDE (i2);
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT i2, count(*) FROM io WHERE i2 BETWEEN 3 AND 6 GROUP BY i2 ORDER BY i2;
SELECT vc, i8, t FROM io WHERE vc = 'v3' ORDER BY i8 LIMIT 4;
SELECT count(*), min(i8), max(t) FROM io WHERE vc IN ('v1', 'v2');
SELECT ba, d, tm, ts, tz FROM io WHERE ba = '\x0011'::bytea;
SELECT u, b, o, ch, m FROM io WHERE u = md5('42')::uuid;
SELECT mac, ip, iv, ar FROM io WHERE mac = '08:00:2b:01:02:2a';
SELECT n, f, bc FROM io WHERE n = 7.5;
SELECT t FROM io WHERE t IN ('text 7', '', 'text 300') ORDER BY t;
SELECT count(*) FROM io WHERE t IS NULL;
SELECT id FROM io WHERE id < 5 ORDER BY id;
SELECT count(*) FROM io;
-- Aggregates reading no column are counted in storage; others read what they need.
SELECT count(*), sum(i2), count(t) FROM io;
SELECT count(*) FROM io WHERE id > 100;
SELECT count(*) FROM io WHERE t > 'text 5';
BEGIN;
DELETE FROM io WHERE id <= 10;
INSERT INTO io (id) SELECT g FROM generate_series(5000, 5004) g;
SELECT count(*) FROM io;
SAVEPOINT s;
DELETE FROM io WHERE id >= 5000;
SELECT count(*) FROM io;
ROLLBACK TO SAVEPOINT s;
SELECT count(*) FROM io;
ROLLBACK;
SELECT count(*) FROM io;
-- Own writes of earlier statements, deletes and key changes, then rollback.
BEGIN;
INSERT INTO io (id, i2) VALUES (2000, 4), (2001, 4);
DELETE FROM io WHERE id = 2000;
UPDATE io SET i2 = 5 WHERE id IN (SELECT id FROM io WHERE i2 = 4 ORDER BY id LIMIT 2);
SELECT i2, count(*) FROM io WHERE i2 IN (4, 5) GROUP BY i2 ORDER BY i2;
ROLLBACK;
SELECT i2, count(*) FROM io WHERE i2 IN (4, 5) GROUP BY i2 ORDER BY i2;
-- As the inner side of a nested loop (rescans with runtime keys).
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT a.id, count(*) FROM io a JOIN io b ON b.i2 = a.i2 WHERE a.id IN (3, 4, 5) GROUP BY a.id ORDER BY a.id;
RESET enable_hashjoin;
RESET enable_mergejoin;
-- A cursor moving backwards over an ordered index-only scan.
BEGIN;
DECLARE c SCROLL CURSOR FOR SELECT id FROM io WHERE id BETWEEN 10 AND 14 ORDER BY id;
FETCH 2 FROM c;
FETCH BACKWARD 1 FROM c;
COMMIT;
-- PostgreSQL's own node (fetches each row by TID) gives the same answers.
SET pinax.index_only_fetch_rows = on;
SELECT vc, i8, t FROM io WHERE vc = 'v3' ORDER BY i8 LIMIT 4;
SELECT u, b, o, ch, m FROM io WHERE u = md5('42')::uuid;
SELECT id FROM io WHERE id < 5 ORDER BY id;
SELECT count(*) FROM io;
RESET pinax.index_only_fetch_rows;
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP TABLE io;
DROP TYPE mood;
-- count(*) over a sequential scan without a filter is counted in storage (no row
-- shipped); with a filter, a column read, or an expression to evaluate, rows are
-- read. Own writes, savepoints and rescans (a correlated subquery) included.
CREATE TABLE nokey (v int, w text);
INSERT INTO nokey SELECT g, 'w' || g FROM generate_series(1, 500) g;
SELECT count(*) FROM nokey;
SELECT count(*) FROM nokey WHERE v > 250;
SELECT count(*), count(w), sum(v) FROM nokey;
SELECT count(*) FROM (SELECT v, w FROM nokey) s;
SELECT count(*) FILTER (WHERE v < 10) FROM nokey;
SELECT g, (SELECT count(*) FROM nokey WHERE g > 1) FROM generate_series(1, 3) g;
SELECT g, (SELECT count(*) + g FROM nokey) FROM generate_series(1, 2) g;
BEGIN;
INSERT INTO nokey SELECT g, NULL FROM generate_series(1, 10) g;
SELECT count(*) FROM nokey;
SAVEPOINT s;
DELETE FROM nokey WHERE v <= 100;
SELECT count(*) FROM nokey;
ROLLBACK TO SAVEPOINT s;
SELECT count(*) FROM nokey;
ROLLBACK;
SELECT count(*) FROM nokey;
-- A dropped column: the scan projects (no physical target list).
ALTER TABLE nokey DROP COLUMN w;
SELECT count(*) FROM nokey;
TRUNCATE nokey;
SELECT count(*) FROM nokey;
DROP TABLE nokey;
