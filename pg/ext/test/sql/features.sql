-- PostgreSQL features above storage, on Pinax tables.
-- PL/pgSQL functions and procedures.
CREATE TABLE counters (name text PRIMARY KEY, n int NOT NULL DEFAULT 0);
CREATE FUNCTION bump(p text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE r int;
BEGIN
  INSERT INTO counters VALUES (p, 1) ON CONFLICT (name) DO UPDATE SET n = counters.n + 1 RETURNING n INTO r;
  RETURN r;
END $$;
SELECT bump('a'), bump('a'), bump('b');
CREATE PROCEDURE reset_all() LANGUAGE plpgsql AS $$
BEGIN
  UPDATE counters SET n = 0;
END $$;
CALL reset_all();
SELECT * FROM counters ORDER BY name;
DO $$
DECLARE i int;
BEGIN
  FOR i IN 1..20 LOOP
    PERFORM bump('loop');
  END LOOP;
END $$;
SELECT n FROM counters WHERE name = 'loop';
-- jsonb, arrays, enums, composite and domain types.
CREATE TYPE color AS ENUM ('red', 'green', 'blue');
CREATE TYPE pair AS (x int, y text);
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE TABLE docs (id posint PRIMARY KEY, body jsonb, tags text[], c color, p pair);
INSERT INTO docs VALUES (1, '{"name": "x", "n": [1, 2, 3]}', '{a,b}', 'green', ROW(1, 'one')),
                        (2, '{"name": "y", "n": []}', '{c}', 'blue', ROW(2, 'two'));
INSERT INTO docs VALUES (0, '{}', '{}', 'red', NULL);
SELECT id, body ->> 'name', jsonb_array_length(body -> 'n'), tags || 'z'::text, c, (p).y FROM docs ORDER BY id;
SELECT id FROM docs WHERE body @> '{"name": "y"}' ORDER BY id;
SELECT id FROM docs WHERE 'b' = ANY (tags);
UPDATE docs SET body = jsonb_set(body, '{name}', '"z"'), p.x = 10 WHERE id = 1;
SELECT body, p FROM docs WHERE id = 1;
SELECT jsonb_agg(id ORDER BY id), array_agg(c ORDER BY c) FROM docs;
-- Row-level security.
CREATE ROLE pinax_rls_user;
CREATE TABLE secrets (id int PRIMARY KEY, owner text, data text);
INSERT INTO secrets VALUES (1, 'pinax_rls_user', 'mine'), (2, 'other', 'theirs');
ALTER TABLE secrets ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_rows ON secrets USING (owner = current_user);
GRANT SELECT ON secrets TO pinax_rls_user;
SET ROLE pinax_rls_user;
SELECT * FROM secrets ORDER BY id;
RESET ROLE;
SELECT count(*) FROM secrets;
-- COPY in and out.
CREATE TABLE copied (id int PRIMARY KEY, t text, f float8);
COPY copied FROM stdin;
1	one	1.5
2	two	\N
3	three	3.25
\.
COPY (SELECT * FROM copied ORDER BY id) TO stdout;
SELECT count(*), sum(f) FROM copied;
-- Window functions, CTEs, generate_series, subqueries.
WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5)
INSERT INTO copied SELECT n + 10, 'r' || n, n FROM r;
SELECT id, t, sum(f) OVER (ORDER BY id) FROM copied ORDER BY id;
SELECT t FROM copied WHERE id = (SELECT max(id) FROM copied);
-- Prepared statements.
PREPARE get_copied(int) AS SELECT t FROM copied WHERE id = $1;
EXECUTE get_copied(12);
EXECUTE get_copied(2);
DEALLOCATE get_copied;
-- Cursors.
BEGIN;
DECLARE cur CURSOR FOR SELECT id FROM copied ORDER BY id;
FETCH 2 FROM cur;
FETCH 2 FROM cur;
CLOSE cur;
COMMIT;
DROP TABLE counters, docs, secrets, copied;
DROP FUNCTION bump(text);
DROP PROCEDURE reset_all();
DROP TYPE color, pair;
DROP DOMAIN posint;
DROP ROLE pinax_rls_user;
