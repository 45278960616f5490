-- Every common built-in type round-trips through a Pinax table, as a value and as a key.
CREATE TABLE t_types (
  id serial PRIMARY KEY,
  b bool, i2 int2, i4 int4, i8 int8, f4 float4, f8 float8, n numeric(20,5), nn numeric,
  t text, vc varchar(10), c char(5), by bytea, d date, tm time, ttz timetz,
  ts timestamp, tstz timestamptz, iv interval, u uuid, j json, jb jsonb,
  ia int[], ta text[], ip inet, cidr_ cidr, mac macaddr, pt point, bx box,
  r int4range, m money, bits bit(4), vb varbit, x xml, tsv tsvector, o oid, nm name
);
INSERT INTO t_types (b, i2, i4, i8, f4, f8, n, nn, t, vc, c, by, d, tm, ttz, ts, tstz, iv, u, j, jb, ia, ta, ip, cidr_, mac, pt, bx, r, m, bits, vb, x, tsv, o, nm)
VALUES (true, -32768, 2147483647, -9223372036854775808, 1.5, -2.25e300, 12345.67891, 'NaN', 'héllo wörld', 'abc', 'ab', '\x00ff10',
        '2024-02-29', '23:59:59.999999', '12:00+02', '2000-01-01 00:00:00', '2024-06-01 12:34:56+00', '1 year 2 mons 3 days 04:05:06',
        'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2]}', '{"b": {"c": null}, "a": 1}', '{1,2,NULL}', '{"x","y z"}',
        '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', '(1,2)', '((0,0),(1,1))', '[1,10)', '12.34', B'1010', B'101', '<a>x</a>',
        'a fat cat', 4294967295, 'a_name'),
       (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
        NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
       (false, 0, 0, 0, '-Infinity', 'NaN', -0.00001, 1e100, '', '', '', '', '-infinity', '00:00', '00:00-11', 'infinity', '-infinity', '-1 day',
        '00000000-0000-0000-0000-000000000000', '[]', '[]', '{}', '{}', '::1', '::/0', '00:00:00:00:00:00', '(0,0)', '((0,0),(0,0))', 'empty', '0', B'0000', B'', '<b/>',
        '', 0, '');
SELECT * FROM t_types ORDER BY id;
SELECT jb -> 'b', ia[2], ta[2], r @> 5, ip << '192.168.0.0/16'::inet FROM t_types WHERE id = 1;
-- A large value (detoasted and stored inline in the row).
CREATE TABLE t_big (id int PRIMARY KEY, body text);
INSERT INTO t_big VALUES (1, repeat('abcdefghij', 100000));
INSERT INTO t_big SELECT 2, body || 'z' FROM t_big WHERE id = 1;
SELECT id, length(body), md5(body) FROM t_big ORDER BY id;
-- Keys of many types (equality lookups through the primary key).
CREATE TABLE k_num (k numeric PRIMARY KEY, v int);
INSERT INTO k_num VALUES (1.50, 1), (1.5, 2);
INSERT INTO k_num VALUES (2, 3), (-0.001, 4), ('NaN', 5);
SELECT * FROM k_num WHERE k = 1.500;
SELECT * FROM k_num ORDER BY k;
CREATE TABLE k_ts (k timestamptz PRIMARY KEY, v int);
INSERT INTO k_ts VALUES ('2024-01-01 00:00+00', 1), ('2024-01-01 01:00+01', 2);
CREATE TABLE k_uuid (k uuid PRIMARY KEY, v int);
INSERT INTO k_uuid SELECT md5(g::text)::uuid, g FROM generate_series(1, 50) g;
SELECT v FROM k_uuid WHERE k = md5('7')::uuid;
CREATE TABLE k_bpchar (k char(4) PRIMARY KEY);
INSERT INTO k_bpchar VALUES ('ab');
INSERT INTO k_bpchar VALUES ('ab  ');
SELECT '[' || k || ']' FROM k_bpchar WHERE k = 'ab';
CREATE TABLE k_float (k float8 PRIMARY KEY);
INSERT INTO k_float VALUES (0), ('NaN'), ('Infinity');
INSERT INTO k_float VALUES (-0.0);
SELECT * FROM k_float ORDER BY k;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE k_enum (k mood PRIMARY KEY, n int);
INSERT INTO k_enum VALUES ('ok', 1), ('happy', 2), ('sad', 3);
SELECT * FROM k_enum WHERE k = 'happy';
SELECT * FROM k_enum ORDER BY k;
CREATE TABLE k_interval (k interval PRIMARY KEY);
INSERT INTO k_interval VALUES ('1 day'), ('2 hours');
SELECT * FROM k_interval WHERE k = '1 day';
-- Keys equal under the type's equality are one key ('24 hours' = '1 day').
DO $$ BEGIN INSERT INTO k_interval VALUES ('24 hours'); RAISE NOTICE 'inserted'; EXCEPTION WHEN unique_violation THEN RAISE NOTICE 'duplicate key'; END $$;
SELECT * FROM k_interval WHERE k = '24 hours';
INSERT INTO k_interval VALUES ('1 mon'), ('29 days'), ('-1 day');
SELECT * FROM k_interval WHERE k > '2 hours' ORDER BY k;
DROP TABLE t_types, t_big, k_num, k_ts, k_uuid, k_bpchar, k_float, k_enum, k_interval;
DROP TYPE mood;
