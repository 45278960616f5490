-- CLUSTER and VACUUM FULL: on heap they rewrite the table; on Pinax tables
-- there is nothing to rewrite (a NOTICE says so, hidden here so that both print
-- the same), and the other tables a command takes are rewritten as usual.
SET client_min_messages = warning;
CREATE TABLE m (id int PRIMARY KEY, v text);
CREATE INDEX m_v ON m (v);
INSERT INTO m SELECT g, 'x' || g FROM generate_series(1, 500) g;
DELETE FROM m WHERE id % 5 = 0;
UPDATE m SET v = v || '!' WHERE id % 7 = 0;
CREATE TABLE mh (id int PRIMARY KEY, v text) USING heap;
INSERT INTO mh SELECT g, 'h' || g FROM generate_series(1, 100) g;
DELETE FROM mh WHERE id > 50;
CLUSTER m USING m_pkey;
CLUSTER m USING m_v;
CLUSTER m;
CLUSTER m USING no_such_index;
CLUSTER mh USING mh_pkey;
CLUSTER;
VACUUM FULL m;
VACUUM (FULL, ANALYZE) m;
VACUUM (FULL, VERBOSE false) m, mh;
VACUUM (FULL, ANALYZE) m (v);
VACUUM FULL;
VACUUM (FULL false) m;
SELECT count(*), sum(id), count(*) FILTER (WHERE v LIKE '%!') AS updated FROM m;
SELECT count(*), sum(id) FROM mh;
SET enable_seqscan = off;
SELECT id, v FROM m WHERE v = 'x14!';
RESET enable_seqscan;
-- A partitioned table with Pinax and heap partitions.
CREATE TABLE mp (id int, v text) PARTITION BY RANGE (id);
CREATE TABLE mp1 PARTITION OF mp FOR VALUES FROM (0) TO (100);
CREATE TABLE mp2 PARTITION OF mp FOR VALUES FROM (100) TO (200) USING heap;
INSERT INTO mp SELECT g, 'p' || g FROM generate_series(0, 199) g;
VACUUM FULL mp;
SELECT count(*), sum(id) FROM mp;
-- Only the owner may CLUSTER or VACUUM FULL.
CREATE ROLE maint_other;
GRANT SELECT ON m TO maint_other;
SET ROLE maint_other;
CLUSTER m USING m_pkey;
VACUUM FULL m;
RESET ROLE;
DROP TABLE m, mh, mp;
DROP ROLE maint_other;
