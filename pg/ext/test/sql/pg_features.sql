-- A broad tour of everyday PostgreSQL 15 features on tables created without USING
-- (Pinax tables in the pinax database, heap tables in the heap database).
SET client_min_messages = warning;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
DROP ROLE IF EXISTS pgf_role;

-- Integer, numeric and floating-point types and their operators.
CREATE TABLE pgf_nums (id int, i2 smallint, i4 int, i8 bigint, n numeric(14,3), r real, d double precision);
INSERT INTO pgf_nums VALUES
  (1, 1, 10, 10000000000, 1.5, 1.25, 2.5),
  (2, -2, -20, -9000000000000000000, 123456789.125, -0.5, 1e-10),
  (3, NULL, 7, 3, 0.001, 3.75, 1e300);
SELECT id, i2 + 1 AS i2p, i4 / 3 AS idiv, i4 % 3 AS imod, i8 + 1 AS i8p, n * 2 AS n2, round(n, 1) AS rnd,
       trunc(n / 7, 5) AS ndiv, r * 2 AS r2, d / 2 AS d2, abs(i4), sign(n), i4 & 6 AS band, i4 << 2 AS shl
FROM pgf_nums ORDER BY id;
SELECT i8 * 2 FROM pgf_nums WHERE id = 2;
SELECT sum(i4), avg(n), min(d), max(r), count(i2), sum(r), variance(n), stddev_samp(i4) FROM pgf_nums;
SELECT sqrt(2::numeric), 2 ^ 10, factorial(20), gcd(48, 18), lcm(4, 6), div(17, 5), mod(-17, 5),
       width_bucket(5.5, 0, 10, 4), 'NaN'::numeric > 1, 'Infinity'::numeric, 1.0 / 3, 10::numeric(5,2), 0.1::float8 + 0.2;
SELECT id FROM pgf_nums WHERE n BETWEEN 1 AND 1000 ORDER BY id;
UPDATE pgf_nums SET n = n + 0.0005 WHERE id = 1;
SELECT n FROM pgf_nums WHERE id = 1;
INSERT INTO pgf_nums (id, n) VALUES (4, 123456789012.5);
SELECT 1 / 0;

-- Character types: text, varchar(n), char(n) and string functions and operators.
CREATE TABLE pgf_text (id int, t text, v varchar(8), c char(5));
INSERT INTO pgf_text VALUES (1, 'Hello World', 'abc', 'ab'), (2, 'pinax store', 'xyz ', 'hello'), (3, '', NULL, 'x');
SELECT id, length(t), upper(t), lower(t), t || '!' AS bang, v || '|' AS v_bar, c || '|' AS c_bar,
       length(c) AS c_len, octet_length(c) AS c_oct, c = 'ab   ' AS c_eq, c::text || '|' AS c_txt
FROM pgf_text ORDER BY id;
INSERT INTO pgf_text VALUES (4, 'x', 'much too long', 'a');
INSERT INTO pgf_text VALUES (4, 'x', 'exactly8   ', 'a');
SELECT v, length(v) FROM pgf_text WHERE id = 4;
SELECT id FROM pgf_text WHERE t LIKE '%o%' ORDER BY id;
SELECT id FROM pgf_text WHERE t ILIKE 'PIN%' OR t SIMILAR TO 'H(e|a)llo%' ORDER BY id;
SELECT id, t ~ '^[A-Z]' AS re, t ~* 'world' AS rei, regexp_replace(t, 'o', '0', 'g'), split_part(t, ' ', 2),
       position('o' in t), substring(t from 2 for 3), left(t, 2), right(t, 2), reverse(t), initcap(t),
       replace(t, 'l', 'L'), lpad(t, 13, '*'), rpad(t, 3), format('%s-%L-%I', t, t, t), md5(t)
FROM pgf_text ORDER BY id;
SELECT string_agg(t, ',' ORDER BY id) FROM pgf_text WHERE id < 3;
SELECT concat_ws('/', 'a', NULL, 'b'), btrim('  x  '), ascii('A'), chr(66),
       repeat('ab', 3), translate('hello', 'el', 'ip'), starts_with('pinax', 'pi'), 'abc' < 'abd',
       regexp_count('a1b22c333', '\d+'), regexp_substr('a1b22c333', '\d{3}'), quote_ident('Mixed Case');
SELECT array_agg(m[1] ORDER BY m[1]) FROM regexp_matches('a1b22c333', '(\d+)', 'g') AS m;
UPDATE pgf_text SET t = t || repeat('x', 5000) WHERE id = 3;
SELECT length(t), md5(t) FROM pgf_text WHERE id = 3;

-- bytea: hex/escape input, encoding functions, operators and a large value.
CREATE TABLE pgf_bytes (id int, b bytea);
INSERT INTO pgf_bytes VALUES (1, '\xdeadbeef'), (2, 'abc'::bytea), (3, decode('AAEC/w==', 'base64')), (4, ''::bytea),
  (5, decode(repeat('0123456789abcdef', 20000), 'hex'));
SELECT id, CASE WHEN length(b) < 10 THEN b END AS b, length(b), md5(b), encode(sha256(b), 'hex') AS sha,
       CASE WHEN length(b) BETWEEN 1 AND 10 THEN encode(b, 'base64') END AS b64,
       CASE WHEN length(b) > 0 THEN get_byte(b, 0) END AS first_byte
FROM pgf_bytes ORDER BY id;
SELECT b || '\x00ff'::bytea, substring(b from 2 for 2), position('\xbe'::bytea in b), encode(b, 'escape')
FROM pgf_bytes WHERE id = 1;
SELECT id FROM pgf_bytes WHERE b > '\x61' ORDER BY b, id;
UPDATE pgf_bytes SET b = set_byte(b, 0, 255) WHERE id = 2;
SELECT b FROM pgf_bytes WHERE id = 2;

-- Booleans, three-valued logic and boolean aggregates.
CREATE TABLE pgf_bool (id int, b bool);
INSERT INTO pgf_bool VALUES (1, true), (2, false), (3, NULL), (4, 'yes'), (5, 'off');
SELECT id, b, NOT b AS nb, b AND NULL AS b_and, b OR NULL AS b_or, b IS TRUE AS is_t, b IS NOT FALSE AS not_f,
       b IS UNKNOWN AS unk, b::int AS as_int FROM pgf_bool ORDER BY id;
SELECT bool_and(b), bool_or(b), every(b), count(*) FILTER (WHERE b), count(*) FILTER (WHERE b IS NULL) FROM pgf_bool;
SELECT id FROM pgf_bool WHERE b ORDER BY id;
SELECT id FROM pgf_bool WHERE NOT b ORDER BY id;

-- Date, time, timestamp, timestamptz and interval arithmetic.
CREATE TABLE pgf_time (id int, d date, t time, ts timestamp, tstz timestamptz, iv interval);
INSERT INTO pgf_time VALUES
  (1, '2024-02-29', '13:45:30.5', '2024-02-29 13:45:30', '2024-02-29 13:45:30+02', '1 day 2 hours'),
  (2, '1999-12-31', '00:00', '1999-12-31 23:59:59.999999', '2000-01-01 00:00:00-08', '-3 months 15 minutes'),
  (3, 'infinity', '24:00', '-infinity', 'epoch', '1 year 2 mons 3 days 04:05:06.789');
SELECT id, d, t, ts, tstz, iv FROM pgf_time ORDER BY id;
SELECT id, d + 1 AS tomorrow, ts + iv AS ts_iv, tstz - iv AS tstz_iv, t + interval '30 minutes' AS t30,
       tstz AT TIME ZONE 'America/New_York' AS ny, extract(year from ts) AS yr, date_trunc('month', ts) AS month,
       to_char(ts, 'YYYY-MM-DD HH24:MI:SS.MS Dy') AS fmt, iv * 2 AS iv2, justify_hours(iv) AS jh
FROM pgf_time ORDER BY id;
SELECT age(date '2024-03-01', date '2023-01-15'), date '2024-01-31' + interval '1 month', date '2024-03-01' - date '2024-02-01',
       make_date(2024, 2, 29), make_interval(days => 10, hours => 5), timestamp '2024-01-01 10:00' - timestamp '2023-12-31 09:30',
       (date '2024-01-01', date '2024-02-01') OVERLAPS (date '2024-01-15', date '2024-03-01'),
       date_bin('15 minutes', timestamp '2024-05-05 10:37:12', timestamp '2000-01-01'), extract(epoch from interval '1 day'),
       timestamptz '2024-06-01 12:00:00+00' AT TIME ZONE 'Asia/Tokyo', to_timestamp(86400 * 365);
SELECT count(*), min(x), max(x) FROM generate_series(timestamp '2024-01-01', timestamp '2024-12-31', interval '1 week') AS x;
SELECT id FROM pgf_time WHERE tstz < '2000-01-01 12:00+00' ORDER BY tstz;
SELECT id FROM pgf_time ORDER BY d DESC, id;
UPDATE pgf_time SET ts = ts + interval '1 second', iv = iv - interval '1 day' WHERE id = 1;
SELECT ts, iv FROM pgf_time WHERE id = 1;
SELECT date '2024-02-30';

-- UUID values as primary key, comparison and ordering.
CREATE TABLE pgf_uuid (u uuid PRIMARY KEY, note text);
INSERT INTO pgf_uuid VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'a'), ('{00000000-0000-0000-0000-000000000001}', 'b'),
  ('FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF', 'c'), ('a0eebc999c0b4ef8bb6d6bb9bd380a12', 'd');
SELECT u, note FROM pgf_uuid ORDER BY u;
SELECT note FROM pgf_uuid WHERE u > '80000000-0000-0000-0000-000000000000' ORDER BY note;
SELECT note FROM pgf_uuid WHERE u = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12';
INSERT INTO pgf_uuid VALUES ('A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', 'dup');

-- json and jsonb: operators, path queries, subscripting and builders.
CREATE TABLE pgf_json (id int, j json, jb jsonb);
INSERT INTO pgf_json VALUES
  (1, '{"a": 1, "b": [1, 2, 3], "c": {"d": "x"}}', '{"a": 1, "b": [1, 2, 3], "c": {"d": "x"}}'),
  (2, '{"a":2,  "b":[], "e":null, "a":3}', '{"a":2,  "b":[], "e":null, "a":3}'),
  (3, '[1, "two", true, null, 4.50]', '[1, "two", true, null, 4.50]'),
  (4, '"scalar"', '"scalar"');
SELECT id, j, jb FROM pgf_json ORDER BY id;
SELECT id, j -> 'a' AS ja, j ->> 'a' AS jta, j #> '{c,d}' AS path, j #>> '{c,d}' AS tpath, jb -> 'b' -> 1 AS b1,
       jb ? 'a' AS has_a, jb ?| array['e', 'x'] AS any_key, jb ?& array['a', 'b'] AS all_keys, jsonb_typeof(jb),
       json_typeof(j), jb -> 1 AS elem1
FROM pgf_json ORDER BY id;
SELECT id FROM pgf_json WHERE jb @> '{"a": 1}' ORDER BY id;
SELECT id FROM pgf_json WHERE '{"b": []}' <@ jb ORDER BY id;
SELECT id FROM pgf_json WHERE jb @? '$.b[*] ? (@ > 2)' ORDER BY id;
SELECT id, jb @@ '$.a == 3' AS a_is_3 FROM pgf_json ORDER BY id;
SELECT id, jb || '{"z": 26}' AS cat, jb - 'a' AS minus_a, jb #- '{b,0}' AS minus_path,
       jsonb_set(jb, '{c}', '"new"') AS set_c, jsonb_insert(jb, '{b,0}', '0') AS ins, jsonb_strip_nulls(jb) AS stripped
FROM pgf_json WHERE id IN (1, 2) ORDER BY id;
SELECT jsonb_path_query_array(jb, '$.b[*] ? (@ >= 2)'), jsonb_path_exists(jb, '$.c.d'), jsonb_path_query_first(jb, '$.b.size()')
FROM pgf_json WHERE id = 1;
SELECT key, value FROM pgf_json, jsonb_each(jb) WHERE id = 1 ORDER BY key;
SELECT elem, ord FROM pgf_json, jsonb_array_elements_text(jb) WITH ORDINALITY AS e(elem, ord) WHERE id = 3 ORDER BY ord;
SELECT jsonb_pretty(jb) FROM pgf_json WHERE id = 1;
SELECT json_agg(id ORDER BY id), jsonb_agg(jb -> 'a' ORDER BY id), jsonb_object_agg(id, jsonb_typeof(jb)) FROM pgf_json;
SELECT row_to_json(p), to_jsonb(p) FROM (SELECT id, jb FROM pgf_json WHERE id = 3) p;
SELECT jsonb_build_object('k', 1, 'l', ARRAY[1, 2]), json_build_array(1, 'a', NULL), jsonb '{"x": 1}' = '{ "x" : 1 }'::jsonb;
UPDATE pgf_json SET jb['a'] = '10', jb['c']['e'] = '"new"' WHERE id = 1;
SELECT jb['a'], jb['c'], jb['c']['d'] FROM pgf_json WHERE id = 1;
SELECT id FROM pgf_json WHERE jb = '{"b": [], "a": 3, "e": null}' ORDER BY id;
SELECT * FROM jsonb_to_recordset('[{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]') AS r(a int, b text) ORDER BY a;
SELECT '{"a": '::jsonb;

-- Arrays: literals, slices, multi-dimensional, operators and unnest.
CREATE TABLE pgf_arr (id int, ia int[], ta text[], m int[][]);
INSERT INTO pgf_arr VALUES (1, '{1,2,3}', '{a,b}', '{{1,2},{3,4}}'), (2, ARRAY[4, 5], ARRAY['c', NULL], NULL),
  (3, '{}', '{"with space","q\"uote"}', '{{5}}'), (4, '[0:2]={7,8,9}', NULL, NULL);
SELECT id, ia, ta, m, ia[1] AS first, ia[2:3] AS slice, array_length(ia, 1) AS len, cardinality(ia), array_lower(ia, 1) AS lo,
       ia || 99 AS appended, array_prepend(0, ia) AS prepended, array_remove(ia, 2) AS removed, array_position(ia, 3) AS pos,
       array_to_string(ta, ',', '*') AS joined, m[2][1] AS m21, array_dims(m) AS dims
FROM pgf_arr ORDER BY id;
SELECT id FROM pgf_arr WHERE ia @> '{2}' ORDER BY id;
SELECT id FROM pgf_arr WHERE ia && '{5,9}' ORDER BY id;
SELECT id FROM pgf_arr WHERE 3 = ANY (ia) OR 'c' = ANY (ta) ORDER BY id;
SELECT id FROM pgf_arr WHERE 0 < ALL (ia) ORDER BY id;
SELECT id, u, ord FROM pgf_arr, unnest(ia) WITH ORDINALITY AS x(u, ord) ORDER BY id, ord;
UPDATE pgf_arr SET ia[2] = 20, ta = array_append(ta, 'z') WHERE id = 1;
UPDATE pgf_arr SET ia[5] = 50 WHERE id = 2;
SELECT id, ia, ta FROM pgf_arr WHERE id IN (1, 2) ORDER BY id;
SELECT array_agg(id ORDER BY id DESC), ARRAY(SELECT id FROM pgf_arr ORDER BY id) FROM pgf_arr;
SELECT array_cat('{1}'::int[], '{2,3}'),
       string_to_array('a,b,,c', ','), '{1,2}'::int[] < '{1,3}'::int[], array_fill(7, ARRAY[2, 2]);
SELECT id FROM pgf_arr ORDER BY ia, id;

-- Range and multirange types with their operators.
CREATE TABLE pgf_ranges (id int, ir int4range, nr numrange, dr daterange, tr tstzrange, mr int4multirange);
INSERT INTO pgf_ranges VALUES
  (1, '[1,10)', '(0.5,2.5]', '[2024-01-01,2024-02-01)', '[2024-01-01 00:00+00,2024-01-02 00:00+00)', '{[1,3),[5,8)}'),
  (2, int4range(5, 15, '[]'), numrange(NULL, 3), 'empty', NULL, '{}'),
  (3, '[20,30)', '[1,1]', '[2024-01-15,)', '(,)', '{[10,20]}');
SELECT id, ir, nr, dr, tr, mr FROM pgf_ranges ORDER BY id;
SELECT id, lower(ir), upper(ir), isempty(dr), ir @> 7 AS has7, ir && '[9,12)' AS overlaps, ir << '[40,50)' AS left_of,
       ir -|- '[10,20)' AS adjacent, ir * '[8,25)' AS inter, upper_inf(nr), mr @> 6 AS mr6, mr + '{[2,6)}' AS mr_union
FROM pgf_ranges ORDER BY id;
SELECT id FROM pgf_ranges WHERE dr @> date '2024-01-20' ORDER BY id;
SELECT range_agg(ir ORDER BY id), range_intersect_agg(ir) FILTER (WHERE id < 3) FROM pgf_ranges;
SELECT id FROM pgf_ranges ORDER BY ir, id;
SELECT int4range(5, 16) + int4range(15, 25), int4range(1, 5) + int4range(10, 20);

-- Enum types: ordering, comparison, added values and a btree index on the enum.
CREATE TYPE pgf_mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE pgf_people (id int PRIMARY KEY, name text, mood pgf_mood);
INSERT INTO pgf_people VALUES (1, 'ann', 'happy'), (2, 'bob', 'sad'), (3, 'cid', 'ok'), (4, 'dee', NULL);
SELECT name, mood FROM pgf_people ORDER BY mood, name;
SELECT name FROM pgf_people WHERE mood > 'sad' ORDER BY name;
SELECT enum_range(NULL::pgf_mood), enum_first(NULL::pgf_mood), min(mood), max(mood) FROM pgf_people;
ALTER TYPE pgf_mood ADD VALUE 'ecstatic' AFTER 'happy';
ALTER TYPE pgf_mood ADD VALUE 'meh' BEFORE 'ok';
UPDATE pgf_people SET mood = 'meh' WHERE id = 3;
INSERT INTO pgf_people VALUES (5, 'eve', 'ecstatic'), (6, 'fay', 'ok');
CREATE INDEX pgf_people_mood ON pgf_people (mood);
SELECT name, mood FROM pgf_people ORDER BY mood DESC, name;
SET enable_seqscan = off;
SELECT name, mood FROM pgf_people WHERE mood BETWEEN 'meh' AND 'happy' ORDER BY mood, name;
SELECT name FROM pgf_people WHERE mood = 'ecstatic';
RESET enable_seqscan;
INSERT INTO pgf_people VALUES (7, 'gus', 'angry');

-- Composite types: row constructors, field access and update, comparison.
CREATE TYPE pgf_addr AS (street text, zip int);
CREATE TABLE pgf_comp (id int, home pgf_addr, old pgf_addr[]);
INSERT INTO pgf_comp VALUES (1, ROW('Main St', 12345), ARRAY[ROW('a', 1)::pgf_addr]), (2, ('Side', 999), '{}'), (3, NULL, NULL),
  (4, ROW(NULL, 5), ARRAY[ROW('x, y', 2)::pgf_addr, ROW('z', NULL)::pgf_addr]);
SELECT id, home, (home).street, (home).zip + 1 AS zip1, home IS NULL AS is_null, old, old[1].street AS old_street
FROM pgf_comp ORDER BY id;
UPDATE pgf_comp SET home.zip = 54321 WHERE id = 1;
SELECT id FROM pgf_comp WHERE home = ROW('Main St', 54321)::pgf_addr;
SELECT id FROM pgf_comp WHERE home > ROW('N', 0)::pgf_addr ORDER BY id;
SELECT id, home FROM pgf_comp ORDER BY home, id;
SELECT row_to_json(c) FROM pgf_comp c WHERE id = 1;
SELECT (ROW(1, 'a') < ROW(1, 'b')) AS lt, (ROW(1, NULL) = ROW(1, NULL)) AS eq, (ROW(1, NULL) IS NOT DISTINCT FROM ROW(1, NULL)) AS nd;

-- Domains with CHECK and NOT NULL constraints, and constraints added later.
CREATE DOMAIN pgf_posint AS int CHECK (VALUE > 0);
CREATE DOMAIN pgf_email AS text NOT NULL CHECK (VALUE ~ '^[^@]+@[^@]+$');
CREATE TABLE pgf_dom (id pgf_posint PRIMARY KEY, email pgf_email);
INSERT INTO pgf_dom VALUES (1, 'a@b.c'), (50, 'x@y.z');
INSERT INTO pgf_dom VALUES (0, 'x@y');
INSERT INTO pgf_dom VALUES (2, 'bad');
INSERT INTO pgf_dom VALUES (3, NULL);
UPDATE pgf_dom SET id = -1 WHERE id = 1;
ALTER DOMAIN pgf_posint ADD CONSTRAINT pgf_small CHECK (VALUE < 100);
INSERT INTO pgf_dom VALUES (150, 'q@r');
ALTER DOMAIN pgf_posint ADD CONSTRAINT pgf_tiny CHECK (VALUE < 10);
SELECT * FROM pgf_dom ORDER BY id;
SELECT 5::pgf_posint + 1, (-5)::pgf_posint;

-- Network address types: inet, cidr and macaddr.
CREATE TABLE pgf_net (id int, addr inet, net cidr, mac macaddr);
INSERT INTO pgf_net VALUES (1, '192.168.1.10/24', '192.168.1.0/24', '08:00:2b:01:02:03'),
  (2, '10.0.0.1', '10.0.0.0/8', '08-00-2b-01-02-04'), (3, '::1', '2001:db8::/32', NULL),
  (4, '2001:db8::5/64', '2001:db8:1::/48', '0800.2b01.0205');
SELECT id, addr, net, mac, host(addr), masklen(addr), network(addr), family(addr), abbrev(net), broadcast(addr),
       addr << net AS in_net, addr + 1 AS next, trunc(mac) AS mac_trunc
FROM pgf_net ORDER BY id;
SELECT id, addr FROM pgf_net ORDER BY addr, id;
SELECT id FROM pgf_net WHERE addr <<= '192.168.0.0/16' OR addr << '::/0' ORDER BY id;
SELECT inet '10.1.2.3' - inet '10.1.0.0', inet_merge('10.0.0.1', '10.0.1.1'), set_masklen(inet '10.1.2.3/8', 16);
INSERT INTO pgf_net VALUES (5, '1.2.3.4', '10.1.2.3/8', NULL);

-- Bit strings and full-text search types (without an index).
CREATE TABLE pgf_misc (id int, flags bit(4), vb varbit(8), doc tsvector, title text);
INSERT INTO pgf_misc VALUES (1, B'1010', B'11', to_tsvector('english', 'The quick brown foxes jumped'), 'foxes'),
  (2, B'0110', B'1', to_tsvector('english', 'A lazy dog sleeps all day'), 'dogs'),
  (3, '1111', '', 'a:1 b:2', 'plain');
SELECT id, flags, vb, flags & B'0011' AS masked, flags | B'0001' AS ored, ~flags AS inv, flags >> 1 AS shifted,
       get_bit(flags, 0), length(vb), doc FROM pgf_misc ORDER BY id;
SELECT id FROM pgf_misc WHERE doc @@ to_tsquery('english', 'fox & jump') ORDER BY id;
SELECT id, ts_rank(doc, to_tsquery('english', 'dog | fox'))::numeric(6, 4) FROM pgf_misc ORDER BY id;
SELECT ts_headline('english', 'The quick brown fox', to_tsquery('english', 'fox')), plainto_tsquery('english', 'lazy dogs');

-- CHECK, NOT NULL, UNIQUE (single, multi-column, NULLS NOT DISTINCT) and PRIMARY KEY.
CREATE TABLE pgf_items (
  id int PRIMARY KEY,
  sku text NOT NULL UNIQUE,
  price numeric CHECK (price >= 0),
  qty int NOT NULL DEFAULT 0,
  shelf text,
  bin int,
  UNIQUE (shelf, bin),
  CONSTRAINT pgf_items_qty_price CHECK (qty = 0 OR price IS NOT NULL)
);
INSERT INTO pgf_items VALUES (1, 'A1', 9.99, 5, 's1', 1), (2, 'A2', 0, 0, 's1', 2), (3, 'A3', NULL, 0, NULL, NULL),
  (4, 'A4', NULL, 0, NULL, NULL), (5, 'A5', 1, 1, 's2', NULL), (6, 'A6', 1, 1, 's2', NULL);
INSERT INTO pgf_items VALUES (7, 'A7', -1, 0, NULL, NULL);
INSERT INTO pgf_items VALUES (7, NULL, 1, 0, NULL, NULL);
INSERT INTO pgf_items VALUES (7, 'A1', 1, 0, NULL, NULL);
INSERT INTO pgf_items VALUES (7, 'A7', 1, 0, 's1', 1);
INSERT INTO pgf_items VALUES (7, 'A7', NULL, 3, NULL, NULL);
INSERT INTO pgf_items VALUES (1, 'A7', 1, 0, NULL, NULL);
INSERT INTO pgf_items (id, sku) VALUES (7, 'A7');
UPDATE pgf_items SET sku = 'A2' WHERE id = 1;
UPDATE pgf_items SET qty = NULL WHERE id = 2;
UPDATE pgf_items SET bin = 2 WHERE id = 1;
UPDATE pgf_items SET sku = 'A1' WHERE id = 1;
SELECT * FROM pgf_items ORDER BY id;
ALTER TABLE pgf_items ADD CONSTRAINT pgf_qty_small CHECK (qty < 3) NOT VALID;
INSERT INTO pgf_items VALUES (8, 'A8', 1, 4, NULL, NULL);
ALTER TABLE pgf_items VALIDATE CONSTRAINT pgf_qty_small;
UPDATE pgf_items SET qty = 2 WHERE id = 1;
ALTER TABLE pgf_items VALIDATE CONSTRAINT pgf_qty_small;
ALTER TABLE pgf_items ADD CONSTRAINT pgf_sku_upper CHECK (sku = upper(sku));
ALTER TABLE pgf_items ALTER COLUMN shelf SET NOT NULL;
ALTER TABLE pgf_items ADD CONSTRAINT pgf_items_price_key UNIQUE (price);
ALTER TABLE pgf_items ADD CONSTRAINT pgf_items_sku_shelf UNIQUE (sku, shelf);
INSERT INTO pgf_items VALUES (9, 'a9', 1, 0, NULL, NULL);
SELECT conname, contype, convalidated FROM pg_constraint WHERE conrelid = 'pgf_items'::regclass ORDER BY conname;
CREATE TABLE pgf_nnd (a int, b int, UNIQUE NULLS NOT DISTINCT (a, b));
INSERT INTO pgf_nnd VALUES (1, NULL), (NULL, NULL), (2, 2);
INSERT INTO pgf_nnd VALUES (1, NULL);
INSERT INTO pgf_nnd VALUES (NULL, NULL);
SELECT * FROM pgf_nnd ORDER BY a NULLS FIRST, b;
CREATE TABLE pgf_pk2 (a int, b text, v int, PRIMARY KEY (a, b));
INSERT INTO pgf_pk2 VALUES (1, 'x', 1), (1, 'y', 2), (2, 'x', 3);
INSERT INTO pgf_pk2 VALUES (1, 'x', 4);
INSERT INTO pgf_pk2 VALUES (NULL, 'x', 4);
SELECT * FROM pgf_pk2 WHERE a = 1 ORDER BY b;

-- Exclusion constraint backed by a btree index.
CREATE TABLE pgf_excl (k int, v text, EXCLUDE USING btree (k WITH =));
INSERT INTO pgf_excl VALUES (1, 'a'), (2, 'b');
INSERT INTO pgf_excl VALUES (1, 'c');
UPDATE pgf_excl SET k = 2 WHERE k = 1;
SELECT * FROM pgf_excl ORDER BY k;

-- Foreign keys: CASCADE, SET NULL, SET NULL (column), SET DEFAULT, RESTRICT, MATCH FULL, self-reference.
CREATE TABLE pgf_dept (id int PRIMARY KEY, code text UNIQUE, name text);
CREATE TABLE pgf_emp (
  id int PRIMARY KEY,
  dept_id int REFERENCES pgf_dept ON DELETE CASCADE,
  dept_code text REFERENCES pgf_dept (code) ON UPDATE CASCADE ON DELETE SET NULL,
  mentor int REFERENCES pgf_emp ON DELETE SET NULL,
  backup_dept int DEFAULT 1 REFERENCES pgf_dept ON DELETE SET DEFAULT
);
INSERT INTO pgf_dept VALUES (1, 'ENG', 'Engineering'), (2, 'OPS', 'Operations'), (3, 'HR', 'People'), (4, 'FIN', 'Finance');
INSERT INTO pgf_emp VALUES (1, 1, 'ENG', NULL, 1), (2, 1, 'OPS', 1, 4), (3, 2, 'OPS', 1, 4), (4, 3, 'ENG', 3, 2), (5, 1, 'HR', 2, 1);
INSERT INTO pgf_emp VALUES (6, 9, NULL, NULL, 1);
INSERT INTO pgf_emp VALUES (6, 1, 'XXX', NULL, 1);
UPDATE pgf_dept SET code = 'OPX' WHERE id = 2;
DELETE FROM pgf_dept WHERE id = 3;
DELETE FROM pgf_dept WHERE id = 4;
DELETE FROM pgf_emp WHERE id = 1;
SELECT * FROM pgf_emp ORDER BY id;
UPDATE pgf_dept SET id = 10 WHERE id = 1;
DELETE FROM pgf_dept WHERE id = 1;
SELECT id FROM pgf_emp ORDER BY id;
CREATE TABLE pgf_badge (id int PRIMARY KEY, emp_id int REFERENCES pgf_emp ON DELETE RESTRICT);
INSERT INTO pgf_badge VALUES (1, 2);
DELETE FROM pgf_emp WHERE id = 2;
DELETE FROM pgf_dept WHERE id = 2;
SELECT (SELECT count(*) FROM pgf_dept) AS depts, (SELECT count(*) FROM pgf_emp) AS emps;
CREATE TABLE pgf_tenant_dept (tenant int, dept int, PRIMARY KEY (tenant, dept));
CREATE TABLE pgf_tenant_user (id int PRIMARY KEY, tenant int NOT NULL, dept int,
  FOREIGN KEY (tenant, dept) REFERENCES pgf_tenant_dept ON DELETE SET NULL (dept));
INSERT INTO pgf_tenant_dept VALUES (1, 1), (1, 2);
INSERT INTO pgf_tenant_user VALUES (1, 1, 1), (2, 1, 2), (3, 1, NULL);
DELETE FROM pgf_tenant_dept WHERE dept = 1;
SELECT * FROM pgf_tenant_user ORDER BY id;
CREATE TABLE pgf_full_child (id int PRIMARY KEY, tenant int, dept int,
  FOREIGN KEY (tenant, dept) REFERENCES pgf_tenant_dept MATCH FULL);
INSERT INTO pgf_full_child VALUES (1, 1, 2), (2, NULL, NULL);
INSERT INTO pgf_full_child VALUES (3, 1, NULL);
SELECT * FROM pgf_full_child ORDER BY id;
ALTER TABLE pgf_tenant_user ADD CONSTRAINT pgf_tu_self FOREIGN KEY (id) REFERENCES pgf_full_child;

-- Deferrable constraints: a deferred foreign key and a deferrable unique constraint.
CREATE TABLE pgf_dparent (id int PRIMARY KEY);
CREATE TABLE pgf_dchild (id int PRIMARY KEY, pid int REFERENCES pgf_dparent DEFERRABLE INITIALLY DEFERRED);
BEGIN;
INSERT INTO pgf_dchild VALUES (1, 100);
INSERT INTO pgf_dparent VALUES (100);
COMMIT;
BEGIN;
INSERT INTO pgf_dchild VALUES (2, 200);
COMMIT;
BEGIN;
SET CONSTRAINTS ALL IMMEDIATE;
INSERT INTO pgf_dchild VALUES (3, 300);
ROLLBACK;
SELECT * FROM pgf_dchild ORDER BY id;
CREATE TABLE pgf_rank (id int PRIMARY KEY, pos int UNIQUE DEFERRABLE INITIALLY IMMEDIATE);
INSERT INTO pgf_rank VALUES (1, 1), (2, 2), (3, 3);
UPDATE pgf_rank SET pos = pos + 1;
SELECT * FROM pgf_rank ORDER BY id;
BEGIN;
SET CONSTRAINTS pgf_rank_pos_key DEFERRED;
UPDATE pgf_rank SET pos = 2 WHERE id = 3;
UPDATE pgf_rank SET pos = 4 WHERE id = 1;
COMMIT;
SELECT * FROM pgf_rank ORDER BY id;
BEGIN;
SET CONSTRAINTS ALL DEFERRED;
UPDATE pgf_rank SET pos = 3 WHERE id = 1;
SELECT id, pos FROM pgf_rank ORDER BY id;
COMMIT;
SELECT * FROM pgf_rank ORDER BY id;
INSERT INTO pgf_rank VALUES (4, 4);

-- Range partitioning with a default partition, pruning and row movement on UPDATE.
CREATE TABLE pgf_sales (id int, sold date, region text, amount numeric, PRIMARY KEY (id, sold)) PARTITION BY RANGE (sold);
CREATE TABLE pgf_sales_2023 PARTITION OF pgf_sales FOR VALUES FROM ('2023-01-01') TO ('2024-01-01');
CREATE TABLE pgf_sales_2024 PARTITION OF pgf_sales FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE pgf_sales_other PARTITION OF pgf_sales DEFAULT;
INSERT INTO pgf_sales SELECT g, date '2023-06-01' + g * 30, (ARRAY['north', 'south', 'east'])[g % 3 + 1], g * 10
FROM generate_series(1, 24) g;
SELECT tableoid::regclass::text AS part, count(*), sum(amount), min(sold), max(sold) FROM pgf_sales GROUP BY 1 ORDER BY 1;
SELECT count(*) FROM pgf_sales WHERE sold < '2024-01-01';
SELECT count(*) FROM pgf_sales_2024 WHERE region = 'north';
UPDATE pgf_sales SET sold = '2030-01-01' WHERE id = 1;
UPDATE pgf_sales SET sold = '2024-06-15' WHERE id = 24;
UPDATE pgf_sales SET amount = amount + 1 WHERE sold >= '2024-01-01';
SELECT id, tableoid::regclass::text AS part, sold, amount FROM pgf_sales WHERE id IN (1, 2, 23, 24) ORDER BY id;
DELETE FROM pgf_sales WHERE sold > '2025-06-01';
SELECT tableoid::regclass::text AS part, count(*) FROM pgf_sales GROUP BY 1 ORDER BY 1;
INSERT INTO pgf_sales VALUES (1, '2023-07-01', 'west', 5);
CREATE TABLE pgf_sales_2022 (LIKE pgf_sales INCLUDING ALL);
INSERT INTO pgf_sales_2022 VALUES (100, '2022-03-01', 'north', 1), (101, '2022-09-01', 'south', 2);
ALTER TABLE pgf_sales ATTACH PARTITION pgf_sales_2022 FOR VALUES FROM ('2022-01-01') TO ('2023-01-01');
CREATE TABLE pgf_sales_bad (LIKE pgf_sales INCLUDING ALL);
INSERT INTO pgf_sales_bad VALUES (200, '2021-03-01', 'north', 1);
ALTER TABLE pgf_sales ATTACH PARTITION pgf_sales_bad FOR VALUES FROM ('2020-01-01') TO ('2021-01-01');
ALTER TABLE pgf_sales DETACH PARTITION pgf_sales_2023;
SELECT count(*), sum(amount) FROM pgf_sales;
SELECT count(*) FROM pgf_sales_2023;
ALTER TABLE pgf_sales ATTACH PARTITION pgf_sales_2023 FOR VALUES FROM ('2023-01-01') TO ('2024-01-01');
SELECT count(*), sum(amount) FROM pgf_sales;

-- List and hash partitioning, partition-wise aggregate and join.
CREATE TABLE pgf_orders (id int, region text, total numeric) PARTITION BY LIST (region);
CREATE TABLE pgf_orders_ns PARTITION OF pgf_orders FOR VALUES IN ('north', 'south');
CREATE TABLE pgf_orders_e PARTITION OF pgf_orders FOR VALUES IN ('east');
INSERT INTO pgf_orders SELECT id, region, amount FROM pgf_sales WHERE region <> 'west';
INSERT INTO pgf_orders VALUES (999, 'west', 1);
CREATE TABLE pgf_orders_rest PARTITION OF pgf_orders DEFAULT;
INSERT INTO pgf_orders VALUES (999, 'west', 1), (998, NULL, 2);
SELECT tableoid::regclass::text AS part, region, count(*) FROM pgf_orders GROUP BY 1, 2 ORDER BY 1, 2;
UPDATE pgf_orders SET region = 'east' WHERE id = 999;
SELECT tableoid::regclass::text FROM pgf_orders WHERE id = 999;
CREATE TABLE pgf_hashed (id int PRIMARY KEY, v text) PARTITION BY HASH (id);
CREATE TABLE pgf_hashed_0 PARTITION OF pgf_hashed FOR VALUES WITH (MODULUS 3, REMAINDER 0);
CREATE TABLE pgf_hashed_1 PARTITION OF pgf_hashed FOR VALUES WITH (MODULUS 3, REMAINDER 1);
CREATE TABLE pgf_hashed_2 PARTITION OF pgf_hashed FOR VALUES WITH (MODULUS 3, REMAINDER 2);
INSERT INTO pgf_hashed SELECT g, 'v' || g FROM generate_series(1, 60) g;
SELECT tableoid::regclass::text AS part, count(*), min(id), sum(id) FROM pgf_hashed GROUP BY 1 ORDER BY 1;
SELECT v FROM pgf_hashed WHERE id = 42;
INSERT INTO pgf_hashed VALUES (42, 'dup');
CREATE TABLE pgf_hashed2 (id int, w int) PARTITION BY HASH (id);
CREATE TABLE pgf_hashed2_0 PARTITION OF pgf_hashed2 FOR VALUES WITH (MODULUS 3, REMAINDER 0);
CREATE TABLE pgf_hashed2_1 PARTITION OF pgf_hashed2 FOR VALUES WITH (MODULUS 3, REMAINDER 1);
CREATE TABLE pgf_hashed2_2 PARTITION OF pgf_hashed2 FOR VALUES WITH (MODULUS 3, REMAINDER 2);
INSERT INTO pgf_hashed2 SELECT g, g * 2 FROM generate_series(1, 60, 2) g;
SET enable_partitionwise_aggregate = on;
SET enable_partitionwise_join = on;
SELECT region, count(*), sum(total) FROM pgf_orders GROUP BY region ORDER BY region;
SELECT id % 3 AS bucket, count(*), sum(length(v)) FROM pgf_hashed GROUP BY id % 3 ORDER BY 1;
SELECT count(*), sum(h.id + h2.w) FROM pgf_hashed h JOIN pgf_hashed2 h2 USING (id);
SELECT h.id, h.v, h2.w FROM pgf_hashed h JOIN pgf_hashed2 h2 ON h.id = h2.id WHERE h.id < 10 ORDER BY h.id;
RESET enable_partitionwise_aggregate;
RESET enable_partitionwise_join;

-- Table inheritance: queries over parent and children, ONLY, inherited columns.
CREATE TABLE pgf_vehicle (id int PRIMARY KEY, name text, wheels int);
CREATE TABLE pgf_car (doors int) INHERITS (pgf_vehicle);
CREATE TABLE pgf_bike (gears int) INHERITS (pgf_vehicle);
INSERT INTO pgf_vehicle VALUES (1, 'cart', 2);
INSERT INTO pgf_car VALUES (2, 'sedan', 4, 4), (3, 'coupe', 4, 2);
INSERT INTO pgf_bike VALUES (4, 'bmx', 2, 1), (5, 'tandem', 2, 21);
SELECT tableoid::regclass::text AS tbl, id, name, wheels FROM pgf_vehicle ORDER BY id;
SELECT count(*) FROM ONLY pgf_vehicle;
UPDATE pgf_vehicle SET wheels = wheels + 1 WHERE name LIKE 't%' OR name = 'cart';
DELETE FROM pgf_vehicle WHERE id = 3;
ALTER TABLE pgf_vehicle ADD COLUMN color text DEFAULT 'red';
UPDATE pgf_car SET color = 'blue';
SELECT * FROM pgf_car ORDER BY id;
SELECT tableoid::regclass::text AS tbl, id, name, wheels, color FROM pgf_vehicle ORDER BY id;
SELECT name FROM pgf_vehicle v WHERE EXISTS (SELECT 1 FROM pgf_bike b WHERE b.id = v.id AND b.gears > 5);

-- MERGE with conditional actions, DO NOTHING, a subquery source and a duplicate-source error.
CREATE TABLE pgf_stock (item text PRIMARY KEY, qty int NOT NULL);
CREATE TABLE pgf_delivery (item text, qty int);
INSERT INTO pgf_stock VALUES ('apple', 10), ('pear', 5), ('plum', 1), ('fig', 3);
INSERT INTO pgf_delivery VALUES ('apple', 5), ('pear', -5), ('kiwi', 7), ('plum', 0), ('lime', -1);
MERGE INTO pgf_stock s USING pgf_delivery d ON s.item = d.item
WHEN MATCHED AND s.qty + d.qty <= 0 THEN DELETE
WHEN MATCHED AND d.qty = 0 THEN DO NOTHING
WHEN MATCHED THEN UPDATE SET qty = s.qty + d.qty
WHEN NOT MATCHED AND d.qty > 0 THEN INSERT VALUES (d.item, d.qty);
SELECT * FROM pgf_stock ORDER BY item;
MERGE INTO pgf_stock s USING (SELECT 'fig' AS item, 2 AS n UNION ALL SELECT 'date', 4) src ON s.item = src.item
WHEN MATCHED THEN UPDATE SET qty = s.qty * src.n
WHEN NOT MATCHED THEN INSERT (item, qty) VALUES (src.item, src.n);
SELECT * FROM pgf_stock ORDER BY item;
INSERT INTO pgf_delivery VALUES ('apple', 1);
MERGE INTO pgf_stock s USING pgf_delivery d ON s.item = d.item
WHEN MATCHED THEN UPDATE SET qty = s.qty + d.qty;
SELECT * FROM pgf_stock ORDER BY item;
MERGE INTO pgf_sales s USING (VALUES (5, date '2023-11-28', 7)) v(id, sold, a) ON s.id = v.id AND s.sold = v.sold
WHEN MATCHED THEN UPDATE SET amount = amount + v.a;
SELECT amount FROM pgf_sales WHERE id = 5;

-- Generated stored columns.
CREATE TABLE pgf_gen (id int, w numeric, h numeric,
  area numeric GENERATED ALWAYS AS (w * h) STORED,
  label text GENERATED ALWAYS AS ('box ' || id || ': ' || coalesce(w * h, -1)) STORED);
INSERT INTO pgf_gen (id, w, h) VALUES (1, 2, 3), (2, 1.5, 4), (3, NULL, 1);
UPDATE pgf_gen SET w = 10 WHERE id = 1;
INSERT INTO pgf_gen VALUES (4, 1, 1, 5);
INSERT INTO pgf_gen VALUES (4, 1, 1, DEFAULT, DEFAULT);
UPDATE pgf_gen SET area = 1 WHERE id = 1;
SELECT * FROM pgf_gen ORDER BY id;
SELECT id FROM pgf_gen WHERE area > 5 ORDER BY id;

-- Identity columns: ALWAYS and BY DEFAULT, OVERRIDING SYSTEM/USER VALUE, RESTART.
CREATE TABLE pgf_idalways (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text);
CREATE TABLE pgf_iddefault (id bigint GENERATED BY DEFAULT AS IDENTITY (START WITH 100 INCREMENT BY 10) PRIMARY KEY, v text);
INSERT INTO pgf_idalways (v) VALUES ('a'), ('b');
INSERT INTO pgf_idalways VALUES (50, 'c');
INSERT INTO pgf_idalways OVERRIDING SYSTEM VALUE VALUES (50, 'c');
UPDATE pgf_idalways SET id = 7 WHERE v = 'a';
INSERT INTO pgf_iddefault (v) VALUES ('x');
INSERT INTO pgf_iddefault VALUES (7, 'y');
INSERT INTO pgf_iddefault OVERRIDING USER VALUE VALUES (8, 'z');
ALTER TABLE pgf_idalways ALTER COLUMN id RESTART WITH 1000;
INSERT INTO pgf_idalways (v) VALUES ('d');
SELECT * FROM pgf_idalways ORDER BY id;
SELECT * FROM pgf_iddefault ORDER BY id;
ALTER TABLE pgf_iddefault ALTER COLUMN id SET GENERATED ALWAYS;
INSERT INTO pgf_iddefault VALUES (9, 'w');
SELECT pg_get_serial_sequence('pgf_iddefault', 'id');

-- Sequences: nextval/currval/setval, INCREMENT, CYCLE, limits and serial columns.
CREATE SEQUENCE pgf_seq START 5 INCREMENT 5 MAXVALUE 20 CYCLE;
SELECT nextval('pgf_seq'), nextval('pgf_seq'), currval('pgf_seq');
SELECT nextval('pgf_seq'), nextval('pgf_seq'), nextval('pgf_seq'), nextval('pgf_seq');
SELECT setval('pgf_seq', 18);
SELECT nextval('pgf_seq');
SELECT setval('pgf_seq', 10, false);
SELECT nextval('pgf_seq'), lastval();
ALTER SEQUENCE pgf_seq NO CYCLE RESTART WITH 15;
SELECT nextval('pgf_seq'), nextval('pgf_seq');
SELECT nextval('pgf_seq');
CREATE SEQUENCE pgf_seq_desc INCREMENT -2 MINVALUE -9 MAXVALUE 3 START 3;
SELECT nextval('pgf_seq_desc'), nextval('pgf_seq_desc'), nextval('pgf_seq_desc'), nextval('pgf_seq_desc'), nextval('pgf_seq_desc');
CREATE TABLE pgf_serial (id serial PRIMARY KEY, b bigserial, v text);
INSERT INTO pgf_serial (v) VALUES ('one'), ('two');
INSERT INTO pgf_serial (v) SELECT 'gen ' || g FROM generate_series(1, 3) g;
SELECT * FROM pgf_serial ORDER BY id;
SELECT currval('pgf_serial_id_seq'), pg_get_serial_sequence('pgf_serial', 'b');
BEGIN;
SELECT nextval('pgf_seq_desc');
ROLLBACK;
SELECT nextval('pgf_seq_desc');

-- Row and statement triggers, BEFORE and AFTER, with a WHEN condition and skipped rows.
CREATE TABLE pgf_acct (id int PRIMARY KEY, owner text, balance numeric NOT NULL DEFAULT 0, changes int DEFAULT 0);
CREATE TABLE pgf_trig_log (n serial PRIMARY KEY, msg text);
CREATE FUNCTION pgf_log_stmt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO pgf_trig_log (msg) VALUES (TG_WHEN || ' ' || TG_OP || ' ' || TG_LEVEL || ' on ' || TG_TABLE_NAME);
  RETURN NULL;
END $$;
CREATE FUNCTION pgf_before_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    NEW.owner := upper(NEW.owner);
  ELSIF TG_OP = 'UPDATE' THEN
    NEW.changes := OLD.changes + 1;
  ELSIF OLD.balance > 0 THEN
    INSERT INTO pgf_trig_log (msg) VALUES ('BEFORE DELETE skipped id ' || OLD.id);
    RETURN NULL;
  END IF;
  INSERT INTO pgf_trig_log (msg) VALUES ('BEFORE ' || TG_OP || ' ROW id ' || coalesce(NEW.id, OLD.id));
  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
  RETURN NEW;
END $$;
CREATE FUNCTION pgf_after_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO pgf_trig_log (msg) VALUES ('AFTER ' || TG_OP || ' ROW id ' || coalesce(NEW.id, OLD.id)
    || ' ' || coalesce(OLD.balance::text, '-') || ' -> ' || coalesce(NEW.balance::text, '-'));
  RETURN NULL;
END $$;
CREATE FUNCTION pgf_big() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO pgf_trig_log (msg) VALUES ('BIG balance for ' || NEW.owner || ': ' || NEW.balance);
  RETURN NULL;
END $$;
CREATE TRIGGER pgf_acct_bs BEFORE INSERT OR UPDATE OR DELETE ON pgf_acct FOR EACH STATEMENT EXECUTE FUNCTION pgf_log_stmt();
CREATE TRIGGER pgf_acct_as AFTER INSERT OR UPDATE OR DELETE ON pgf_acct FOR EACH STATEMENT EXECUTE FUNCTION pgf_log_stmt();
CREATE TRIGGER pgf_acct_br BEFORE INSERT OR UPDATE OR DELETE ON pgf_acct FOR EACH ROW EXECUTE FUNCTION pgf_before_row();
CREATE TRIGGER pgf_acct_ar AFTER INSERT OR UPDATE OR DELETE ON pgf_acct FOR EACH ROW EXECUTE FUNCTION pgf_after_row();
CREATE TRIGGER pgf_acct_big AFTER UPDATE OF balance ON pgf_acct FOR EACH ROW
  WHEN (NEW.balance > 1000 AND OLD.balance IS DISTINCT FROM NEW.balance) EXECUTE FUNCTION pgf_big();
INSERT INTO pgf_acct (id, owner, balance) VALUES (1, 'ann', 100);
UPDATE pgf_acct SET balance = 2000 WHERE id = 1;
UPDATE pgf_acct SET owner = 'Ann' WHERE id = 1;
DELETE FROM pgf_acct WHERE id = 1;
INSERT INTO pgf_acct (id, owner) VALUES (2, 'bob');
DELETE FROM pgf_acct WHERE id = 2;
SELECT msg FROM pgf_trig_log ORDER BY n;
DELETE FROM pgf_trig_log;
INSERT INTO pgf_acct (id, owner, balance) VALUES (3, 'cid', 5), (4, 'dee', 50), (5, 'eve', 0);
UPDATE pgf_acct SET balance = balance * 100;
SELECT msg FROM pgf_trig_log ORDER BY msg;
SELECT * FROM pgf_acct ORDER BY id;
UPDATE pgf_acct SET balance = balance WHERE id = 99;
ALTER TABLE pgf_acct DISABLE TRIGGER pgf_acct_ar;
DELETE FROM pgf_trig_log;
UPDATE pgf_acct SET balance = 1 WHERE id = 3;
SELECT msg FROM pgf_trig_log ORDER BY n;
ALTER TABLE pgf_acct ENABLE TRIGGER pgf_acct_ar;
CREATE FUNCTION pgf_trunc_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO pgf_trig_log (msg) VALUES ('TRUNCATE ' || TG_TABLE_NAME);
  RETURN NULL;
END $$;
CREATE TRIGGER pgf_acct_trunc BEFORE TRUNCATE ON pgf_acct FOR EACH STATEMENT EXECUTE FUNCTION pgf_trunc_log();
DELETE FROM pgf_trig_log;
TRUNCATE pgf_acct;
SELECT msg FROM pgf_trig_log ORDER BY n;
SELECT count(*) FROM pgf_acct;

-- Transition tables: statement triggers REFERENCING OLD TABLE / NEW TABLE.
CREATE TABLE pgf_ledger (id int PRIMARY KEY, amount numeric);
CREATE TABLE pgf_audit (n serial PRIMARY KEY, op text, cnt int, total numeric, ids text);
CREATE FUNCTION pgf_audit_ins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO pgf_audit (op, cnt, total, ids)
    SELECT TG_OP, count(*), sum(amount), string_agg(id::text, ',' ORDER BY id) FROM new_rows;
  RETURN NULL;
END $$;
CREATE FUNCTION pgf_audit_upd() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO pgf_audit (op, cnt, total, ids)
    SELECT TG_OP, count(*), sum(n.amount - o.amount), string_agg(n.id::text, ',' ORDER BY n.id)
    FROM new_rows n JOIN old_rows o USING (id);
  RETURN NULL;
END $$;
CREATE FUNCTION pgf_audit_del() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO pgf_audit (op, cnt, total, ids)
    SELECT TG_OP, count(*), sum(amount), string_agg(id::text, ',' ORDER BY id) FROM old_rows;
  RETURN NULL;
END $$;
CREATE TRIGGER pgf_ledger_ins AFTER INSERT ON pgf_ledger REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION pgf_audit_ins();
CREATE TRIGGER pgf_ledger_upd AFTER UPDATE ON pgf_ledger REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION pgf_audit_upd();
CREATE TRIGGER pgf_ledger_del AFTER DELETE ON pgf_ledger REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION pgf_audit_del();
INSERT INTO pgf_ledger SELECT g, g * 1.5 FROM generate_series(1, 10) g;
UPDATE pgf_ledger SET amount = amount + 1 WHERE id % 2 = 0;
DELETE FROM pgf_ledger WHERE id > 7;
UPDATE pgf_ledger SET amount = 0 WHERE id > 100;
INSERT INTO pgf_ledger VALUES (20, 1) ON CONFLICT (id) DO NOTHING;
SELECT op, cnt, total, ids FROM pgf_audit ORDER BY n;

-- INSTEAD OF triggers on a view.
CREATE TABLE pgf_acct2 (id int, owner text, balance numeric);
INSERT INTO pgf_acct2 VALUES (1, 'ann', 10), (2, 'ann', 20), (3, 'bob', 5);
CREATE VIEW pgf_owner_totals AS SELECT owner, sum(balance) AS total, count(*) AS accounts FROM pgf_acct2 GROUP BY owner;
CREATE FUNCTION pgf_totals_dml() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO pgf_acct2 VALUES ((SELECT coalesce(max(id), 0) + 1 FROM pgf_acct2), NEW.owner, NEW.total);
    RETURN NEW;
  ELSIF TG_OP = 'UPDATE' THEN
    UPDATE pgf_acct2 SET owner = NEW.owner WHERE owner = OLD.owner;
    RETURN NEW;
  ELSE
    DELETE FROM pgf_acct2 WHERE owner = OLD.owner;
    RETURN OLD;
  END IF;
END $$;
CREATE TRIGGER pgf_totals_io INSTEAD OF INSERT OR UPDATE OR DELETE ON pgf_owner_totals
  FOR EACH ROW EXECUTE FUNCTION pgf_totals_dml();
INSERT INTO pgf_owner_totals (owner, total) VALUES ('cid', 42);
UPDATE pgf_owner_totals SET owner = 'anne' WHERE owner = 'ann';
DELETE FROM pgf_owner_totals WHERE owner = 'bob';
SELECT * FROM pgf_owner_totals ORDER BY owner;
SELECT * FROM pgf_acct2 ORDER BY id;

-- Deferred constraint triggers checked at COMMIT.
CREATE TABLE pgf_pairs (id int PRIMARY KEY, amount numeric);
INSERT INTO pgf_pairs VALUES (1, 100), (2, -100);
CREATE FUNCTION pgf_check_sum() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE s numeric;
BEGIN
  SELECT sum(amount) INTO s FROM pgf_pairs;
  IF s <> 0 THEN
    RAISE EXCEPTION 'pairs do not balance: %', s;
  END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER pgf_pairs_balanced AFTER INSERT OR UPDATE OR DELETE ON pgf_pairs
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pgf_check_sum();
BEGIN;
UPDATE pgf_pairs SET amount = 150 WHERE id = 1;
UPDATE pgf_pairs SET amount = -150 WHERE id = 2;
COMMIT;
BEGIN;
UPDATE pgf_pairs SET amount = 1 WHERE id = 1;
COMMIT;
SELECT * FROM pgf_pairs ORDER BY id;
BEGIN;
INSERT INTO pgf_pairs VALUES (3, 7);
SET CONSTRAINTS pgf_pairs_balanced IMMEDIATE;
ROLLBACK;

-- Row triggers on a partitioned table are cloned to the partitions.
CREATE TABLE pgf_ptrig_log (part text, id int);
CREATE FUNCTION pgf_ptrig() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO pgf_ptrig_log VALUES (TG_TABLE_NAME, NEW.id);
  RETURN NULL;
END $$;
CREATE TRIGGER pgf_hashed_ins AFTER INSERT ON pgf_hashed FOR EACH ROW EXECUTE FUNCTION pgf_ptrig();
INSERT INTO pgf_hashed VALUES (101, 'a'), (102, 'b'), (103, 'c');
SELECT part, id FROM pgf_ptrig_log ORDER BY id;

-- An event trigger recording DDL command tags.
CREATE TABLE pgf_ddl_log (tag text, obj text);
CREATE FUNCTION pgf_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  FOR r IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
    INSERT INTO pgf_ddl_log VALUES (r.command_tag, r.object_identity);
  END LOOP;
END $$;
CREATE EVENT TRIGGER pgf_ddl_trigger ON ddl_command_end EXECUTE FUNCTION pgf_ddl();
CREATE TABLE pgf_ddl_probe (id int PRIMARY KEY);
ALTER TABLE pgf_ddl_probe ADD COLUMN v text;
DROP EVENT TRIGGER pgf_ddl_trigger;
SELECT tag, obj FROM pgf_ddl_log ORDER BY tag, obj;

-- Rules: DO INSTEAD soft delete, DO ALSO logging, conditional DO INSTEAD NOTHING.
CREATE TABLE pgf_docs (id int PRIMARY KEY, title text, deleted bool NOT NULL DEFAULT false);
CREATE TABLE pgf_docs_log (id int, action text);
CREATE RULE pgf_docs_soft_delete AS ON DELETE TO pgf_docs DO INSTEAD UPDATE pgf_docs SET deleted = true WHERE id = OLD.id;
CREATE RULE pgf_docs_log_ins AS ON INSERT TO pgf_docs DO ALSO INSERT INTO pgf_docs_log VALUES (NEW.id, 'insert ' || NEW.title);
CREATE RULE pgf_docs_frozen AS ON UPDATE TO pgf_docs WHERE OLD.title = 'frozen' DO INSTEAD NOTHING;
INSERT INTO pgf_docs (id, title) VALUES (1, 'one'), (2, 'two'), (3, 'frozen');
DELETE FROM pgf_docs WHERE id = 2;
UPDATE pgf_docs SET title = upper(title);
SELECT * FROM pgf_docs ORDER BY id;
SELECT * FROM pgf_docs_log ORDER BY id;
CREATE VIEW pgf_docs_live AS SELECT id, title FROM pgf_docs WHERE NOT deleted;
CREATE RULE pgf_docs_live_ins AS ON INSERT TO pgf_docs_live DO INSTEAD
  INSERT INTO pgf_docs (id, title) VALUES (NEW.id, NEW.title || ' (via view)');
INSERT INTO pgf_docs_live VALUES (4, 'four');
SELECT * FROM pgf_docs_live ORDER BY id;
SELECT rulename FROM pg_rules WHERE tablename LIKE 'pgf_docs%' ORDER BY rulename;

-- Updatable views, WITH LOCAL/CASCADED CHECK OPTION, RETURNING through a view.
CREATE TABLE pgf_tasks (id int PRIMARY KEY, title text, done bool NOT NULL DEFAULT false, prio int);
INSERT INTO pgf_tasks VALUES (1, 'write', false, 3), (2, 'test', false, 5), (3, 'ship', true, 8), (4, 'plan', false, 9);
CREATE VIEW pgf_open_tasks AS SELECT id, title, prio FROM pgf_tasks WHERE NOT done;
INSERT INTO pgf_open_tasks VALUES (10, 'via view', 2);
UPDATE pgf_open_tasks SET prio = 9 WHERE id = 1 RETURNING id, title, prio;
DELETE FROM pgf_open_tasks WHERE id = 2;
DELETE FROM pgf_open_tasks WHERE id = 3;
SELECT * FROM pgf_open_tasks ORDER BY id;
CREATE VIEW pgf_urgent AS SELECT * FROM pgf_tasks WHERE prio >= 5 WITH CHECK OPTION;
INSERT INTO pgf_urgent VALUES (20, 'low', false, 1);
INSERT INTO pgf_urgent VALUES (20, 'high', false, 7);
UPDATE pgf_urgent SET prio = 1 WHERE id = 20;
CREATE VIEW pgf_urgent_open AS SELECT * FROM pgf_urgent WHERE NOT done WITH LOCAL CHECK OPTION;
INSERT INTO pgf_urgent_open VALUES (21, 'done already', true, 9);
INSERT INTO pgf_urgent_open VALUES (22, 'low prio', false, 1);
CREATE VIEW pgf_urgent_open_c AS SELECT * FROM pgf_urgent_open WITH CASCADED CHECK OPTION;
INSERT INTO pgf_urgent_open_c VALUES (23, 'low prio', false, 1);
SELECT * FROM pgf_tasks ORDER BY id;
SELECT table_name, is_updatable, check_option FROM information_schema.views WHERE table_name LIKE 'pgf_urgent%' ORDER BY table_name;

-- Materialized views: CREATE, REFRESH (CONCURRENTLY too), a unique index on a materialized view, WITH NO DATA.
CREATE MATERIALIZED VIEW pgf_task_stats AS SELECT done, count(*) AS n, sum(prio) AS prio_sum FROM pgf_tasks GROUP BY done;
SELECT * FROM pgf_task_stats ORDER BY done;
INSERT INTO pgf_tasks VALUES (30, 'more', true, 1), (31, 'even more', false, 2);
SELECT * FROM pgf_task_stats ORDER BY done;
REFRESH MATERIALIZED VIEW pgf_task_stats;
SELECT * FROM pgf_task_stats ORDER BY done;
CREATE UNIQUE INDEX pgf_task_stats_done ON pgf_task_stats (done);
UPDATE pgf_tasks SET done = true WHERE id = 31;
REFRESH MATERIALIZED VIEW CONCURRENTLY pgf_task_stats;
SELECT * FROM pgf_task_stats ORDER BY done;
INSERT INTO pgf_tasks VALUES (32, 'last', false, 4);
REFRESH MATERIALIZED VIEW pgf_task_stats;
SELECT * FROM pgf_task_stats ORDER BY done;
CREATE MATERIALIZED VIEW pgf_mv_empty AS SELECT id, title FROM pgf_tasks WHERE prio > 8 WITH NO DATA;
SELECT * FROM pgf_mv_empty;
REFRESH MATERIALIZED VIEW pgf_mv_empty;
SELECT * FROM pgf_mv_empty ORDER BY id;

-- Common table expressions: recursive, SEARCH/CYCLE, MATERIALIZED, data-modifying WITH.
CREATE TABLE pgf_tree (id int PRIMARY KEY, parent int REFERENCES pgf_tree, name text);
INSERT INTO pgf_tree VALUES (1, NULL, 'root'), (2, 1, 'a'), (3, 1, 'b'), (4, 2, 'a1'), (5, 2, 'a2'), (6, 4, 'a1x');
WITH RECURSIVE t(id, name, depth, path) AS (
  SELECT id, name, 0, ARRAY[id] FROM pgf_tree WHERE parent IS NULL
  UNION ALL
  SELECT c.id, c.name, t.depth + 1, t.path || c.id FROM pgf_tree c JOIN t ON c.parent = t.id
) SELECT id, repeat('  ', depth) || name AS tree, path FROM t ORDER BY path;
WITH RECURSIVE t AS (
  SELECT id, parent, name FROM pgf_tree WHERE id = 1
  UNION ALL
  SELECT c.id, c.parent, c.name FROM pgf_tree c JOIN t ON c.parent = t.id
) SEARCH BREADTH FIRST BY id SET ord
SELECT name FROM t ORDER BY ord;
CREATE TABLE pgf_edges (src int, dst int);
INSERT INTO pgf_edges VALUES (1, 2), (2, 3), (3, 1), (3, 4);
WITH RECURSIVE g(src, dst) AS (
  SELECT src, dst FROM pgf_edges WHERE src = 1
  UNION ALL
  SELECT e.src, e.dst FROM pgf_edges e JOIN g ON e.src = g.dst
) CYCLE src SET is_cycle USING path
SELECT src, dst, is_cycle, path FROM g ORDER BY path::text;
WITH big AS MATERIALIZED (SELECT id, prio FROM pgf_tasks WHERE prio > 2),
     small AS NOT MATERIALIZED (SELECT id FROM pgf_tasks WHERE prio <= 2)
SELECT (SELECT count(*) FROM big), (SELECT sum(prio) FROM big), (SELECT count(*) FROM small);
CREATE TABLE pgf_tasks_archive (LIKE pgf_tasks);
WITH moved AS (DELETE FROM pgf_tasks WHERE done RETURNING *),
     ins AS (INSERT INTO pgf_tasks_archive SELECT * FROM moved RETURNING id)
SELECT count(*), sum(id) FROM ins;
WITH upd AS (UPDATE pgf_tasks SET prio = prio + 1 WHERE prio < 5 RETURNING id, prio)
SELECT id, prio FROM upd ORDER BY id;
SELECT id, title FROM pgf_tasks_archive ORDER BY id;
SELECT id, title, prio FROM pgf_tasks ORDER BY id;

-- Window functions: ranking, offsets, frames (ROWS, RANGE, GROUPS, EXCLUDE), named windows.
CREATE TABLE pgf_scores (id int, player text, game int, score int);
INSERT INTO pgf_scores VALUES (1, 'ann', 1, 10), (2, 'ann', 2, 30), (3, 'ann', 3, 30), (4, 'bob', 1, 25),
  (5, 'bob', 2, 5), (6, 'bob', 3, 25), (7, 'cid', 1, 40), (8, 'cid', 2, 15), (9, 'cid', 3, 20), (10, 'dee', 1, 0);
SELECT player, game, score,
       row_number() OVER w AS rn, rank() OVER w AS rnk, dense_rank() OVER w AS drnk,
       round((percent_rank() OVER w)::numeric, 3) AS pr, round((cume_dist() OVER w)::numeric, 3) AS cd,
       sum(score) OVER (PARTITION BY player ORDER BY game ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running,
       avg(score) OVER (PARTITION BY player ORDER BY game ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS moving,
       lag(score) OVER g AS prev, lead(score, 1, -1) OVER g AS next, first_value(score) OVER g AS first,
       last_value(score) OVER (g RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS last,
       nth_value(score, 2) OVER (g ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS second
FROM pgf_scores
WINDOW w AS (PARTITION BY player ORDER BY score DESC, game), g AS (PARTITION BY player ORDER BY game)
ORDER BY player, game;
SELECT id, score, ntile(3) OVER (ORDER BY id) AS tile,
       sum(score) OVER (ORDER BY score RANGE BETWEEN 5 PRECEDING AND 5 FOLLOWING) AS near,
       count(*) OVER (ORDER BY score GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW) AS grp,
       sum(score) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE CURRENT ROW) AS neighbours,
       count(*) FILTER (WHERE score > 20) OVER (ORDER BY id) AS high_so_far
FROM pgf_scores ORDER BY id;
SELECT player, sum(score), rank() OVER (ORDER BY sum(score) DESC) FROM pgf_scores GROUP BY player ORDER BY 3, 1;
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY score), percentile_disc(0.25) WITHIN GROUP (ORDER BY score),
       mode() WITHIN GROUP (ORDER BY score), rank(25) WITHIN GROUP (ORDER BY score) FROM pgf_scores;

-- GROUPING SETS, ROLLUP and CUBE.
SELECT player, game, sum(score), count(*), GROUPING(player, game) AS g FROM pgf_scores
GROUP BY GROUPING SETS ((player), (game), ()) ORDER BY g, player, game;
SELECT player, game > 1 AS later, sum(score) FROM pgf_scores WHERE player < 'c'
GROUP BY ROLLUP (player, game > 1) ORDER BY player NULLS LAST, later NULLS LAST;
SELECT player, game, count(*) FROM pgf_scores WHERE player IN ('ann', 'bob') AND game < 3
GROUP BY CUBE (player, game) ORDER BY player NULLS FIRST, game NULLS FIRST;
SELECT player, sum(score) FROM pgf_scores GROUP BY player HAVING sum(score) > 50 ORDER BY player;

-- LATERAL subqueries and functions, DISTINCT ON, set operations, FETCH WITH TIES.
SELECT p.player, top.game, top.score
FROM (SELECT DISTINCT player FROM pgf_scores) p,
     LATERAL (SELECT game, score FROM pgf_scores s WHERE s.player = p.player ORDER BY score DESC, game LIMIT 2) top
ORDER BY p.player, top.score DESC, top.game;
SELECT p.player, x.best FROM (VALUES ('ann'), ('zed')) p(player)
LEFT JOIN LATERAL (SELECT max(score) AS best FROM pgf_scores s WHERE s.player = p.player) x ON true ORDER BY p.player;
SELECT s.id, g FROM pgf_scores s, LATERAL generate_series(1, s.game) g WHERE s.player = 'bob' ORDER BY s.id, g;
SELECT DISTINCT ON (player) player, game, score FROM pgf_scores ORDER BY player, score DESC, game;
SELECT player FROM pgf_scores WHERE score > 20 UNION SELECT player FROM pgf_scores WHERE game = 1 ORDER BY 1;
SELECT player FROM pgf_scores INTERSECT SELECT player FROM pgf_scores WHERE score = 0 ORDER BY 1;
SELECT player FROM pgf_scores EXCEPT SELECT player FROM pgf_scores WHERE score < 10 ORDER BY 1;
SELECT id, score FROM pgf_scores ORDER BY score DESC FETCH FIRST 3 ROWS WITH TIES;
SELECT id, score FROM pgf_scores ORDER BY score, id OFFSET 2 LIMIT 3;
SELECT player, (SELECT max(score) FROM pgf_scores s2 WHERE s2.player = s1.player) FROM pgf_scores s1 WHERE game = 1 ORDER BY 1;
SELECT count(DISTINCT player), count(DISTINCT score) FROM pgf_scores;

-- Large objects (pg_largeobject): create, write, read, truncate, unlink.
SELECT lo_create(424242);
SELECT lo_put(424242, 0, 'hello large object');
SELECT lo_get(424242), lo_get(424242, 6, 5);
SELECT lo_put(424242, 100000, '\x01');
SELECT length(lo_get(424242)), md5(lo_get(424242));
BEGIN;
SELECT lo_open(424242, 393216) AS fd \gset
SELECT lo_lseek(:fd, 0, 2), lo_truncate(:fd, 5), lo_close(:fd);
COMMIT;
SELECT lo_get(424242);
SELECT lo_from_bytea(424243, '\x0102');
SELECT count(*) FROM pg_largeobject_metadata WHERE oid IN (424242, 424243);
SELECT lo_unlink(424242), lo_unlink(424243);
SELECT lo_get(424242);

-- COPY: FROM STDIN (text, CSV with header, options, WHERE), TO STDOUT (table and query), errors.
CREATE TABLE pgf_copy (id int PRIMARY KEY, name text, price numeric, tags text[], note text);
COPY pgf_copy FROM STDIN WITH (FORMAT csv, HEADER true);
id,name,price,tags,note
1,apple,1.50,"{red,green}","has, comma"
2,"quoted ""name""",2,{},
3,banana,0.25,{yellow},"multi
line"
\.
COPY pgf_copy (id, name) FROM STDIN;
4	tab\ttext
\.
COPY pgf_copy FROM STDIN WITH (FORMAT csv, NULL 'NULL', DELIMITER ';');
5;NULL;NULL;NULL;x
\.
COPY pgf_copy FROM STDIN WITH (FORMAT csv) WHERE id < 10;
6,six,6,{},
60,sixty,60,{},
\.
COPY (SELECT * FROM pgf_copy ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER);
COPY (SELECT id, name, note FROM pgf_copy ORDER BY id) TO STDOUT;
COPY (SELECT id, note FROM pgf_copy WHERE id < 3 ORDER BY id) TO STDOUT WITH (FORMAT csv, FORCE_QUOTE *, DELIMITER '|');
CREATE TABLE pgf_copy_one AS SELECT * FROM pgf_copy WHERE id = 1;
COPY pgf_copy_one TO STDOUT WITH (FORMAT csv, HEADER);
COPY pgf_copy_one (name, price) TO STDOUT;
COPY pgf_copy FROM STDIN WITH (FORMAT csv);
7,ok,1,{},
x,bad,1,{},
\.
SELECT count(*), sum(price) FROM pgf_copy;
BEGIN;
CREATE TABLE pgf_copy_frozen (id int, v text);
COPY pgf_copy_frozen FROM STDIN WITH (FREEZE);
1	a
2	b
\.
COMMIT;
SELECT * FROM pgf_copy_frozen ORDER BY id;

-- LISTEN/NOTIFY with payloads inside transactions and the notification queue.
LISTEN pgf_channel;
SELECT pg_listening_channels();
UNLISTEN pgf_channel;
BEGIN;
NOTIFY pgf_channel, 'payload inside a transaction';
SELECT pg_notify('pgf_channel', 'second payload');
COMMIT;
BEGIN;
NOTIFY pgf_channel, 'rolled back';
ROLLBACK;
SELECT pg_notification_queue_usage() < 0.01 AS queue_small;
SELECT count(*) FROM pg_listening_channels();

-- Advisory locks: session and transaction level, shared and exclusive.
SELECT pg_advisory_lock(4242);
SELECT pg_try_advisory_lock(4242);
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SELECT pg_advisory_unlock(4242), pg_advisory_unlock(4242);
SELECT pg_advisory_unlock(4242);
BEGIN;
SELECT pg_try_advisory_xact_lock(1, 2);
SELECT pg_advisory_xact_lock_shared(7);
SELECT objid, mode FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() ORDER BY objid, mode;
COMMIT;
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SELECT pg_advisory_lock_shared(5), pg_try_advisory_lock_shared(5), pg_advisory_unlock_all();
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();

-- Collations: COLLATE "C", ICU collations, a nondeterministic collation (no index), collated indexes.
CREATE TABLE pgf_words (id int PRIMARY KEY, w text);
INSERT INTO pgf_words VALUES (1, 'apple'), (2, 'Banana'), (3, 'cherry'), (4, 'Äpfel'), (5, 'banana'), (6, '_under'),
  (7, 'Zebra'), (8, '123'), (9, 'épée'), (10, 'BANANA');
SELECT w FROM pgf_words ORDER BY w COLLATE "C", id;
SELECT w FROM pgf_words WHERE w COLLATE "C" > 'Z' ORDER BY w COLLATE "C";
SELECT count(*) > 0 AS has_icu FROM pg_collation WHERE collprovider = 'i';
SELECT count(*) FROM pg_collation WHERE collname IN ('und-x-icu', 'de-x-icu', 'sv-x-icu');
SELECT w FROM pgf_words ORDER BY w COLLATE "und-x-icu", id;
SELECT w FROM pgf_words ORDER BY w COLLATE "sv-x-icu", id;
SELECT 'a' < 'B' COLLATE "C" AS c_lt, 'a' < 'B' COLLATE "und-x-icu" AS icu_lt, upper('épée' COLLATE "und-x-icu");
CREATE COLLATION pgf_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
SELECT id FROM pgf_words WHERE w = 'BANANA' COLLATE pgf_ci ORDER BY id;
SELECT count(DISTINCT w COLLATE pgf_ci) FROM pgf_words;
SELECT w FROM pgf_words WHERE w > 'B' COLLATE pgf_ci AND w < 'C' COLLATE pgf_ci ORDER BY id;
CREATE INDEX pgf_words_c ON pgf_words (w COLLATE "C");
CREATE INDEX pgf_words_icu ON pgf_words (w COLLATE "und-x-icu");
SET enable_seqscan = off;
SELECT w FROM pgf_words WHERE w COLLATE "C" < 'a' ORDER BY w COLLATE "C";
SELECT w FROM pgf_words WHERE w COLLATE "und-x-icu" > 'b' ORDER BY w COLLATE "und-x-icu", id;
SELECT w FROM pgf_words WHERE w COLLATE "C" = 'banana';
RESET enable_seqscan;

-- Prepared statements: PREPARE/EXECUTE with custom and generic plans, DEALLOCATE.
PREPARE pgf_q(text) AS SELECT id, w FROM pgf_words WHERE w = $1;
EXECUTE pgf_q('apple');
PREPARE pgf_ins(int, text) AS INSERT INTO pgf_words VALUES ($1, $2);
EXECUTE pgf_ins(100, 'p100');
EXECUTE pgf_ins(101, 'p101');
EXECUTE pgf_ins(102, 'p102');
EXECUTE pgf_ins(103, 'p103');
EXECUTE pgf_ins(104, 'p104');
EXECUTE pgf_ins(105, 'p105');
EXECUTE pgf_ins(106, 'p106');
EXECUTE pgf_ins(100, 'again');
SET plan_cache_mode = force_generic_plan;
EXECUTE pgf_q('p105');
PREPARE pgf_upd(int) AS UPDATE pgf_words SET w = w || '!' WHERE id = $1 RETURNING w;
EXECUTE pgf_upd(101);
EXECUTE pgf_upd(101);
RESET plan_cache_mode;
SELECT name, parameter_types::text FROM pg_prepared_statements ORDER BY name;
DEALLOCATE pgf_q;
SELECT count(*) FROM pg_prepared_statements;
DEALLOCATE ALL;
SELECT count(*) FROM pgf_words WHERE id >= 100;

-- Savepoints: nested, ROLLBACK TO after an error, RELEASE.
CREATE TABLE pgf_sp (id int PRIMARY KEY, v text);
BEGIN;
INSERT INTO pgf_sp VALUES (1, 'a');
SAVEPOINT s1;
INSERT INTO pgf_sp VALUES (2, 'b');
SAVEPOINT s2;
INSERT INTO pgf_sp VALUES (3, 'c');
ROLLBACK TO SAVEPOINT s2;
UPDATE pgf_sp SET v = 'B' WHERE id = 2;
SAVEPOINT s3;
INSERT INTO pgf_sp VALUES (1, 'dup');
SELECT 1;
ROLLBACK TO s3;
INSERT INTO pgf_sp VALUES (4, 'd');
RELEASE SAVEPOINT s1;
SELECT * FROM pgf_sp ORDER BY id;
COMMIT;
SELECT * FROM pgf_sp ORDER BY id;
BEGIN;
SAVEPOINT s;
DELETE FROM pgf_sp;
UPDATE pgf_sp SET v = 'gone';
ROLLBACK TO s;
UPDATE pgf_sp SET v = v || '+' WHERE id = 4;
SAVEPOINT t;
UPDATE pgf_sp SET v = v || '+' WHERE id = 4;
ROLLBACK TO t;
SELECT * FROM pgf_sp ORDER BY id;
ROLLBACK;
SELECT * FROM pgf_sp ORDER BY id;

-- Row-level security: a policy for a role, USING and WITH CHECK.
CREATE ROLE pgf_role;
CREATE TABLE pgf_notes (id int PRIMARY KEY, owner name, body text, public bool NOT NULL DEFAULT false);
INSERT INTO pgf_notes VALUES (1, 'someone', 'private', false), (2, 'someone', 'shared', true), (3, 'pgf_role', 'own', false);
ALTER TABLE pgf_notes ENABLE ROW LEVEL SECURITY;
CREATE POLICY pgf_own ON pgf_notes FOR ALL TO pgf_role USING (owner = current_user OR public) WITH CHECK (owner = current_user);
GRANT SELECT, INSERT, UPDATE, DELETE ON pgf_notes TO pgf_role;
SET ROLE pgf_role;
SELECT id, body FROM pgf_notes ORDER BY id;
INSERT INTO pgf_notes VALUES (10, 'pgf_role', 'mine');
INSERT INTO pgf_notes VALUES (11, 'someone', 'forged');
UPDATE pgf_notes SET body = body || ' (edited)' WHERE owner = current_user;
UPDATE pgf_notes SET owner = 'pgf_role' WHERE id = 2;
UPDATE pgf_notes SET body = 'hacked' WHERE id = 1;
DELETE FROM pgf_notes WHERE id = 1;
SELECT id, body FROM pgf_notes ORDER BY id;
SELECT count(*) FROM pgf_notes;
RESET ROLE;
SELECT * FROM pgf_notes ORDER BY id;

-- Column privileges: GRANT SELECT/UPDATE on some columns only.
CREATE TABLE pgf_salary (id int, name text, salary numeric);
INSERT INTO pgf_salary VALUES (1, 'ann', 100), (2, 'bob', 200);
GRANT SELECT (id, name), UPDATE (name) ON pgf_salary TO pgf_role;
SET ROLE pgf_role;
SELECT id, name FROM pgf_salary ORDER BY id;
SELECT salary FROM pgf_salary WHERE id = 1;
SELECT * FROM pgf_salary;
UPDATE pgf_salary SET name = upper(name) WHERE id = 1;
UPDATE pgf_salary SET salary = 0 WHERE id = 1;
INSERT INTO pgf_salary (id, name) VALUES (3, 'cid');
RESET ROLE;
SELECT * FROM pgf_salary ORDER BY id;
SELECT has_column_privilege('pgf_role', 'pgf_salary', 'salary', 'SELECT') AS sal,
       has_column_privilege('pgf_role', 'pgf_salary', 'name', 'UPDATE') AS name_upd,
       has_table_privilege('pgf_role', 'pgf_salary', 'SELECT') AS tbl;

-- Temporary, unlogged and CREATE TABLE AS / SELECT INTO tables; TRUNCATE RESTART IDENTITY.
CREATE TEMP TABLE pgf_tmp (id int PRIMARY KEY, v text) ON COMMIT DELETE ROWS;
BEGIN;
INSERT INTO pgf_tmp VALUES (1, 'a'), (2, 'b');
SELECT count(*) FROM pgf_tmp;
COMMIT;
SELECT count(*) FROM pgf_tmp;
CREATE TEMP TABLE pgf_tmp2 AS SELECT g AS id, g * g AS sq FROM generate_series(1, 5) g;
SELECT sum(sq) FROM pgf_tmp2;
CREATE UNLOGGED TABLE pgf_unlogged (id int PRIMARY KEY, v text);
INSERT INTO pgf_unlogged SELECT g, 'u' || g FROM generate_series(1, 20) g;
SELECT count(*), max(v) FROM pgf_unlogged;
SELECT id, w INTO pgf_selinto FROM pgf_words WHERE id < 4;
SELECT * FROM pgf_selinto ORDER BY id;
TRUNCATE pgf_serial RESTART IDENTITY;
INSERT INTO pgf_serial (v) VALUES ('after truncate');
SELECT id, b, v FROM pgf_serial;
TRUNCATE pgf_dparent CASCADE;
SELECT (SELECT count(*) FROM pgf_dparent), (SELECT count(*) FROM pgf_dchild);

-- ALTER TABLE: add/drop/rename columns, change a type with USING, defaults on existing rows.
CREATE TABLE pgf_alter (id int, a text, b int);
INSERT INTO pgf_alter VALUES (1, '10', 1), (2, '20', 2), (3, NULL, 3);
ALTER TABLE pgf_alter ADD COLUMN c int NOT NULL DEFAULT 7, ADD COLUMN d timestamptz DEFAULT '2024-01-01 00:00+00';
ALTER TABLE pgf_alter ALTER COLUMN a TYPE int USING a::int;
ALTER TABLE pgf_alter DROP COLUMN b;
ALTER TABLE pgf_alter RENAME COLUMN c TO cc;
INSERT INTO pgf_alter (id, a) VALUES (4, 40);
SELECT * FROM pgf_alter ORDER BY id;
SELECT sum(a) FROM pgf_alter WHERE cc = 7;
ALTER TABLE pgf_alter ALTER COLUMN a TYPE text;
ALTER TABLE pgf_alter RENAME TO pgf_altered;
SELECT id, a || 'x' FROM pgf_altered ORDER BY id;

-- Contrib: pgcrypto digests, HMAC, crypt with fixed salts, symmetric encryption round trip.
CREATE EXTENSION IF NOT EXISTS pgcrypto;
SELECT encode(digest('abc', 'sha256'), 'hex') AS sha256, encode(digest('abc', 'md5'), 'hex') AS md5,
       encode(hmac('message', 'key', 'sha1'), 'hex') AS hmac;
SELECT crypt('secret', '$1$pgfsalt$') AS md5crypt, crypt('secret', '$2a$06$abcdefghijklmnopqrstuu') AS bfcrypt;
CREATE TABLE pgf_users (id int, name text, pw text);
INSERT INTO pgf_users VALUES (1, 'ann', crypt('s3cret', '$1$annsalt$')), (2, 'bob', crypt('hunter2', '$1$bobsalt$'));
SELECT id, name FROM pgf_users WHERE pw = crypt('s3cret', pw) ORDER BY id;
SELECT pgp_sym_decrypt(pgp_sym_encrypt('round trip', 'pw'), 'pw'), length(gen_random_bytes(16));

-- Contrib: hstore columns, operators, subscripting and each().
CREATE EXTENSION IF NOT EXISTS hstore;
CREATE TABLE pgf_kv (id int, attrs hstore);
INSERT INTO pgf_kv VALUES (1, 'color=>red, size=>L'), (2, 'color=>blue, weight=>"1.5 kg"'), (3, '');
SELECT id, attrs, attrs -> 'color' AS color, attrs ? 'size' AS has_size, attrs @> 'color=>red' AS red, akeys(attrs),
       attrs || 'new=>1' AS added, delete(attrs, 'color') AS deleted, hstore_to_jsonb(attrs) AS js
FROM pgf_kv ORDER BY id;
SELECT id, key, value FROM pgf_kv, each(attrs) ORDER BY id, key;
UPDATE pgf_kv SET attrs['size'] = 'XL' WHERE id = 1;
SELECT attrs FROM pgf_kv WHERE id = 1;
SELECT id FROM pgf_kv WHERE attrs = 'size=>XL, color=>red' ORDER BY id;

-- Contrib: pg_trgm similarity and the % operator (btree index only).
CREATE EXTENSION IF NOT EXISTS pg_trgm;
SELECT show_trgm('cat'), similarity('word', 'words'), word_similarity('word', 'two words');
CREATE TABLE pgf_names (id int, name text);
CREATE INDEX pgf_names_name ON pgf_names (name);
INSERT INTO pgf_names VALUES (1, 'Jonathan'), (2, 'John'), (3, 'Joan'), (4, 'Jon'), (5, 'Johnny'), (6, 'Mary');
SELECT name, round(similarity(name, 'Jon')::numeric, 3) AS sim FROM pgf_names WHERE name % 'Jon' ORDER BY sim DESC, name;
SET pg_trgm.similarity_threshold = 0.2;
SELECT name FROM pgf_names WHERE name % 'Johny' ORDER BY name;
RESET pg_trgm.similarity_threshold;
SELECT name, round((name <-> 'Johny')::numeric, 3) AS dist FROM pgf_names ORDER BY name <-> 'Johny', name LIMIT 3;

-- Contrib: citext comparison, DISTINCT and ordering; citext keys (unique and primary).
CREATE EXTENSION IF NOT EXISTS citext;
CREATE TABLE pgf_accounts (id int PRIMARY KEY, email citext);
INSERT INTO pgf_accounts VALUES (1, 'Alice@Example.com'), (2, 'bob@example.com'), (3, 'ALICE@example.COM');
SELECT count(DISTINCT email), count(DISTINCT email::text) FROM pgf_accounts;
SELECT id FROM pgf_accounts WHERE email = 'BOB@EXAMPLE.COM';
SELECT email FROM pgf_accounts ORDER BY email, id;
SELECT 'abc'::citext = 'ABC', 'abc'::citext < 'ABD';
-- (Terse: a violation's DETAIL shows a Pinax citext key in lower case, README.)
\set VERBOSITY terse
CREATE UNIQUE INDEX pgf_accounts_email ON pgf_accounts (email);
DELETE FROM pgf_accounts WHERE id = 3;
CREATE UNIQUE INDEX pgf_accounts_email ON pgf_accounts (email);
INSERT INTO pgf_accounts VALUES (3, 'ALICE@example.COM');
\set VERBOSITY default
INSERT INTO pgf_accounts VALUES (3, 'carol@example.com') ON CONFLICT (email) DO NOTHING;
INSERT INTO pgf_accounts VALUES (4, 'BOB@example.com') ON CONFLICT (email) DO UPDATE SET email = EXCLUDED.email;
SET enable_seqscan = off;
SELECT id, email FROM pgf_accounts WHERE email = 'bob@EXAMPLE.com';
SELECT id, email FROM pgf_accounts WHERE email IN ('ALICE@EXAMPLE.COM', 'nobody@example.com');
RESET enable_seqscan;
CREATE TABLE pgf_logins (login citext PRIMARY KEY, n int);
INSERT INTO pgf_logins VALUES ('Admin', 1), ('guest', 2);
\set VERBOSITY terse
INSERT INTO pgf_logins VALUES ('ADMIN', 3);
\set VERBOSITY default
SELECT login, n FROM pgf_logins WHERE login = 'admin';
UPDATE pgf_logins SET n = n + 10 WHERE login = 'GUEST';
SELECT login, n FROM pgf_logins ORDER BY login;
DROP TABLE pgf_logins;

-- Contrib: ltree paths and their operators.
CREATE EXTENSION IF NOT EXISTS ltree;
CREATE TABLE pgf_paths (id int PRIMARY KEY, path ltree);
CREATE INDEX pgf_paths_path ON pgf_paths (path);
INSERT INTO pgf_paths VALUES (1, 'Top'), (2, 'Top.Science'), (3, 'Top.Science.Astronomy'), (4, 'Top.Hobbies'),
  (5, 'Top.Hobbies.Amateurs_Astronomy'), (6, 'Top.Collections.Pictures.Astronomy');
SELECT path FROM pgf_paths WHERE path <@ 'Top.Science' ORDER BY path;
SELECT path FROM pgf_paths WHERE path ~ '*.Astronomy' ORDER BY path;
SELECT path FROM pgf_paths WHERE path @ 'Astro*' ORDER BY path;
SELECT path, nlevel(path), subpath(path, 0, 2), path || 'X' AS ext FROM pgf_paths ORDER BY path;
SELECT lca(array_agg(path ORDER BY id)) FROM pgf_paths WHERE id > 1;

-- Contrib: uuid-ossp name-based UUIDs (deterministic inputs).
CREATE EXTENSION IF NOT EXISTS "uuid-ossp";
SELECT uuid_generate_v5(uuid_ns_url(), 'https://example.com/pinax'), uuid_generate_v3(uuid_ns_dns(), 'example.com'),
       uuid_nil(), uuid_ns_oid();
INSERT INTO pgf_uuid VALUES (uuid_generate_v5(uuid_ns_dns(), 'pinax.example'), 'v5');
SELECT u FROM pgf_uuid WHERE note = 'v5';

-- Contrib: tablefunc crosstab and connectby.
CREATE EXTENSION IF NOT EXISTS tablefunc;
SELECT * FROM crosstab('SELECT player, game, score FROM pgf_scores ORDER BY 1, 2')
  AS ct(player text, g1 int, g2 int, g3 int) ORDER BY player;
SELECT * FROM crosstab('SELECT player, game, score FROM pgf_scores WHERE game > 1 ORDER BY 1, 2',
                       'SELECT g FROM generate_series(1, 3) g')
  AS ct(player text, g1 int, g2 int, g3 int) ORDER BY player;
SELECT * FROM connectby('pgf_tree', 'id', 'parent', 'id', '1', 0, '~')
  AS t(id int, parent int, level int, branch text, pos int) ORDER BY pos;

-- Contrib: btree_gin and btree_gist can be installed (no indexes here).
CREATE EXTENSION IF NOT EXISTS btree_gin;
CREATE EXTENSION IF NOT EXISTS btree_gist;
SELECT extname FROM pg_extension WHERE extname IN ('pgcrypto', 'hstore', 'pg_trgm', 'citext', 'ltree', 'uuid-ossp', 'tablefunc',
  'btree_gin', 'btree_gist') ORDER BY extname;

-- Clean up everything created above.
DROP TABLE pgf_nums, pgf_text, pgf_bytes, pgf_bool, pgf_time, pgf_uuid, pgf_json, pgf_arr, pgf_ranges, pgf_people,
  pgf_comp, pgf_dom, pgf_net, pgf_misc, pgf_items, pgf_nnd, pgf_pk2, pgf_excl;
DROP TABLE pgf_badge, pgf_emp, pgf_dept, pgf_tenant_user, pgf_full_child, pgf_tenant_dept, pgf_dchild, pgf_dparent, pgf_rank;
DROP TABLE pgf_sales, pgf_orders, pgf_hashed, pgf_hashed2, pgf_sales_bad, pgf_vehicle CASCADE;
DROP TABLE pgf_stock, pgf_delivery, pgf_gen, pgf_idalways, pgf_iddefault, pgf_serial;
DROP SEQUENCE pgf_seq, pgf_seq_desc;
DROP TABLE pgf_acct, pgf_trig_log, pgf_ledger, pgf_audit, pgf_pairs, pgf_ptrig_log, pgf_ddl_log, pgf_ddl_probe;
DROP VIEW pgf_owner_totals;
DROP TABLE pgf_acct2;
DROP FUNCTION pgf_log_stmt(), pgf_before_row(), pgf_after_row(), pgf_big(), pgf_trunc_log(), pgf_audit_ins(), pgf_audit_upd(),
  pgf_audit_del(), pgf_totals_dml(), pgf_check_sum(), pgf_ptrig(), pgf_ddl();
DROP VIEW pgf_docs_live;
DROP TABLE pgf_docs, pgf_docs_log;
DROP VIEW pgf_urgent_open_c, pgf_urgent_open, pgf_urgent, pgf_open_tasks;
DROP MATERIALIZED VIEW pgf_task_stats, pgf_mv_empty;
DROP TABLE pgf_tasks, pgf_tasks_archive, pgf_tree, pgf_edges, pgf_scores, pgf_copy, pgf_copy_one, pgf_copy_frozen;
DROP TABLE pgf_words, pgf_sp, pgf_notes, pgf_salary, pgf_tmp, pgf_tmp2, pgf_unlogged, pgf_selinto, pgf_altered;
DROP TABLE pgf_users, pgf_kv, pgf_names, pgf_accounts, pgf_paths;
DROP COLLATION pgf_ci;
DROP TYPE pgf_mood, pgf_addr;
DROP DOMAIN pgf_posint, pgf_email;
DROP ROLE pgf_role;
DROP EXTENSION pgcrypto, hstore, pg_trgm, citext, ltree, "uuid-ossp", tablefunc, btree_gin, btree_gist;
SELECT count(*) FROM pg_class WHERE relname LIKE 'pgf\_%';
SELECT count(*) FROM pg_roles WHERE rolname = 'pgf_role';
