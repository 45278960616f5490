\set key random_zipfian(1, :records, 1.001)
SELECT * FROM usertable WHERE ycsb_key = 'user' || lpad(:key::text, 10, '0');
