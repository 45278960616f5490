#!/usr/bin/env bash
# SQL regression tests against a node started here (see ../../../README.md).
#
# Starts `pinax start` in a fresh data directory on free ports, then runs every
# test of `schedule` twice with pg_regress: in a database whose default table access
# method is pinax, and in one where it is heap (stock PostgreSQL). Both runs must
# print exactly `expected/<test>.out`, so Pinax is held to what PostgreSQL prints.
# A third run on Pinax sends every plain SELECT through the re-run path of
# multi-node clusters (pinax.hold_selects_always).
# Tests in `schedule_pinax` run on Pinax only (EXPLAIN output, restart durability).
#
# Usage: pg/ext/test/run.sh [--keep] [test ...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${PINAX_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/pinax/target}/debug/pinax}"
regress="$(/usr/lib/postgresql/15/bin/pg_config --pkglibdir)/pgxs/src/test/regress/pg_regress"
keep=0
if [[ "${1:-}" == "--keep" ]]; then keep=1; shift; fi

# shellcheck source=pg/ext/test/lib.sh
source "$(dirname "$0")/lib.sh"
rpc=$(pick_ports 2)
pg=$((rpc + 1))
dir="$(mktemp -d /tmp/pinax-regress.XXXXXX)"
chmod 755 "$dir"
out="$dir/out"
mkdir -p "$out"

cleanup() {
  "$bin" stop --data-dir "$dir" >/dev/null 2>&1 || true
  if [[ $keep == 0 ]]; then rm -rf "$dir"; else echo "kept $dir"; fi
}
trap cleanup EXIT

"$bin" start --data-dir "$dir" --port "$rpc" --pg-port "$pg" --tablets-per-node 4 >/dev/null
export PGHOST=127.0.0.1 PGPORT=$pg PGUSER=$superuser PGPASSFILE="$dir/credentials"
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
psql_ -d postgres -c "CREATE DATABASE regress_pinax TEMPLATE template1"
psql_ -d postgres -c "CREATE DATABASE regress_heap TEMPLATE template1"
psql_ -d postgres -c "ALTER DATABASE regress_heap SET default_table_access_method = heap"

# The bank test (bank/bank.sh): PINAX_BANK="SECONDS CLIENTS ACCOUNTS" (short by
# default); PINAX_BANK_ONLY=1 runs nothing else (`make bank`).
read -r bank_secs bank_clients bank_accounts <<<"${PINAX_BANK:-5 4 40}"
if [[ "${PINAX_BANK_ONLY:-0}" == 1 ]]; then
  "$here/bank/bank.sh" regress_pinax "$bank_secs" "$bank_clients" "$bank_accounts"
  exit $?
fi

schedule_tests() { awk '/^test:/ { for (i = 2; i <= NF; i++) print $i }' "$here/$1"; }
status=0
# run_regress DB NAME TEST...: pg_regress in DB, output under $out/NAME; differences
# are printed and make the run fail.
run_regress() {
  local db=$1 name=$2; shift 2
  mkdir -p "$out/$name"
  if ! "$regress" --use-existing --host=127.0.0.1 --port="$pg" --user="$superuser" --dbname="$db" \
      --inputdir="$here" --outputdir="$out/$name" "$@"; then
    status=1
    echo "---- regression differences ($name) ----"
    cat "$out/$name/regression.diffs" 2>/dev/null || true
  fi
}
tests=("$@")
if [[ ${#tests[@]} == 0 ]]; then
  mapfile -t tests < <(schedule_tests schedule)
fi
for mode in pinax heap; do
  run_regress "regress_$mode" "$mode" "${tests[@]}"
done
# Once more on Pinax with every plain SELECT going through the re-run path that
# only a multi-node cluster uses (held rows, internal subtransaction): the same
# output is expected.
psql_ -d postgres -c "CREATE DATABASE regress_pinax_held TEMPLATE template1"
psql_ -d postgres -c "ALTER DATABASE regress_pinax_held SET pinax.hold_selects_always = on"
run_regress regress_pinax_held pinax_held "${tests[@]}"
# Pinax-only tests (no heap twin).
if [[ ${#@} == 0 ]]; then
  mapfile -t ptests < <(schedule_tests schedule_pinax)
  run_regress regress_pinax pinax_only "${ptests[@]}"
  # Concurrency (isolation/): PostgreSQL's own isolation tester runs each spec's
  # permutations (sessions, steps, a schedule) on Pinax and on heap; both must print
  # isolation/expected/<spec>.out. isolation/setup.sql lets the tester see a Pinax
  # backend waiting for another transaction.
  isolation="$(dirname "$regress")/../isolation/pg_isolation_regress"
  for mode in pinax heap; do
    psql_ -d postgres -c "CREATE DATABASE iso_$mode TEMPLATE template1"
    psql_ -d postgres -c "ALTER DATABASE iso_$mode SET default_table_access_method = $mode"
    psql_ -d "iso_$mode" -f "$here/isolation/setup.sql"
    mkdir -p "$out/iso_$mode"
    # isolation_schedule_pinax: behaviour Pinax has and heap has not (column-level
    # conflicts).
    schedules=(--schedule="$here/isolation/isolation_schedule")
    [[ $mode == pinax ]] && schedules+=(--schedule="$here/isolation/isolation_schedule_pinax")
    if ! PGISOLATIONTIMEOUT=60 "$isolation" --use-existing --host=127.0.0.1 --port="$pg" --user="$superuser" --dbname="iso_$mode" \
        --inputdir="$here/isolation" --outputdir="$out/iso_$mode" "${schedules[@]}"; then
      status=1
      echo "---- isolation differences ($mode) ----"
      cat "$out/iso_$mode/regression.diffs" 2>/dev/null || true
    fi
  done
  # Restart durability: what was committed survives `pinax stop` + `pinax start`.
  psql_ -d regress_pinax -c "CREATE TABLE durable (id int PRIMARY KEY, v text); INSERT INTO durable SELECT g, md5(g::text) FROM generate_series(1, 5000) g; CREATE INDEX durable_v ON durable (v)"
  before=$(psql_ -d regress_pinax -tA -c "SELECT count(*), sum(id), (SELECT id FROM durable WHERE v = md5('4321')) FROM durable")
  "$bin" stop --data-dir "$dir" >/dev/null
  "$bin" start --data-dir "$dir" --port "$rpc" --pg-port "$pg" >/dev/null
  after=$(psql_ -d regress_pinax -tA -c "SELECT count(*), sum(id), (SELECT id FROM durable WHERE v = md5('4321')) FROM durable")
  if [[ "$before" != "$after" || "$before" != "5000|12502500|4321" ]]; then
    echo "restart durability: before '$before', after '$after'"; status=1
  else
    echo "restart durability: ok ($after)"
  fi
fi
# Storage follows relation file nodes: TRUNCATE, REINDEX, a rolled-back TRUNCATE, a
# rolled-back CREATE and a CREATE in a rolled-back savepoint leave exactly as many
# storage tables as before (old ones freed at commit, new ones on abort).
if [[ ${#@} == 0 ]]; then
  # storage_after SQL: run SQL, then print how many storage tables the node has.
  storage_after() {
    psql_ -d regress_pinax -c "$1" || return 1
    "$bin" status --data-dir "$dir" --addr "127.0.0.1:$rpc" | grep -cE '^  [ti][0-9]+_'
  }
  n0=$(storage_after "CREATE TABLE leak_t (id int PRIMARY KEY, v text, w int); CREATE INDEX leak_v ON leak_t (v); CREATE UNIQUE INDEX leak_w ON leak_t (w); INSERT INTO leak_t SELECT g, 'v' || g, g FROM generate_series(1, 100) g")
  n1=$(storage_after "TRUNCATE leak_t")
  n2=$(storage_after "INSERT INTO leak_t VALUES (7, 'seven', 7); REINDEX TABLE leak_t; REINDEX INDEX leak_v")
  n3=$(storage_after "BEGIN; TRUNCATE leak_t; INSERT INTO leak_t VALUES (8, 'eight', 8); ROLLBACK")
  # Tablespace moves keep the storage (hooks/tablespace.rs): committed, rolled back,
  # in a rolled-back savepoint, ALL IN TABLESPACE; then a DROP of a table whose
  # indexes were moved frees all of it, and the tablespace can be dropped.
  psql_ -d regress_pinax -c "SET allow_in_place_tablespaces = on" -c "CREATE TABLESPACE leak_ts LOCATION ''"
  t1=$(storage_after "ALTER TABLE leak_t SET TABLESPACE leak_ts; ALTER INDEX leak_v SET TABLESPACE leak_ts")
  t2=$(storage_after "BEGIN; ALTER INDEX ALL IN TABLESPACE leak_ts SET TABLESPACE pg_default; ROLLBACK")
  t3=$(storage_after "BEGIN; SAVEPOINT a; ALTER TABLE leak_t SET TABLESPACE pg_default; ROLLBACK TO a; ALTER INDEX leak_w SET TABLESPACE leak_ts; COMMIT")
  t4=$(storage_after "ALTER TABLE ALL IN TABLESPACE leak_ts SET TABLESPACE pg_default")
  found=$(psql_ -d regress_pinax -tA -c "SET enable_seqscan = off; SELECT string_agg(id::text, ',') FROM leak_t WHERE v IN ('seven', 'eight', 'v3')")
  if [[ "$t1 $t2 $t3 $t4" != "$n0 $n0 $n0 $n0" ]]; then
    echo "storage tables after tablespace moves: $t1 $t2 $t3 $t4 (want $n0 each)"; status=1
  fi
  n4=$(storage_after "DROP TABLE leak_t")
  t5=$(storage_after "BEGIN; CREATE TABLE leak_m (id int PRIMARY KEY, v text); CREATE INDEX leak_mv ON leak_m (v); INSERT INTO leak_m VALUES (1, 'a'); ALTER TABLE leak_m SET TABLESPACE leak_ts; ALTER INDEX leak_mv SET TABLESPACE leak_ts; DROP TABLE leak_m; COMMIT")
  if [[ "$t5" != "$n4" ]] || ! psql_ -d regress_pinax -c "DROP TABLESPACE leak_ts"; then
    echo "a table created, moved and dropped in one transaction left $t5 storage tables (want $n4), or its tablespace could not be dropped"; status=1
  fi
  n5=$(storage_after "BEGIN; CREATE TABLE leak_u (id int PRIMARY KEY, v text); CREATE INDEX leak_uv ON leak_u (v); ROLLBACK")
  n6=$(storage_after "BEGIN; SAVEPOINT s; CREATE TABLE leak_s (id int PRIMARY KEY, v text); CREATE INDEX leak_sv ON leak_s (v); INSERT INTO leak_s VALUES (1, 'x'); ROLLBACK TO SAVEPOINT s; COMMIT")
  if [[ "$n1" == "$n0" && "$n2" == "$n0" && "$n3" == "$n0" && "$n4" == "$((n0 - 3))" && "$n5" == "$n4" && "$n6" == "$n4" && "$found" == "7" ]]; then
    echo "storage of truncated, reindexed and dropped relations freed: ok"
  else
    echo "storage tables: before $n0, after TRUNCATE $n1, after REINDEX $n2, after rolled-back TRUNCATE $n3, after DROP $n4, after rolled-back CREATE $n5, after CREATE in a rolled-back savepoint $n6 (want $n0 x4, $((n0 - 3)) x3); rows found '$found' (want 7)"; status=1
  fi
fi
# Row locks across sessions (PostgreSQL's behaviour unless noted): FOR UPDATE never
# blocks readers; NOWAIT fails with 55P03, SKIP LOCKED skips, lock_timeout ends a
# wait with 55P03; a waiter wakes when the holder ends and gets the row if it rolled
# back, or works on the committed version (READ COMMITTED restarts the statement);
# a delete of a parent row waiting on a foreign-key check's KEY SHARE lock reports
# the violation. ROLLBACK TO SAVEPOINT releases the locks taken after it; FOR KEY
# SHARE locks share, and let a non-key update pass. (isolation/ has the same as
# specs run by PostgreSQL's isolation tester; this also covers lock_timeout.)
# open_sessions X Y: two psql sessions fed through fds 8 and 9 (functions X and Y
# send a line and give it time), printing to $dir/X.out and $dir/Y.out.
open_sessions() {
  mkfifo "$dir/$1.in" "$dir/$2.in"
  psql -X -q -tA -d regress_pinax -v VERBOSITY=terse < "$dir/$1.in" > "$dir/$1.out" 2>&1 &
  session1=$!
  psql -X -q -tA -d regress_pinax -v VERBOSITY=terse < "$dir/$2.in" > "$dir/$2.out" 2>&1 &
  session2=$!
  exec 8> "$dir/$1.in" 9> "$dir/$2.in"
  eval "$1() { echo \"\$1\" >&8; sleep 0.7; }; $2() { echo \"\$1\" >&9; sleep 0.7; }"
}
close_sessions() {
  echo '\q' >&8; echo '\q' >&9
  exec 8>&- 9>&-
  wait "$session1" "$session2" || true
}
if [[ ${#@} == 0 ]]; then
  open_sessions a b
  a "BEGIN; SELECT 'a locked', v FROM durable WHERE id = 1 FOR UPDATE;"
  b "SELECT 'b reads', v FROM durable WHERE id = 1;"
  b "SELECT 'b nowait' FROM durable WHERE id = 1 FOR UPDATE NOWAIT;"
  b "SELECT 'b skips', count(*) FROM (SELECT id FROM durable WHERE id IN (1, 2) FOR UPDATE SKIP LOCKED) s;"
  b "SET lock_timeout = '300ms';"
  b "UPDATE durable SET v = 'b' WHERE id = 1;"
  b "RESET lock_timeout;"
  b "BEGIN; SELECT 'b waited' FROM durable WHERE id = 1 FOR UPDATE;"
  a "ROLLBACK;"
  b "UPDATE durable SET v = 'b' WHERE id = 1 RETURNING 'b updated'; COMMIT;"
  a "BEGIN; UPDATE durable SET v = 'a' WHERE id = 1 RETURNING 'a updated';"
  b "UPDATE durable SET v = 'b' || v WHERE id = 1;"
  a "COMMIT;"
  b "UPDATE durable SET v = 'b' || v WHERE id = 1 RETURNING 'b updated', v;"
  a "BEGIN; SAVEPOINT s; SELECT 'a relocked' FROM durable WHERE id = 1 FOR UPDATE; ROLLBACK TO SAVEPOINT s;"
  b "SELECT 'b locks after rollback' FROM durable WHERE id = 1 FOR UPDATE NOWAIT;"
  a "COMMIT;"
  a "CREATE TABLE fkp (id int PRIMARY KEY, note text); CREATE TABLE fkc (id int PRIMARY KEY, p int REFERENCES fkp); INSERT INTO fkp VALUES (1);"
  a "BEGIN; INSERT INTO fkc VALUES (1, 1);"
  b "BEGIN; SELECT 'b shares' FROM fkp WHERE id = 1 FOR KEY SHARE; COMMIT;"
  b "UPDATE fkp SET note = 'b' WHERE id = 1 RETURNING 'b updated the parent';"
  b "DELETE FROM fkp WHERE id = 1;"
  a "COMMIT; SELECT 'children', count(*) FROM fkc;"
  a "DROP TABLE fkc, fkp;"
  close_sessions
  want_a=$'a locked|c4ca4238a0b923820dcc509a6f75849b\na updated\na relocked\nchildren|1'
  want_b=$'b reads|c4ca4238a0b923820dcc509a6f75849b
ERROR:  could not obtain lock on row in relation "durable"
b skips|1
ERROR:  canceling statement due to lock timeout
b waited
b updated
b updated|bba
b locks after rollback
b shares
b updated the parent
ERROR:  update or delete on table "fkp" violates foreign key constraint "fkc_p_fkey" on table "fkc"'
  ok=1
  [[ "$(cat "$dir/a.out")" == "$want_a" ]] || ok=0
  mapfile -t got_b < "$dir/b.out"
  mapfile -t exp_b <<<"$want_b"
  [[ ${#got_b[@]} == "${#exp_b[@]}" ]] || ok=0
  for i in "${!exp_b[@]}"; do
    # shellcheck disable=SC2053
    [[ "${got_b[$i]:-}" == ${exp_b[$i]} ]] || ok=0
  done
  if [[ $ok == 1 ]]; then
    echo "row locks between sessions: ok"
  else
    echo "row locks between sessions: unexpected output:"; cat "$dir/a.out" "$dir/b.out"; status=1
  fi
fi
# Two transactions waiting for each other: one is the victim (40P01) at once, the
# other goes on when the victim's locks are gone.
if [[ ${#@} == 0 ]]; then
  open_sessions c d
  c "BEGIN; UPDATE durable SET v = v WHERE id = 2;"
  d "BEGIN; UPDATE durable SET v = v WHERE id = 3;"
  c "UPDATE durable SET v = v WHERE id = 3 RETURNING 'c updated';"
  d "UPDATE durable SET v = v WHERE id = 2 RETURNING 'd updated';"
  c "COMMIT;"
  d "COMMIT;"
  close_sessions
  both="$(cat "$dir/c.out" "$dir/d.out")"
  if [[ "$(grep -c '^ERROR:  deadlock detected' <<<"$both")" == 1 && "$(grep -cE '^[cd] updated$' <<<"$both")" == 1 && "$(wc -l <<<"$both")" == 2 ]]; then
    echo "deadlock between sessions: ok"
  else
    echo "deadlock between sessions: unexpected output:"; echo "$both"; status=1
  fi
fi
# (Isolation levels between sessions: isolation/specs, run above.)
# An extended-protocol pipeline is one transaction: a READ COMMITTED UPDATE in it is
# not committed early (hooks/restart.rs) when a later statement fails; alone before
# its Sync it is.
if [[ ${#@} == 0 ]]; then
  pgbench=/usr/lib/postgresql/15/bin/pgbench
  psql_ -d regress_pinax -c "CREATE TABLE pipe (id int PRIMARY KEY, v int); INSERT INTO pipe VALUES (1, 5)"
  printf '\\startpipeline\nUPDATE pipe SET v = 777 WHERE id = 1;\nSELECT 1 / 0;\n\\endpipeline\n' > "$dir/pipe_fail.sql"
  printf '\\startpipeline\nUPDATE pipe SET v = v + 1 WHERE id = 1;\n\\endpipeline\n' > "$dir/pipe_ok.sql"
  "$pgbench" -n -M extended -t 1 -f "$dir/pipe_fail.sql" regress_pinax > "$dir/pipe.out" 2>&1 || true
  after_fail=$(psql_ -d regress_pinax -tA -c "SELECT v FROM pipe")
  "$pgbench" -n -M extended -t 1 -f "$dir/pipe_ok.sql" regress_pinax >> "$dir/pipe.out" 2>&1 || true
  after_ok=$(psql_ -d regress_pinax -tA -c "SELECT v FROM pipe")
  psql_ -d regress_pinax -c "DROP TABLE pipe"
  if [[ "$after_fail" == 5 && "$after_ok" == 6 ]] && grep -q "division by zero" "$dir/pipe.out"; then
    echo "pipelines are one transaction: ok"
  else
    echo "pipelines: v after a failed pipeline '$after_fail' (want 5), after a good one '$after_ok' (want 6):"; cat "$dir/pipe.out"; status=1
  fi
fi
# A backend that stops heartbeating (SIGSTOP) holds its locks no longer than the
# transaction timeout: its transaction expires, the waiter goes on, and the stopped
# session's COMMIT fails once it runs again.
if [[ ${#@} == 0 ]]; then
  open_sessions e f
  e "BEGIN; SELECT 'e locked' FROM durable WHERE id = 4 FOR UPDATE; SELECT pg_backend_pid();"
  epid=$(tail -1 "$dir/e.out")
  kill -STOP "$epid"
  t0=$(date +%s)
  f "SELECT 'f locked after expiry' FROM durable WHERE id = 4 FOR UPDATE;"
  for _ in $(seq 1 60); do grep -q 'f locked' "$dir/f.out" && break; sleep 0.5; done
  waited=$(( $(date +%s) - t0 ))
  kill -CONT "$epid"
  e "COMMIT;"
  close_sessions
  if grep -q '^f locked after expiry$' "$dir/f.out" && grep -q '^ERROR:  could not serialize access' "$dir/e.out" && (( waited >= 3 && waited <= 25 )); then
    echo "locks of a stopped backend expire: ok (waiter went on after ${waited}s)"
  else
    echo "locks of a stopped backend expire: unexpected (waited ${waited}s):"; cat "$dir/e.out" "$dir/f.out"; status=1
  fi
fi
# Concurrent transfers keep the total and every committed transfer exactly once.
if [[ ${#@} == 0 ]]; then
  "$here/bank/bank.sh" regress_pinax "$bank_secs" "$bank_clients" "$bank_accounts" || status=1
fi
# The node daemon going away: statements fail with a clear, retryable error
# (SQLSTATE 57P03) and the same session works again once the daemon is back.
if [[ ${#@} == 0 ]]; then
  fifo="$dir/session.in"
  mkfifo "$fifo"
  psql -X -q -tA -d regress_pinax -v VERBOSITY=verbose < "$fifo" > "$dir/session.out" 2>&1 &
  session=$!
  exec 7> "$fifo"
  ask() { echo "$1" >&7; sleep 1; }
  ask "SELECT 'up', count(*) FROM durable;"
  node_pid=$(cat "$dir/pinax.pid")
  kill -9 "$node_pid"
  for _ in $(seq 1 100); do [[ -e /proc/$node_pid ]] || break; sleep 0.05; done
  ask "SELECT 'down', count(*) FROM durable;"
  "$bin" start --no-postgres --data-dir "$dir" --port "$rpc" --pg-port "$pg" >/dev/null
  ask "SELECT 'back', count(*) FROM durable;"
  ask "INSERT INTO durable VALUES (5001, 'after') RETURNING 'inserted';"
  echo '\q' >&7
  exec 7>&-
  wait "$session" || true
  if [[ "$(head -1 "$dir/session.out")" == "up|5000" ]] && sed -n 2p "$dir/session.out" | grep -q '^ERROR:  57P03: pinax storage is unavailable' && grep -q '^back|5000$' "$dir/session.out" && grep -q '^inserted$' "$dir/session.out"; then
    echo "daemon restart under a live session: ok"
  else
    echo "daemon restart under a live session: unexpected output:"; cat "$dir/session.out"; status=1
  fi
fi
# The node must not have logged a panic, nor PostgreSQL a crash.
if grep -E "PANIC|server process .* was terminated|panicked at" "$dir/pinax.log" "$dir/pg/postgres.log" >/dev/null 2>&1; then
  echo "---- crash found in logs ----"
  grep -E -B2 -A5 "PANIC|server process .* was terminated|panicked at" "$dir/pinax.log" "$dir/pg/postgres.log" | head -50
  status=1
fi
exit $status
