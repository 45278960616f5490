-- Every read sees the total unchanged (one read time across all tablets); a wrong
-- total makes the client fail with a division by zero.
SELECT sum(balance) AS total FROM bank_accounts \gset
SELECT 1 / ((:total = :accounts * 1000)::int) AS ok \gset
