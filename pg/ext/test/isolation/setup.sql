-- Run in each isolation test database before the specs. PostgreSQL's isolation
-- tester asks pg_isolation_test_session_is_blocked() whether a step waits; the
-- built-in only knows PostgreSQL's own lock waits. A Pinax backend waiting for
-- another transaction reports wait_event_type 'Extension' (state.rs, wait_for).
-- The built-in cannot be replaced (fmgr finds built-ins by OID), but a SQL
-- function body is inlined into the tester's query before that: this one is a
-- single expression, so it is, and it also counts Pinax waits.
CREATE FUNCTION public.pinax_test_waits(p int) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
  RETURN EXISTS (SELECT FROM pg_catalog.pg_stat_activity WHERE pid = p AND wait_event_type = 'Extension');
END
$$;
CREATE OR REPLACE FUNCTION pg_catalog.pg_isolation_test_session_is_blocked(blocked int, interesting int[])
RETURNS bool LANGUAGE sql AS $$
  SELECT pg_catalog.pg_blocking_pids(blocked) && interesting
      OR pg_catalog.cardinality(pg_catalog.pg_safe_snapshot_blocking_pids(blocked)) > 0
      OR public.pinax_test_waits(blocked)
$$;
