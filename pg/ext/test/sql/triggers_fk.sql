-- Triggers (BEFORE/AFTER, row/statement, transition tables) and foreign keys.
CREATE TABLE items (id int PRIMARY KEY, price numeric, updated int DEFAULT 0);
CREATE TABLE audit (n serial PRIMARY KEY, op text, old_price numeric, new_price numeric);
CREATE FUNCTION items_before() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.price < 0 THEN RAISE EXCEPTION 'negative price %', NEW.price; END IF;
  NEW.updated := COALESCE(OLD.updated, 0) + 1;
  RETURN NEW;
END $$;
CREATE FUNCTION items_after() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO audit (op, old_price, new_price) VALUES (TG_OP, OLD.price, NEW.price);
  RETURN NULL;
END $$;
CREATE FUNCTION items_stmt() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE c int;
BEGIN
  SELECT count(*) INTO c FROM new_rows;
  RAISE NOTICE 'statement % saw % new rows', TG_OP, c;
  RETURN NULL;
END $$;
CREATE TRIGGER t_before BEFORE INSERT OR UPDATE ON items FOR EACH ROW EXECUTE FUNCTION items_before();
CREATE TRIGGER t_after AFTER INSERT OR UPDATE OR DELETE ON items FOR EACH ROW EXECUTE FUNCTION items_after();
CREATE TRIGGER t_stmt AFTER INSERT ON items REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION items_stmt();
INSERT INTO items (id, price) VALUES (1, 10), (2, 20);
UPDATE items SET price = price * 2 WHERE id = 1;
DELETE FROM items WHERE id = 2;
INSERT INTO items (id, price) VALUES (3, -1);
SELECT * FROM items ORDER BY id;
SELECT op, old_price, new_price FROM audit ORDER BY n;
-- Foreign keys referencing a Pinax table.
CREATE TABLE parent (id int PRIMARY KEY, name text);
CREATE TABLE child (id int PRIMARY KEY, parent_id int REFERENCES parent (id) ON DELETE CASCADE, note text);
INSERT INTO parent VALUES (1, 'p1'), (2, 'p2');
INSERT INTO child VALUES (10, 1, 'c10'), (11, 1, 'c11'), (20, 2, 'c20');
INSERT INTO child VALUES (30, 3, 'orphan');
DELETE FROM parent WHERE id = 1;
SELECT * FROM child ORDER BY id;
UPDATE parent SET id = 5 WHERE id = 2;
UPDATE child SET note = 'changed' WHERE id = 20;
-- Deferred foreign key: checked at commit.
CREATE TABLE dchild (id int PRIMARY KEY, pid int REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
BEGIN;
INSERT INTO dchild VALUES (1, 7);
INSERT INTO parent VALUES (7, 'late');
COMMIT;
BEGIN;
INSERT INTO dchild VALUES (2, 8);
COMMIT;
SELECT * FROM dchild ORDER BY id;
-- Foreign key on a unique (non primary key) column.
CREATE TABLE u_parent (id int PRIMARY KEY, code text UNIQUE);
CREATE TABLE u_child (id int PRIMARY KEY, code text REFERENCES u_parent (code));
INSERT INTO u_parent VALUES (1, 'A');
INSERT INTO u_child VALUES (1, 'A');
INSERT INTO u_child VALUES (2, 'B');
DELETE FROM u_parent WHERE code = 'A';
DROP TABLE items, audit, child, dchild, parent, u_child, u_parent;
DROP FUNCTION items_before(), items_after(), items_stmt();
