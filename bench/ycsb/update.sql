\set key random_zipfian(1, :records, 1.001)
UPDATE usertable SET field0 = md5(random()::text) || md5(random()::text) || md5(random()::text) || 'yyyy' WHERE ycsb_key = 'user' || lpad(:key::text, 10, '0');
