-- Where Pinax tables behave differently from PostgreSQL: statements taken out of
-- pg_features.sql (not in the schedule; numbering kept from when it was written:
-- 1, deferred unique duplicates found by index scans, works now and is in
-- indexes.sql; 2, REFRESH MATERIALIZED VIEW CONCURRENTLY, works now and is in
-- pg_features.sql;
-- 5, a UNIQUE citext column, works now and is in pg_features.sql (citext keys
-- are stored by their lower-case form); 6, sequence relations showing the values
-- handed out, works now and is in sequences.sql). Each section says what heap prints and what
-- Pinax prints. Tables are created without USING (Pinax in a pinax database).
SET client_min_messages = warning;

-- 3. A unique violation in COPY FROM: the error has no CONTEXT line naming the COPY
-- input line.
--   heap:  ERROR:  duplicate key value violates unique constraint "pgf_gap_copy_pkey"
--          DETAIL:  Key (id)=(1) already exists.
--          CONTEXT:  COPY pgf_gap_copy, line 2
--   pinax: the same ERROR and DETAIL, without the CONTEXT line
CREATE TABLE pgf_gap_copy (id int PRIMARY KEY, name text);
INSERT INTO pgf_gap_copy VALUES (1, 'one');
COPY pgf_gap_copy FROM STDIN WITH (FORMAT csv);
8,ok
1,dup
\.
SELECT count(*) FROM pgf_gap_copy;
DROP TABLE pgf_gap_copy;

-- 4. Nondeterministic (ICU, case-insensitive) collation on a key column: Pinax
-- indexes compare the bytes, not the collation, so equal keys that differ in case
-- would not be duplicates and an index lookup would miss rows equal under the
-- collation. Since this was found, such an index is refused (0A000; pinax_only.sql):
-- the statements below now fail on Pinax where heap indexes the column.
--   heap:  INSERT 'HELLO' fails: duplicate key value violates unique constraint
--          "pgf_gap_ci_pkey" / DETAIL: Key (w)=(HELLO) already exists.
--          WHERE w = 'hello' finds n = 1; the table has 2 rows;
--          CREATE UNIQUE INDEX fails: could not create unique index "pgf_gap_ci2_w"
--          / DETAIL: Key (w)=(Hello) is duplicated.
--   pinax: the INSERT succeeds (3 rows: Hello, HELLO, World); WHERE w = 'hello'
--          finds 0 rows through the primary key (1 and 3 with index scans off);
--          CREATE UNIQUE INDEX succeeds.
CREATE COLLATION pgf_gap_ci_coll (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE pgf_gap_ci (w text COLLATE pgf_gap_ci_coll PRIMARY KEY, n int);
INSERT INTO pgf_gap_ci VALUES ('Hello', 1), ('World', 2);
INSERT INTO pgf_gap_ci VALUES ('HELLO', 3);
SELECT n FROM pgf_gap_ci WHERE w = 'hello' ORDER BY n;
SELECT w, n FROM pgf_gap_ci ORDER BY w, n;
CREATE TABLE pgf_gap_ci2 (id int PRIMARY KEY, w text COLLATE pgf_gap_ci_coll);
INSERT INTO pgf_gap_ci2 VALUES (1, 'Hello'), (2, 'HELLO');
CREATE UNIQUE INDEX pgf_gap_ci2_w ON pgf_gap_ci2 (w);
DROP TABLE pgf_gap_ci, pgf_gap_ci2;
DROP COLLATION pgf_gap_ci_coll;

