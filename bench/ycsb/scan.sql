\set key random_zipfian(1, :records, 1.001)
\set len random(1, 100)
SELECT * FROM usertable WHERE ycsb_key >= 'user' || lpad(:key::text, 10, '0') ORDER BY ycsb_key LIMIT :len;
