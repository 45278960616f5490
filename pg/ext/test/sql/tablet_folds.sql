-- UPDATEs by key without reading the row (write_by_key), many over the same rows:
-- each stores only the columns it assigns, and the tablet merges a row's updates
-- into the whole row itself once it carries two (pinax.enable_tablet_folds),
-- forming it as heap_form_tuple would from the table's layout. Every layout
-- (lengths, alignments, short and long varlenas, NULLs in and out, dropped and
-- added columns) must read back as PostgreSQL stored it: heap tables' answers, with
-- the folds on and off.
CREATE TABLE folds (
  id int PRIMARY KEY,
  i2 int2, i4 int4, i8 int8, b bool, f8 float8, n numeric, t text, lt text,
  ch char(3), vc varchar(300), nm name, ts timestamptz, d date, iv interval,
  u uuid, arr int[], j jsonb, by bytea, c "char");
INSERT INTO folds
SELECT g, g, g * 10, g * 100, g % 2 = 0, g / 8.0, g * 1.5, 't' || g, repeat('L', 200) || g,
       'c' || g, 'v' || g, 'nm' || g, '2026-01-01 00:00:00+00'::timestamptz + g * interval '1 hour',
       '2026-01-01'::date + g, g * interval '1 minute', md5(g::text)::uuid, ARRAY[g, g + 1],
       jsonb_build_object('g', g), decode(md5(g::text), 'hex'), 'x'
FROM generate_series(1, 6) g;
-- 120 updates by key: every column in turn, over every row, with values of every
-- length class (a text of 252 bytes has a 4-byte header whose first byte is
-- zero), NULL and back.
CREATE TABLE fold_sets (k int PRIMARY KEY, col text, val text);
INSERT INTO fold_sets VALUES
  (0, 'i2', '-7'), (1, 't', NULL), (2, 'i8', '123456789012'), (3, 'lt', repeat('z', 252)),
  (4, 'b', 'true'), (5, 'vc', 'q'), (6, 'f8', '2.5'), (7, 'ch', NULL), (8, 'n', '99999.00001'),
  (9, 't', repeat('y', 3000)), (10, 'nm', 'renamed'), (11, 'ts', '2030-06-01 12:00:00+00'),
  (12, 'i4', NULL), (13, 'd', '2031-02-03'), (14, 'iv', '3 days 4 hours'), (15, 'lt', 's'),
  (16, 'u', '00000000-0000-0000-0000-000000000001'), (17, 'arr', '{9,8,7}'), (18, 'j', '{"k": [1, 2]}'),
  (19, 'by', '\x00ff00'), (20, 'c', 'q'), (21, 'vc', repeat('w', 252)), (22, 'i8', NULL),
  (23, 't', 'tiny'), (24, 'i4', '77'), (25, 'ch', 'abc'), (26, 'lt', NULL), (27, 'i2', NULL),
  (28, 'arr', NULL), (29, 'j', NULL), (30, 'f8', NULL), (31, 'n', NULL), (32, 'vc', NULL),
  (33, 'i2', '5'), (34, 'lt', repeat('m', 127)), (35, 'vc', repeat('e', 126)), (36, 'b', NULL),
  (37, 'u', NULL), (38, 'by', NULL), (39, 'nm', NULL);
SELECT format('UPDATE folds SET %I = %L WHERE id = %s', s.col, s.val, 1 + g % 6)
FROM generate_series(0, 119) g JOIN fold_sets s ON s.k = (g * 7) % 40 ORDER BY g
\gexec
SELECT id, i2, i4, i8, b, f8, n, t = repeat('y', 3000) AS t3000, left(t, 10) AS t, length(lt) AS llt, left(lt, 5) AS lt,
       ch, length(vc) AS lvc, left(vc, 5) AS vc, nm, ts AT TIME ZONE 'UTC' AS ts, d, iv, u, arr, j, by, c
FROM folds ORDER BY id;
-- The same with the folds off: the statements read a row carrying two updates
-- and write it whole.
SET pinax.enable_tablet_folds = off;
SELECT format('UPDATE folds SET %I = %L WHERE id = %s', s.col, s.val, 1 + g % 6)
FROM generate_series(0, 59) g JOIN fold_sets s ON s.k = (g * 11 + 3) % 40 ORDER BY g
\gexec
RESET pinax.enable_tablet_folds;
SELECT format('UPDATE folds SET %I = %L WHERE id = %s', s.col, s.val, 1 + g % 6)
FROM generate_series(0, 59) g JOIN fold_sets s ON s.k = (g * 13 + 5) % 40 ORDER BY g
\gexec
SELECT id, i2, i4, i8, b, f8, n, t = repeat('y', 3000) AS t3000, left(t, 10) AS t, length(lt) AS llt, left(lt, 5) AS lt,
       ch, length(vc) AS lvc, left(vc, 5) AS vc, nm, ts AT TIME ZONE 'UTC' AS ts, d, iv, u, arr, j, by, c
FROM folds ORDER BY id;
-- A dropped column (NULL in every row after it) and one added with a default
-- (rows written before hold fewer attributes: the default is in the catalog).
CREATE TABLE folds2 (id int PRIMARY KEY, a int, gone text, b text);
INSERT INTO folds2 SELECT g, g, 'gone' || g, 'b' || g FROM generate_series(1, 3) g;
ALTER TABLE folds2 DROP COLUMN gone;
UPDATE folds2 SET a = 10 WHERE id = 1;
UPDATE folds2 SET b = 'x' WHERE id = 1;
UPDATE folds2 SET a = 11 WHERE id = 1;
UPDATE folds2 SET b = 'y' WHERE id = 1;
ALTER TABLE folds2 ADD COLUMN e int DEFAULT 7;
UPDATE folds2 SET a = 20 WHERE id = 2;
UPDATE folds2 SET b = 'z' WHERE id = 2;
UPDATE folds2 SET a = 21 WHERE id = 2;
UPDATE folds2 SET e = 8 WHERE id = 2;
UPDATE folds2 SET a = 22 WHERE id = 2;
UPDATE folds2 SET b = 'w' WHERE id = 3;
UPDATE folds2 SET b = 'v' WHERE id = 3;
UPDATE folds2 SET b = 'u' WHERE id = 3;
UPDATE folds2 SET b = 't' WHERE id = 3;
SELECT * FROM folds2 ORDER BY id;
-- In READ COMMITTED transaction blocks: each update a provisional record of its
-- transaction; over a row carrying two, the whole row (applied as such at the commit).
BEGIN;
UPDATE folds2 SET a = 30 WHERE id = 3;
COMMIT;
BEGIN;
UPDATE folds2 SET b = 's' WHERE id = 3;
UPDATE folds2 SET a = 31 WHERE id = 1;
COMMIT;
BEGIN;
UPDATE folds2 SET e = 9 WHERE id = 3;
SELECT * FROM folds2 WHERE id = 3;
COMMIT;
BEGIN;
UPDATE folds2 SET a = 32 WHERE id = 3;
ROLLBACK;
SELECT * FROM folds2 ORDER BY id;
DROP TABLE folds, fold_sets, folds2;
