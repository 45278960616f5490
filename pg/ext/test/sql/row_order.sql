-- A table without a primary key returns its rows in insertion order, as heap
-- does for a table that was only inserted into and deleted from (SQL promises
-- no order without ORDER BY; applications lean on it anyway). An UPDATE is
-- where the two differ: heap moves the new version, Pinax keeps the row's place.
CREATE TABLE ro (a int, b text);
INSERT INTO ro VALUES (3, 'c'), (1, 'a'), (2, 'b');
INSERT INTO ro SELECT g, 'g' || g FROM generate_series(10, 4, -1) g;
SELECT * FROM ro;
COPY ro FROM stdin;
-5	copied
-6	copied
\.
BEGIN;
INSERT INTO ro VALUES (100, 'in a transaction');
SELECT * FROM ro;
COMMIT;
DELETE FROM ro WHERE a IN (1, 7);
SELECT * FROM ro;
SELECT a FROM ro LIMIT 4;
-- A larger table, filled by one session.
CREATE TABLE ro2 (n int);
INSERT INTO ro2 SELECT (g * 7919) % 5000 FROM generate_series(1, 5000) g;
SELECT bool_and(n = (s.i * 7919) % 5000) AS insertion_order, count(*)
  FROM (SELECT n, row_number() OVER () AS i FROM ro2) s;
DROP TABLE ro, ro2;
