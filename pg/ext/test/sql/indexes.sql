-- Secondary indexes stored by Pinax: unique, multi-column, expression, partial, backfill.
CREATE TABLE people (id int PRIMARY KEY, email text, first text, last text, age int);
CREATE UNIQUE INDEX people_email ON people (email);
CREATE INDEX people_name ON people (last, first);
CREATE INDEX people_lower ON people (lower(email));
CREATE INDEX people_adults ON people (age) WHERE age >= 18;
INSERT INTO people VALUES (1, 'a@x.org', 'Ann', 'Smith', 30), (2, 'b@x.org', 'Bob', 'Smith', 12),
  (3, 'c@x.org', 'Cid', 'Jones', 45), (4, NULL, 'Dee', 'Jones', NULL), (5, NULL, 'Eve', 'Brown', 18);
SET enable_seqscan = off;
SELECT id FROM people WHERE email = 'b@x.org';
SELECT id FROM people WHERE last = 'Smith' ORDER BY id;
SELECT id FROM people WHERE last = 'Jones' AND first = 'Cid';
SELECT id FROM people WHERE lower(email) = 'c@x.org';
SELECT id FROM people WHERE age >= 18 AND age < 40 ORDER BY id;
SELECT id FROM people WHERE email IS NULL ORDER BY id;
-- Unique violations name the index and the key.
INSERT INTO people VALUES (6, 'a@x.org', 'Al', 'Alias', 1);
UPDATE people SET email = 'c@x.org' WHERE id = 1;
-- NULLs are distinct.
INSERT INTO people VALUES (7, NULL, 'Fay', 'Brown', 3);
-- Updates move index entries; old keys no longer match.
UPDATE people SET email = 'a2@x.org', last = 'Smyth' WHERE id = 1;
SELECT id FROM people WHERE email = 'a@x.org';
SELECT id, email FROM people WHERE email = 'a2@x.org';
SELECT id FROM people WHERE last = 'Smyth';
SELECT id FROM people WHERE last = 'Smith' ORDER BY id;
-- The freed key can be reused.
INSERT INTO people VALUES (8, 'a@x.org', 'New', 'Person', 50);
DELETE FROM people WHERE id = 8;
SELECT id FROM people WHERE email = 'a@x.org';
INSERT INTO people VALUES (8, 'a@x.org', 'New', 'Person', 50);
-- Primary key change moves the row and its index entries.
UPDATE people SET id = 100 WHERE id = 3;
SELECT id, email FROM people WHERE email = 'c@x.org';
SELECT id FROM people WHERE lower(email) = 'c@x.org';
RESET enable_seqscan;
-- Index built on a populated table (backfill), then used.
CREATE TABLE big (id int PRIMARY KEY, grp int, tag text);
INSERT INTO big SELECT g, g % 10, 't' || (g % 7) FROM generate_series(1, 2000) g;
CREATE INDEX big_grp ON big (grp);
CREATE UNIQUE INDEX big_tag_id ON big (tag, id);
SET enable_seqscan = off;
SELECT count(*) FROM big WHERE grp = 3;
SELECT count(*) FROM big WHERE tag = 't2';
SELECT id FROM big WHERE grp = 3 AND id < 40 ORDER BY id;
RESET enable_seqscan;
CREATE TABLE dupt (id int PRIMARY KEY, v int);
INSERT INTO dupt VALUES (1, 1), (2, 2), (3, 2);
CREATE UNIQUE INDEX dupt_v ON dupt (v);
DROP TABLE dupt;
-- DESC and NULLS FIRST index columns.
CREATE INDEX big_desc ON big (grp DESC NULLS FIRST, id);
SELECT id FROM big WHERE grp = 9 ORDER BY id DESC LIMIT 3;
-- INCLUDE columns.
CREATE UNIQUE INDEX people_id_incl ON people (id) INCLUDE (email);
SELECT id, email FROM people WHERE id = 2;
-- Deferrable unique constraint.
CREATE TABLE seqs (n int, CONSTRAINT seqs_n UNIQUE (n) DEFERRABLE INITIALLY DEFERRED);
INSERT INTO seqs VALUES (1), (2), (3);
UPDATE seqs SET n = n + 1;
SELECT n FROM seqs ORDER BY n;
BEGIN;
INSERT INTO seqs VALUES (4);
COMMIT;
-- While a deferred unique constraint is violated, the index finds every
-- duplicate; a row that leaves the key takes only its own entry with it; the
-- check at COMMIT holds.
CREATE TABLE rank (id int PRIMARY KEY, pos int, CONSTRAINT rank_pos UNIQUE (pos) DEFERRABLE INITIALLY IMMEDIATE);
INSERT INTO rank VALUES (1, 4), (2, 3), (3, 2);
SET enable_seqscan = off;
SET enable_bitmapscan = off;
BEGIN;
SET CONSTRAINTS ALL DEFERRED;
UPDATE rank SET pos = 3 WHERE id = 1;
SELECT count(*) FROM rank WHERE pos = 3;
SELECT id FROM rank WHERE pos = 3 ORDER BY id;
INSERT INTO rank VALUES (4, 3);
SELECT id FROM rank WHERE pos = 3 ORDER BY id;
DELETE FROM rank WHERE id = 1;
UPDATE rank SET pos = 5 WHERE id = 4;
SELECT id, pos FROM rank WHERE pos IN (3, 4, 5) ORDER BY id;
COMMIT;
SELECT id, pos FROM rank WHERE pos = 3;
SELECT id, pos FROM rank WHERE pos = 5;
BEGIN;
SET CONSTRAINTS ALL DEFERRED;
UPDATE rank SET pos = 2 WHERE id = 2;
UPDATE rank SET pos = 3 WHERE id = 3;
SELECT id, pos FROM rank WHERE pos IN (2, 3) ORDER BY id;
COMMIT;
SELECT id, pos FROM rank WHERE pos IN (2, 3) ORDER BY id;
BEGIN;
SET CONSTRAINTS ALL DEFERRED;
UPDATE rank SET pos = 2 WHERE id = 4;
COMMIT;
SELECT id, pos FROM rank ORDER BY id;
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP TABLE rank;
DROP INDEX people_name;
SELECT id FROM people WHERE last = 'Jones';
DROP TABLE people, big, seqs;
-- A primary key added to a populated table with secondary indexes (unique,
-- partial, expression): every entry follows its row to the row's new key.
CREATE TABLE nopk (a int NOT NULL, b text, c int);
CREATE INDEX nopk_b ON nopk (b);
CREATE UNIQUE INDEX nopk_c ON nopk (c);
CREATE INDEX nopk_part ON nopk (c) WHERE c % 10 = 0;
CREATE INDEX nopk_expr ON nopk (lower(b));
INSERT INTO nopk SELECT g, 'B' || (g % 13), g * 3 FROM generate_series(1, 300) g;
ALTER TABLE nopk ADD PRIMARY KEY (a);
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT a, b, c FROM nopk WHERE b = 'B7' ORDER BY a LIMIT 5;
SELECT a, c FROM nopk WHERE c = 300;
SELECT count(*) FROM nopk WHERE c % 10 = 0 AND c > 450;
SELECT count(*) FROM nopk WHERE lower(b) = 'b3';
SELECT a FROM nopk WHERE a = 77;
INSERT INTO nopk VALUES (301, 'x', 3);
UPDATE nopk SET c = 5000 WHERE a = 10;
SELECT a, c FROM nopk WHERE c IN (30, 5000) ORDER BY a;
DELETE FROM nopk WHERE b = 'B1';
SELECT count(*) FROM nopk WHERE b = 'B1';
RESET enable_seqscan;
RESET enable_bitmapscan;
SELECT count(*), count(DISTINCT a) FROM nopk;
DROP TABLE nopk;
-- A partial index's entries follow rows into and out of its predicate, also
-- when an UPDATE leaves the indexed column as it was.
CREATE TABLE pin (id int PRIMARY KEY, v int, s text);
CREATE INDEX pin_v_active ON pin (v) WHERE s = 'active';
CREATE UNIQUE INDEX pin_v_unique_active ON pin (v) WHERE s = 'active';
INSERT INTO pin VALUES (1, 10, 'new'), (2, 20, 'active'), (3, 10, 'old');
UPDATE pin SET s = 'active' WHERE id = 1;
UPDATE pin SET s = 'done' WHERE id = 2;
UPDATE pin SET s = 'active' WHERE id = 3;
SET enable_seqscan = off;
SELECT id FROM pin WHERE v = 10 AND s = 'active';
SELECT id FROM pin WHERE v = 20 AND s = 'active';
UPDATE pin SET s = 'done' WHERE id = 1;
UPDATE pin SET s = 'active' WHERE id = 3;
SELECT id FROM pin WHERE v = 10 AND s = 'active';
RESET enable_seqscan;
DROP TABLE pin;
