-- Transactions: atomicity across tablets, rollback, statement visibility.
CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL);
INSERT INTO acct SELECT g, 100 FROM generate_series(1, 20) g;
BEGIN;
UPDATE acct SET bal = bal - 10 WHERE id = 1;
UPDATE acct SET bal = bal + 10 WHERE id = 2;
SELECT id, bal FROM acct WHERE id IN (1, 2) ORDER BY id;
COMMIT;
SELECT sum(bal) FROM acct;
BEGIN;
DELETE FROM acct WHERE id > 10;
INSERT INTO acct VALUES (100, 5);
SELECT count(*), sum(bal) FROM acct;
ROLLBACK;
SELECT count(*), sum(bal) FROM acct;
-- Later statements see earlier ones' writes; a statement never sees its own.
BEGIN;
INSERT INTO acct SELECT id + 1000, bal FROM acct;
SELECT count(*) FROM acct;
UPDATE acct SET bal = bal + 1;
SELECT sum(bal) FROM acct;
INSERT INTO acct SELECT id + 5000, bal FROM acct WHERE id > 1000;
SELECT count(*) FROM acct;
COMMIT;
SELECT count(*), sum(bal) FROM acct;
-- An error aborts the transaction cleanly; nothing of it remains.
BEGIN;
UPDATE acct SET bal = 0;
INSERT INTO acct VALUES (1, 1);
SELECT 1;
ROLLBACK;
SELECT count(*), sum(bal) FROM acct WHERE bal = 0;
-- Multi-statement query string in one implicit transaction.
INSERT INTO acct VALUES (9001, 1); INSERT INTO acct VALUES (9002, 2);
SELECT id, bal FROM acct WHERE id > 9000 ORDER BY id;
DROP TABLE acct;
-- A DO block or procedure is one transaction: its first statement's write is not
-- committed on its own when a later one fails (READ COMMITTED statement restarts
-- must not send it early).
CREATE TABLE do_atomic (id int PRIMARY KEY, v int);
INSERT INTO do_atomic VALUES (1, 0);
DO $$ BEGIN UPDATE do_atomic SET v = 1 WHERE id = 1; UPDATE do_atomic SET v = 1 / 0 WHERE id = 1; END $$;
CREATE PROCEDURE do_atomic_p() LANGUAGE plpgsql AS $$ BEGIN UPDATE do_atomic SET v = 2 WHERE id = 1; UPDATE do_atomic SET v = 1 / 0 WHERE id = 1; END $$;
CALL do_atomic_p();
SELECT * FROM do_atomic;
DO $$ BEGIN UPDATE do_atomic SET v = 3 WHERE id = 1; UPDATE do_atomic SET v = v + 1 WHERE id = 1; END $$;
SELECT * FROM do_atomic;
DROP PROCEDURE do_atomic_p;
DROP TABLE do_atomic;
