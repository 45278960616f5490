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
