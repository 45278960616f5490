-- An autocommit read-modify-write: concurrent increments must never be lost.
\set c random(1, 4)
UPDATE bank_counters SET n = n + 1 WHERE id = :c;
