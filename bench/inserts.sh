#!/usr/bin/env bash
# Two load paths on Pinax and stock PostgreSQL 15, side by side in one run:
# 1. single-client individual INSERTs over the extended protocol (pgbench -M
#    prepared, one row per statement, autocommit) for SECONDS: rows/s and latency
#    percentiles (from pgbench's per-transaction log);
# 2. COPY of ROWS rows from a file: wall time and server CPU.
# Table: ins(id bigint primary key, a int, b text) (~60-byte rows).
#
# Usage: bench/inserts.sh [SECONDS] [ROWS]   (default 20 s, 1000000 rows)
set -euo pipefail
secs="${1:-20}"
rows="${2:-1000000}"
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

cat > "$dir/insert.sql" <<'SQL'
\set id random(1, 9000000000000000)
INSERT INTO ins VALUES (:id::bigint, (:id::bigint % 1000)::int, 'row ' || :id::bigint);
SQL
csv="$dir/rows.csv"
awk -v n="$rows" 'BEGIN { for (i = 1; i <= n; i++) printf "%d,%d,row %d\n", i, i % 1000, i }' > "$csv"
chmod 644 "$csv"

echo "inserts: single client ${secs}s, COPY of $rows rows, $(nproc) cores, $(date -u +%F)"
printf "%-8s %10s %10s %10s %10s %10s\n" system rows_per_s p50_ms p99_ms copy_ms copy_cpu_ms
declare -A res
for sys in pinax stock; do
  psql_on $sys -c "CREATE TABLE ins (id bigint PRIMARY KEY, a int, b text)" -c "CREATE TABLE ins_copy (id bigint PRIMARY KEY, a int, b text)"
  (cd "$dir" && "$pgbin/pgbench" -n -M prepared -h 127.0.0.1 -p "$(port_of $sys)" -U "$user" \
      -c 1 -j 1 -T "$secs" --log --log-prefix="$dir/log_$sys" -f "$dir/insert.sql" postgres > "$dir/pgbench_$sys.out" 2>&1) \
    || { tail -5 "$dir/pgbench_$sys.out"; exit 1; }
  # Per-transaction log: client, txn, latency (us), script, time, time_us.
  read -r n p50 p99 < <(cat "$dir"/log_"$sys"* | awk '{ print $3 }' | sort -n | awk '{ v[NR] = $1 } END { printf "%d %.2f %.2f\n", NR, v[int(NR * 0.5) + 1] / 1000, v[int(NR * 0.99) + 1] / 1000 }')
  c0=$(cpu_of $sys); t0=$(date +%s%N)
  res=$(psql_on $sys -tA -c "SELECT pg_backend_pid()" -c "\\copy ins_copy FROM '$csv' WITH (FORMAT csv)")
  t1=$(date +%s%N)
  # A backend's CPU reaches the postmaster's counters once it is reaped; work the
  # COPY left behind (Pinax applies intents after the commit) counts towards it.
  backend=$(head -1 <<<"$res")
  while [[ -e /proc/$backend ]]; do sleep 0.01; done
  wait_idle $sys
  c1=$(cpu_of $sys)
  got=$(psql_on $sys -tA -c "SELECT count(*) FROM ins_copy")
  [[ "$got" == "$rows" ]] || { echo "COPY on $sys loaded $got rows, not $rows" >&2; exit 1; }
  res[$sys]="$(( n / secs )) $p50 $p99 $(( (t1 - t0) / 1000000 )) $(( (c1 - c0) * 1000 / tck ))"
  # shellcheck disable=SC2086
  printf "%-8s %10s %10s %10s %10s %10s\n" $sys ${res[$sys]}
done
read -r pr _ _ pc pcc <<<"${res[pinax]}"; read -r sr _ _ sc scc <<<"${res[stock]}"
awk -v pr="$pr" -v sr="$sr" -v pc="$pc" -v sc="$sc" -v pcc="$pcc" -v scc="$scc" \
  'BEGIN { printf "pinax/postgresql: single-client rows/s %.2f, COPY wall %.1fx, COPY cpu %.1fx\n", pr / sr, pc / sc, pcc / (scc > 0 ? scc : 1) }'
