-- Indexes of other access methods than btree (GIN, GiST, SP-GiST, hash, BRIN): heap
-- uses them; on Pinax tables they are kept in the catalog, not stored or used (a
-- NOTICE, hidden here, says so), and every query answers the same.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE TABLE docs (id int PRIMARY KEY, body text, tags text[], meta jsonb, during int4range, pos point);
INSERT INTO docs SELECT g, 'the quick brown fox ' || g || CASE WHEN g % 3 = 0 THEN ' jumps' ELSE ' sleeps' END,
  ARRAY['t' || (g % 5), 'u' || (g % 7)], jsonb_build_object('k', g % 4, 'even', g % 2 = 0),
  int4range(g, g + 10), point(g % 17, g % 13)
  FROM generate_series(1, 400) g;
CREATE INDEX docs_fts ON docs USING gin (to_tsvector('simple', body));
CREATE INDEX docs_tags ON docs USING gin (tags);
CREATE INDEX docs_meta ON docs USING gin (meta jsonb_path_ops);
CREATE INDEX docs_trgm ON docs USING gist (body gist_trgm_ops);
CREATE INDEX docs_during ON docs USING gist (during);
CREATE INDEX docs_pos ON docs USING spgist (pos);
CREATE INDEX docs_hash ON docs USING hash (body);
CREATE INDEX docs_brin ON docs USING brin (id);
SELECT indexrelid::regclass AS index, amname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
  JOIN pg_am a ON a.oid = c.relam WHERE indrelid = 'docs'::regclass ORDER BY 1::text;
SET enable_seqscan = off;
SELECT count(*) FROM docs WHERE to_tsvector('simple', body) @@ to_tsquery('simple', 'jumps & fox');
SELECT count(*) FROM docs WHERE tags @> ARRAY['t3', 'u2'];
SELECT count(*) FROM docs WHERE meta @> '{"k": 1, "even": false}';
SELECT id FROM docs WHERE body LIKE '%fox 12 %' ORDER BY id;
SELECT count(*) FROM docs WHERE during && int4range(100, 105);
SELECT count(*) FROM docs WHERE pos <@ box(point(0, 0), point(3, 3));
SELECT id FROM docs WHERE body = 'the quick brown fox 7 sleeps';
SELECT count(*) FROM docs WHERE id BETWEEN 10 AND 30;
RESET enable_seqscan;
-- Writes after the indexes exist, then the same questions.
INSERT INTO docs VALUES (401, 'a jumps fox', ARRAY['t3', 'u2'], '{"k": 1, "even": false}', int4range(101, 102), point(1, 1));
UPDATE docs SET tags = ARRAY['t3', 'u2'] WHERE id = 2;
DELETE FROM docs WHERE id = 3;
SET enable_seqscan = off;
SELECT count(*) FROM docs WHERE to_tsvector('simple', body) @@ to_tsquery('simple', 'jumps & fox');
SELECT id FROM docs WHERE tags @> ARRAY['t3', 'u2'] ORDER BY id;
SELECT id FROM docs WHERE meta @> '{"k": 1, "even": false}' AND id > 390 ORDER BY id;
SELECT count(*) FROM docs WHERE during && int4range(100, 105);
RESET enable_seqscan;
REINDEX TABLE docs;
DROP INDEX docs_fts, docs_hash;
SELECT count(*) FROM docs WHERE tags && ARRAY['t1'];
DROP TABLE docs;
DROP EXTENSION pg_trgm;
