-- GIN and hash indexes: heap answers through its own (bitmap scans), Pinax
-- through the entries it stores (index scans, rows rechecked); both must agree,
-- for every operator class below, after writes, in transactions, and across
-- rebuilds.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS btree_gin;
CREATE EXTENSION IF NOT EXISTS hstore;
CREATE EXTENSION IF NOT EXISTS intarray;
CREATE TABLE gd (id int PRIMARY KEY, body text, tags text[], nums bigint[], meta jsonb, h hstore, note text, ia int[]);
INSERT INTO gd SELECT g,
  'the quick brown fox ' || g || CASE WHEN g % 3 = 0 THEN ' jumps' ELSE ' sleeps' END,
  CASE WHEN g % 11 = 0 THEN NULL WHEN g % 13 = 0 THEN '{}' ELSE ARRAY['t' || (g % 5), 'u' || (g % 7)] END,
  CASE WHEN g % 17 = 0 THEN ARRAY[NULL, g % 10]::bigint[] ELSE ARRAY[g % 10, g % 3]::bigint[] END,
  jsonb_build_object('k', g % 4, 'even', g % 2 = 0, 'tags', jsonb_build_array('a' || (g % 3))),
  hstore('k' || (g % 5), (g % 2)::text),
  CASE WHEN g % 2 = 0 THEN 'Note ' || g END,
  ARRAY[g % 7, g % 9]
  FROM generate_series(1, 600) g;
CREATE INDEX gd_fts ON gd USING gin (to_tsvector('simple', body));
CREATE INDEX gd_tags ON gd USING gin (tags);
CREATE INDEX gd_nums ON gd USING gin (nums);
CREATE INDEX gd_meta ON gd USING gin (meta);
CREATE INDEX gd_meta_path ON gd USING gin (meta jsonb_path_ops);
CREATE INDEX gd_trgm ON gd USING gin (body gin_trgm_ops);
CREATE INDEX gd_h ON gd USING gin (h);
CREATE INDEX gd_multi ON gd USING gin (id, note);
CREATE INDEX gd_ia ON gd USING gin (ia gin__int_ops);
CREATE INDEX gd_note_hash ON gd USING hash (note);
CREATE INDEX gd_even_tags ON gd USING gin (tags) WHERE id % 2 = 0;
SET enable_seqscan = off;
-- The questions, asked again after every change below.
CREATE FUNCTION gd_answers() RETURNS TABLE (q text, n bigint, ids text) LANGUAGE sql AS $$
  SELECT 'fts and', count(*), string_agg(id::text, ',' ORDER BY id) FILTER (WHERE id < 40) FROM gd WHERE to_tsvector('simple', body) @@ to_tsquery('simple', 'jumps & fox')
  UNION ALL SELECT 'fts prefix', count(*), string_agg(id::text, ',' ORDER BY id) FILTER (WHERE id < 40) FROM gd WHERE to_tsvector('simple', body) @@ to_tsquery('simple', 'jump:*')
  UNION ALL SELECT 'fts not', count(*), string_agg(id::text, ',' ORDER BY id) FILTER (WHERE id < 40) FROM gd WHERE to_tsvector('simple', body) @@ to_tsquery('simple', '!jumps')
  UNION ALL SELECT 'fts phrase', count(*), string_agg(id::text, ',' ORDER BY id) FROM gd WHERE to_tsvector('simple', body) @@ to_tsquery('simple', 'fox <-> 12')
  UNION ALL SELECT 'fts or', count(*), NULL FROM gd WHERE to_tsvector('simple', body) @@ to_tsquery('simple', '120 | 121 | jumps')
  UNION ALL SELECT 'tags contain', count(*), string_agg(id::text, ',' ORDER BY id) FILTER (WHERE id < 100) FROM gd WHERE tags @> ARRAY['t3', 'u2']
  UNION ALL SELECT 'tags overlap', count(*), NULL FROM gd WHERE tags && ARRAY['t1', 'zz']
  UNION ALL SELECT 'tags contained', count(*), string_agg(id::text, ',' ORDER BY id) FILTER (WHERE id < 100) FROM gd WHERE tags <@ ARRAY['t1', 'u1', 't2', 'u2']
  UNION ALL SELECT 'tags empty', count(*), string_agg(id::text, ',' ORDER BY id) FILTER (WHERE id < 100) FROM gd WHERE tags = '{}'
  UNION ALL SELECT 'tags contain empty', count(*), NULL FROM gd WHERE tags @> '{}'
  UNION ALL SELECT 'nums contain', count(*), NULL FROM gd WHERE nums @> ARRAY[3]::bigint[]
  UNION ALL SELECT 'nums overlap', count(*), NULL FROM gd WHERE nums && ARRAY[1, 2]::bigint[]
  UNION ALL SELECT 'jsonb contain', count(*), NULL FROM gd WHERE meta @> '{"k": 1}'
  UNION ALL SELECT 'jsonb key', count(*), NULL FROM gd WHERE meta ? 'even'
  UNION ALL SELECT 'jsonb any key', count(*), NULL FROM gd WHERE meta ?| ARRAY['x', 'k']
  UNION ALL SELECT 'jsonb all keys', count(*), NULL FROM gd WHERE meta ?& ARRAY['k', 'nope']
  UNION ALL SELECT 'jsonb path match', count(*), NULL FROM gd WHERE meta @@ '$.k == 2'
  UNION ALL SELECT 'jsonb path exists', count(*), NULL FROM gd WHERE meta @? '$.tags[*] ? (@ == "a1")'
  UNION ALL SELECT 'jsonb nested', count(*), NULL FROM gd WHERE meta @> '{"tags": ["a2"], "even": true}'
  UNION ALL SELECT 'trgm like', count(*), string_agg(id::text, ',' ORDER BY id) FROM gd WHERE body LIKE '%fox 12%'
  UNION ALL SELECT 'trgm ilike', count(*), NULL FROM gd WHERE body ILIKE '%JUMPS%'
  UNION ALL SELECT 'trgm regex', count(*), string_agg(id::text, ',' ORDER BY id) FROM gd WHERE body ~ 'fox 1[0-2]7 '
  UNION ALL SELECT 'trgm short', count(*), NULL FROM gd WHERE body LIKE '%x%'
  UNION ALL SELECT 'trgm similar', count(*), NULL FROM gd WHERE body % 'the quick brown fox 77 sleeps'
  UNION ALL SELECT 'hstore key', count(*), NULL FROM gd WHERE h ? 'k1'
  UNION ALL SELECT 'hstore contain', count(*), NULL FROM gd WHERE h @> 'k2=>1'
  UNION ALL SELECT 'btree_gin eq', count(*), string_agg(id::text, ',' ORDER BY id) FROM gd WHERE id = 42 AND note = 'Note 42'
  UNION ALL SELECT 'btree_gin range', count(*), string_agg(id::text, ',' ORDER BY id) FROM gd WHERE id BETWEEN 100 AND 110
  UNION ALL SELECT 'btree_gin text range', count(*), NULL FROM gd WHERE note > 'Note 59'
  UNION ALL SELECT 'intarray', count(*), NULL FROM gd WHERE ia @@ '1 & (2 | 3)'
  UNION ALL SELECT 'hash eq', count(*), string_agg(id::text, ',' ORDER BY id) FROM gd WHERE note = 'Note 42'
  UNION ALL SELECT 'hash none', count(*), NULL FROM gd WHERE note = 'Note 43'
  UNION ALL SELECT 'partial', count(*), NULL FROM gd WHERE tags @> ARRAY['t2'] AND id % 2 = 0
$$;
SELECT * FROM gd_answers() ORDER BY q;
-- Writes: new rows, changed and unchanged indexed values, a changed key, deletes.
INSERT INTO gd VALUES (601, 'a jumps fox 12', ARRAY['t3', 'u2'], ARRAY[3]::bigint[], '{"k": 1, "even": true}', 'k1=>1', 'Note 42', '{1,2}'),
  (602, NULL, NULL, NULL, NULL, NULL, NULL, NULL), (603, '', '{}', '{}', '{}', '', '', '{}');
UPDATE gd SET tags = ARRAY['t3', 'u2'] WHERE id = 2;
UPDATE gd SET note = note || '!' WHERE id BETWEEN 40 AND 50;
UPDATE gd SET body = body || ' jumps', tags = tags || ARRAY['t2'] WHERE id % 10 = 1;
UPDATE gd SET id = id + 1000 WHERE id IN (12, 13, 105);
DELETE FROM gd WHERE id % 7 = 3;
UPDATE gd SET id = id + 1 WHERE id = 2; -- back and forth through a deleted key
SELECT * FROM gd_answers() ORDER BY q;
-- A transaction sees its own writes through the indexes; a rollback leaves none.
BEGIN;
INSERT INTO gd VALUES (700, 'only in here jumps', ARRAY['t9'], NULL, '{"k": 9}', NULL, 'Note 700', NULL);
SELECT id FROM gd WHERE tags @> ARRAY['t9'];
SELECT id FROM gd WHERE meta @> '{"k": 9}';
SELECT id FROM gd WHERE note = 'Note 700';
SAVEPOINT s;
DELETE FROM gd WHERE id = 700;
SELECT id FROM gd WHERE tags @> ARRAY['t9'];
ROLLBACK TO s;
SELECT id FROM gd WHERE to_tsvector('simple', body) @@ to_tsquery('simple', 'only & here');
ROLLBACK;
SELECT count(*) FROM gd WHERE tags @> ARRAY['t9'] OR note = 'Note 700';
-- Rebuilds: REINDEX, an index built later (also CONCURRENTLY), a primary key added.
REINDEX TABLE gd;
DROP INDEX gd_fts;
CREATE INDEX CONCURRENTLY gd_fts ON gd USING gin (to_tsvector('simple', body));
SELECT * FROM gd_answers() ORDER BY q;
CREATE TABLE nopk (a int, words text[]);
CREATE INDEX nopk_words ON nopk USING gin (words);
CREATE INDEX nopk_a ON nopk USING hash (a);
INSERT INTO nopk SELECT g, ARRAY['w' || (g % 4)] FROM generate_series(1, 40) g;
ALTER TABLE nopk ADD PRIMARY KEY (a);
SELECT count(*) FROM nopk WHERE words @> ARRAY['w1'];
SELECT a FROM nopk WHERE a = 17;
UPDATE nopk SET words = ARRAY['w9'] WHERE a < 5;
SELECT a FROM nopk WHERE words @> ARRAY['w9'] ORDER BY a;
TRUNCATE nopk;
SELECT count(*) FROM nopk WHERE words @> ARRAY['w1'];
DROP TABLE nopk;
-- A hash index backs an exclusion constraint (as btree does).
CREATE TABLE hx (id int PRIMARY KEY, k text, EXCLUDE USING hash (k WITH =));
INSERT INTO hx VALUES (1, 'a'), (2, 'b'), (3, NULL), (4, NULL);
INSERT INTO hx VALUES (5, 'a');
UPDATE hx SET k = 'b' WHERE id = 1;
UPDATE hx SET k = 'c' WHERE id = 1;
INSERT INTO hx VALUES (5, 'a');
SELECT * FROM hx ORDER BY id;
DROP TABLE hx;
-- Hash look-ups compare with the operator: any collation, any type with hash support.
CREATE COLLATION gd_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE hc (id int PRIMARY KEY, w text COLLATE gd_ci);
CREATE INDEX hc_w ON hc USING hash (w);
INSERT INTO hc VALUES (1, 'Hello'), (2, 'HELLO'), (3, 'world');
SELECT id FROM hc WHERE w = 'hello' ORDER BY id;
DROP TABLE hc;
DROP COLLATION gd_ci;
RESET enable_seqscan;
DROP FUNCTION gd_answers();
DROP TABLE gd;
DROP EXTENSION intarray;
DROP EXTENSION hstore;
DROP EXTENSION btree_gin;
DROP EXTENSION pg_trgm;
