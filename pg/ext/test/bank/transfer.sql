-- One transfer between two random accounts, recorded in the history table.
\set src random(1, :accounts)
\set dst random(1, :accounts)
\set amount random(1, 100)
\set client :client_id + :base
BEGIN;
UPDATE bank_accounts SET balance = balance - :amount WHERE id = :src;
UPDATE bank_accounts SET balance = balance + :amount WHERE id = :dst;
INSERT INTO bank_transfers (src, dst, amount, client) VALUES (:src, :dst, :amount, :client);
COMMIT;
