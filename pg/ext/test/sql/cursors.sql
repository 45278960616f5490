-- Scrollable cursors: scans that change direction (FETCH BACKWARD, PRIOR, FIRST,
-- LAST, ABSOLUTE, RELATIVE) over sequential scans and index scans.
CREATE TABLE cur (id int PRIMARY KEY, k int NOT NULL, v text);
CREATE INDEX cur_k ON cur (k);
INSERT INTO cur SELECT g, 100 - g, 'v' || g FROM generate_series(1, 40) g;
-- A sequential scan's order is the storage's (insertion order on heap, key order
-- on Pinax): what is checked is that every way of moving agrees with the
-- forward order, whatever it is.
CREATE FUNCTION scroll_check(q text) RETURNS TABLE (step text, ok boolean) LANGUAGE plpgsql AS $$
DECLARE
  c refcursor := 'scroll_check_cur';
  fwd int[] := '{}';
  bwd int[] := '{}';
  r int;
  n int;
BEGIN
  EXECUTE format('DECLARE scroll_check_cur SCROLL CURSOR FOR %s', q);
  LOOP
    FETCH NEXT FROM c INTO r;
    EXIT WHEN NOT FOUND;
    fwd := fwd || r;
  END LOOP;
  n := cardinality(fwd);
  -- Off the end: PRIOR steps back onto the last row, then walks back to the first.
  LOOP
    FETCH PRIOR FROM c INTO r;
    EXIT WHEN NOT FOUND;
    bwd := r || bwd;
  END LOOP;
  step := 'backward from the end is the forward order reversed'; ok := bwd = fwd; RETURN NEXT;
  FETCH NEXT FROM c INTO r;
  step := 'off the start, NEXT is the first row'; ok := r = fwd[1]; RETURN NEXT;
  FETCH LAST FROM c INTO r;
  step := 'LAST'; ok := r = fwd[n]; RETURN NEXT;
  FETCH FIRST FROM c INTO r;
  step := 'FIRST'; ok := r = fwd[1]; RETURN NEXT;
  FETCH ABSOLUTE 7 FROM c INTO r;
  step := 'ABSOLUTE 7'; ok := r = fwd[7]; RETURN NEXT;
  FETCH RELATIVE -3 FROM c INTO r;
  step := 'RELATIVE -3'; ok := r = fwd[4]; RETURN NEXT;
  FETCH RELATIVE 5 FROM c INTO r;
  step := 'RELATIVE 5'; ok := r = fwd[9]; RETURN NEXT;
  FETCH PRIOR FROM c INTO r;
  step := 'PRIOR after forward steps'; ok := r = fwd[8]; RETURN NEXT;
  FETCH NEXT FROM c INTO r;
  step := 'NEXT after a backward step'; ok := r = fwd[9]; RETURN NEXT;
  FETCH ABSOLUTE -2 FROM c INTO r;
  step := 'ABSOLUTE -2'; ok := r = fwd[n - 1]; RETURN NEXT;
  step := 'rows seen: ' || n; ok := n > 0; RETURN NEXT;
  CLOSE c;
END $$;
BEGIN;
SELECT * FROM scroll_check('SELECT id FROM cur');
SELECT * FROM scroll_check('SELECT id FROM cur WHERE id % 3 = 0');
COMMIT;
-- Index scans: the order is the index's, so the rows themselves are compared.
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SET enable_sort = off;
BEGIN;
SELECT * FROM scroll_check('SELECT id FROM cur ORDER BY id');
SELECT * FROM scroll_check('SELECT id FROM cur ORDER BY id DESC');
SELECT * FROM scroll_check('SELECT id FROM cur WHERE k BETWEEN 70 AND 90 ORDER BY k');
SELECT * FROM scroll_check('SELECT id FROM cur WHERE id IN (3, 9, 14, 15, 22, 37, 1, 40, 28, 29, 30, 11) ORDER BY id');
SELECT * FROM scroll_check('SELECT id FROM cur WHERE id IN (3, 9, 14, 15, 22, 37, 1, 40, 28, 29, 30, 11) ORDER BY id DESC');
DECLARE c1 SCROLL CURSOR FOR SELECT id, v FROM cur WHERE id BETWEEN 5 AND 12 ORDER BY id;
FETCH 3 FROM c1;
FETCH BACKWARD 2 FROM c1;
FETCH FORWARD 4 FROM c1;
FETCH LAST FROM c1;
FETCH BACKWARD ALL FROM c1;
FETCH NEXT FROM c1;
DECLARE c2 SCROLL CURSOR FOR SELECT id, k FROM cur WHERE k > 90 ORDER BY k DESC;
FETCH 2 FROM c2;
FETCH PRIOR FROM c2;
FETCH FORWARD ALL FROM c2;
FETCH BACKWARD 3 FROM c2;
-- A cursor sees one state, whichever way it moves: rows written after it was
-- declared (by this transaction's later commands) are not seen.
DECLARE c3 SCROLL CURSOR FOR SELECT id FROM cur WHERE id BETWEEN 1 AND 4 ORDER BY id;
FETCH 2 FROM c3;
INSERT INTO cur VALUES (0, 0, 'new');
DELETE FROM cur WHERE id = 1;
FETCH BACKWARD 2 FROM c3;
FETCH FORWARD ALL FROM c3;
COMMIT;
RESET enable_seqscan;
RESET enable_bitmapscan;
RESET enable_sort;
-- A sequential scan with a filter pushed to storage, both ways.
BEGIN;
SELECT * FROM scroll_check($q$SELECT id FROM cur WHERE v LIKE 'v1%'$q$);
COMMIT;
DROP FUNCTION scroll_check(text);
DROP TABLE cur;
