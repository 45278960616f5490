#!/usr/bin/env bash
# Schema changes under writes from other SQL nodes (issue #43): a local 3-node
# cluster; nodes 2 and 3 insert, update and delete rows of a table in loops
# while node 1 runs CREATE INDEX, CREATE UNIQUE INDEX (one over a duplicate,
# which must fail), ALTER TABLE ... ALTER COLUMN TYPE (a rewrite) and CREATE
# INDEX CONCURRENTLY. The DDL takes its table locks on every node
# (pg/ext/src/ddl_lock.rs), so the writers wait while it runs and go on with the
# new definition after it; CONCURRENTLY holds them only while the index becomes
# write-only everywhere, then backfills it while they write
# (pg/ext/src/concurrent_index.rs). Afterwards, on
# every node, each index answers what the table holds (counts through each
# index and lookups of every row) and every acknowledged insert is there; the
# rows from before the ALTER hold their converted values. The writers may see
# only retryable errors. Then DDL run by a DO block and a function on node 2
# must reach nodes 1 and 3.
#
# Usage: pg/ext/test/online_ddl.sh [ROWS]   (default 20000)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${PINAX_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/pinax/target}/debug/pinax}"
rows="${1:-20000}"

# shellcheck source=pg/ext/test/lib.sh
source "$here/lib.sh"
rpc=$(pick_ports 6)
pg=$((rpc + 3))
dir="$(mktemp -d /tmp/pinax-ddl.XXXXXX)"
chmod 755 "$dir"
writers=()
cleanup() {
  for w in "${writers[@]}"; do kill "$w" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$bin" cluster stop --data-dir "$dir" >/dev/null 2>&1 || true
  [[ -n "${KEEP:-}" ]] || rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "online_ddl: FAIL: $*" >&2
  for l in "$dir"/node-*/pinax.log; do echo "--- $l"; grep -i "ddl\|lock" "$l" | tail -15; done >&2
  exit 1
}

"$bin" cluster start --nodes 3 --data-dir "$dir" --base-port "$rpc" --pg-port "$pg" --tablets-per-node 2 >/dev/null || fail "cluster start"
export PGHOST=127.0.0.1 PGUSER=$superuser PGPASSFILE="$dir/credentials"
pg1=$pg pg2=$((pg + 1)) pg3=$((pg + 2))
on() { local port=$1; shift; psql -X -q -v ON_ERROR_STOP=1 -p "$port" -d ddl -tA "$@"; }
psql -X -q -p "$pg1" -d postgres -c "CREATE DATABASE ddl"
on "$pg1" -c "CREATE TABLE t (id int PRIMARY KEY, k int NOT NULL, v int NOT NULL)" \
  -c "INSERT INTO t SELECT g, g, g FROM generate_series(1, $rows) g"

# A writer through node PORT: rows of its own key range (BASE + i) inserted,
# some updated and deleted; each acknowledged insert is logged (id), each delete
# too. Retryable errors (40001, 40P01, 55P03, 57P03) are counted; any other fails it.
writer() { # writer PORT BASE
  local port=$1 base=$2 i=0 out
  : >"$dir/acked-$base" ; : >"$dir/deleted-$base"; : >"$dir/errors-$base"
  while [[ ! -e "$dir/stop" ]]; do
    i=$((i + 1))
    local id=$((base + i))
    if out=$(on "$port" -c "INSERT INTO t VALUES ($id, $id, $id)" 2>&1); then
      echo "$id" >>"$dir/acked-$base"
    else
      echo "$out" >>"$dir/errors-$base"
    fi
    if ((i % 5 == 0)); then
      on "$port" -c "UPDATE t SET v = v + 1 WHERE id = $((base + i - 2))" >/dev/null 2>>"$dir/errors-$base" || true
    fi
    if ((i % 7 == 0)); then
      if on "$port" -c "DELETE FROM t WHERE id = $((base + i - 3))" >/dev/null 2>>"$dir/errors-$base"; then
        echo "$((base + i - 3))" >>"$dir/deleted-$base"
      fi
    fi
  done
}
writer "$pg2" 1000000 &
writers+=($!)
writer "$pg3" 2000000 &
writers+=($!)
sleep 2

t0=$(date +%s%N)
on "$pg1" -c "CREATE INDEX t_k ON t (k)" || fail "CREATE INDEX on node 1 while nodes 2 and 3 write"
t1=$(date +%s%N)
on "$pg1" -c "CREATE UNIQUE INDEX t_v_unique ON t (id, v)" || fail "CREATE UNIQUE INDEX on node 1 while nodes 2 and 3 write"
# A unique index over values that repeat fails cleanly (23505) and leaves nothing behind.
err=$(on "$pg1" -c "CREATE UNIQUE INDEX t_dup ON t ((v % 10))" 2>&1) && fail "a unique index over duplicates was built"
grep -q "could not create unique index" <<<"$err" || fail "a unique index over duplicates: $err"
sleep 1
t2=$(date +%s%N)
on "$pg1" -c "ALTER TABLE t ALTER COLUMN v TYPE bigint USING v::bigint * 10" || fail "ALTER COLUMN TYPE on node 1 while nodes 2 and 3 write"
t3=$(date +%s%N)
sleep 1
# CONCURRENTLY: the writers go on while it builds (indexes on v, which their
# updates change: entries moved under the build), unique ones too; one over
# duplicates fails cleanly.
# Its progress shows in pg_stat_progress_create_index on node 1, as it goes
# (watched from one session every 5 ms: the backend status is re-read each time;
# the build starts once the watcher says it is watching).
on "$pg1" >"$dir/progress" 2>&1 -c "DO \$\$ DECLARE r record; last text := 'nothing'; BEGIN
  RAISE NOTICE 'watching';
  FOR i IN 1..12000 LOOP
    PERFORM pg_stat_clear_snapshot();
    FOR r IN SELECT command, phase, tuples_done FROM pg_stat_progress_create_index WHERE relid = 't'::regclass LOOP
      last := r.command || '|' || r.phase || '|' || r.tuples_done;
      IF r.command = 'CREATE INDEX CONCURRENTLY' AND r.tuples_done > 0 THEN RAISE NOTICE 'seen %', last; RETURN; END IF;
    END LOOP;
    PERFORM pg_sleep(0.005);
  END LOOP;
  RAISE NOTICE 'not seen; last: %', last; END \$\$" &
watcher=$!
for _ in $(seq 300); do grep -q watching "$dir/progress" && break; sleep 0.1; done
grep -q watching "$dir/progress" || fail "the progress watcher did not start: $(cat "$dir/progress")"
t4=$(date +%s%N)
on "$pg1" -c "CREATE INDEX CONCURRENTLY t_vc ON t (v)" || fail "CREATE INDEX CONCURRENTLY on node 1 while nodes 2 and 3 write"
t5=$(date +%s%N)
wait "$watcher" || true
grep -q "seen CREATE INDEX CONCURRENTLY|building index: scanning table|" "$dir/progress" ||
  fail "no progress of the concurrent build (took $(( (t5 - t4) / 1000000 )) ms) in pg_stat_progress_create_index: $(cat "$dir/progress")"
on "$pg1" -c "CREATE UNIQUE INDEX CONCURRENTLY t_uc ON t (v, id)" || fail "CREATE UNIQUE INDEX CONCURRENTLY on node 1 while nodes 2 and 3 write"
err=$(on "$pg1" -c "CREATE UNIQUE INDEX CONCURRENTLY t_dupc ON t ((v % 10))" 2>&1) && fail "a concurrent unique index over duplicates was built"
grep -q "could not create unique index" <<<"$err" || fail "a concurrent unique index over duplicates: $err"
on "$pg1" -c "DROP INDEX t_dupc"
sleep 2
touch "$dir/stop"
for w in "${writers[@]}"; do wait "$w" || true; done
writers=()

# Nothing but retryable errors for the writers.
# (The unique index over duplicates is enforced from its first step until it is
# dropped, as PostgreSQL's: writers meeting it get 23505.)
bad=$(cat "$dir"/errors-* | grep ERROR | grep -v "could not serialize\|deadlock detected\|could not lock\|lock timeout\|unavailable\|restart\|constraint \"t_dupc\"" || true)
[[ -z "$bad" ]] || fail "writers met errors that are not retryable: $(head -5 <<<"$bad")"
acked=$(cat "$dir"/acked-* | wc -l)
((acked > 20)) || fail "the writers did little ($acked inserts): $(head -3 "$dir"/errors-*)"

# On every node: the indexes agree with the table; every acknowledged insert
# not deleted is there, its value converted (v = 10 * id, or more if updated).
sort -n "$dir"/acked-* >"$dir/acked"
sort -n "$dir"/deleted-* >"$dir/deleted"
comm -23 "$dir/acked" "$dir/deleted" >"$dir/live"
for p in $pg1 $pg2 $pg3; do
  on "$p" -c "ANALYZE t" >/dev/null
  seq=$(on "$p" -c "SET enable_indexscan = off" -c "SET enable_indexonlyscan = off" -c "SET enable_bitmapscan = off" -c "SELECT count(*) FROM t")
  by_k=$(on "$p" -c "SET enable_seqscan = off" -c "SELECT count(*) FROM t WHERE k > 0")
  by_u=$(on "$p" -c "SET enable_seqscan = off" -c "SELECT count(*) FROM t WHERE id > 0 AND v > 0")
  by_vc=$(on "$p" -c "SET enable_seqscan = off" -c "SELECT count(*) FROM t WHERE v > -1")
  by_uc=$(on "$p" -c "SET enable_seqscan = off" -c "SELECT count(*) FROM t WHERE v > -1 AND id > 0")
  [[ "$seq" == "$by_uc" ]] || fail "node on port $p: table $seq rows, index t_uc $by_uc"
  [[ "$seq" == "$by_k" && "$seq" == "$by_u" && "$seq" == "$by_vc" ]] || fail "node on port $p: table $seq rows, index t_k $by_k, index t_v_unique $by_u, index t_vc $by_vc"
  plan=$(on "$p" -c "SET enable_seqscan = off" -c "EXPLAIN SELECT count(*) FROM t WHERE v > -1")
  grep -qE "t_vc|t_uc" <<<"$plan" || fail "node on port $p uses neither concurrent index: $(on "$p" -c "SELECT indisvalid, indisready, indcheckxmin, xmin, txid_snapshot_xmin(txid_current_snapshot()) FROM pg_index WHERE indexrelid = 't_vc'::regclass") $plan"
  plan=$(on "$p" -c "SET enable_seqscan = off" -c "EXPLAIN SELECT count(*) FROM t WHERE k > 0")
  grep -q "t_k" <<<"$plan" || fail "node on port $p does not use t_k: $plan"
  ids=$(tr '\n' ',' <"$dir/live" | sed 's/,$//')
  found=$(on "$p" -c "SET enable_seqscan = off" -c "SELECT count(*) FROM t WHERE k IN ($ids)")
  [[ "$found" == "$(wc -l <"$dir/live")" ]] || fail "node on port $p: $found of $(wc -l <"$dir/live") acknowledged rows found through t_k"
  typ=$(on "$p" -c "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 't'::regclass AND attname = 'v'")
  [[ "$typ" == bigint ]] || fail "node on port $p: column v is $typ"
  old=$(on "$p" -c "SELECT count(*) FROM t WHERE id <= $rows AND v <> 10 * id")
  [[ "$old" == 0 ]] || fail "node on port $p: $old original rows without their converted value"
done
# DDL run by a DO block and by a function (static and dynamic statements) on
# node 2 reaches nodes 1 and 3; a block's statement rolled back with its
# exception block does not.
on "$pg2" -c "DO \$\$ BEGIN
  CREATE TABLE from_do (id int PRIMARY KEY, v text);
  EXECUTE format('CREATE INDEX %I ON from_do (v)', 'from_do_v');
  BEGIN
    CREATE TABLE rolled_back (a int);
    RAISE EXCEPTION 'undo';
  EXCEPTION WHEN raise_exception THEN NULL;
  END;
END \$\$" -c "CREATE FUNCTION make_t(n text) RETURNS void LANGUAGE plpgsql AS \$\$ BEGIN EXECUTE format('CREATE TABLE %I (a int)', n); END \$\$" \
  -c "SELECT make_t('from_fn')" >/dev/null || fail "DDL in a DO block on node 2"
on "$pg1" -c "INSERT INTO from_do VALUES (1, 'one')" -c "INSERT INTO from_fn VALUES (7)" || fail "tables made by node 2's DO block and function, used on node 1"
got=$(on "$pg3" -c "SET enable_seqscan = off" -c "SELECT v FROM from_do WHERE v = 'one'" -c "SELECT a FROM from_fn" -c "SELECT count(*) FROM pg_class WHERE relname IN ('from_do_v', 'rolled_back')" | tr '\n' ' ')
[[ "$got" == "one 7 1 " ]] || fail "node 3 after node 2's DO block and function: '$got' (want 'one 7 1 ')"
echo "online_ddl: DDL in DO blocks and functions reaches every node: ok"

ms() { echo $((($2 - $1) / 1000000)); }
echo "online_ddl: $rows rows, $acked inserts acknowledged by nodes 2 and 3 meanwhile ($(cat "$dir"/errors-* | grep -c ERROR || true) retryable errors); CREATE INDEX $(ms "$t0" "$t1") ms, ALTER COLUMN TYPE $(ms "$t2" "$t3") ms, CREATE INDEX CONCURRENTLY $(ms "$t4" "$t5") ms; indexes and rows agree on all 3 nodes: ok"
