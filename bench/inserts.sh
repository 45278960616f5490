#!/usr/bin/env bash
# Two load paths on Pinax and stock PostgreSQL 15, side by side in one run:
# 1. single-client individual INSERTs over the extended protocol (pgbench -M
#    prepared, one row per statement, autocommit) for SECONDS: rows/s and latency
#    percentiles (from pgbench's per-transaction log);
# 2. COPY of ROWS rows from a file: wall time and server CPU.
# Table: ins(id bigint primary key, a int, b text) (~60-byte rows).
#
# Rounds: both parts run ROUNDS times on each system, the systems taking turns to go
# first; a line per round and system (`round`), then each system's medians (same
# columns as one round), the median of the rounds' Pinax/PostgreSQL ratios, and their
# spread (lowest-highest ratio of a round).
#
# Usage: bench/inserts.sh [SECONDS] [ROWS] [ROUNDS]   (default 10 s, 1000000 rows, 3 rounds)
set -euo pipefail
secs="${1:-10}"
rows="${2:-1000000}"
rounds="${3:-3}"
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

cat > "$dir/insert.sql" <<'SQL'
\set id random(1, 9000000000000000)
INSERT INTO ins VALUES (:id::bigint, (:id::bigint % 1000)::int, 'row ' || :id::bigint);
SQL
csv="$dir/rows.csv"
awk -v n="$rows" 'BEGIN { for (i = 1; i <= n; i++) printf "%d,%d,row %d\n", i, i % 1000, i }' > "$csv"
chmod 644 "$csv"

echo "inserts: single client ${secs}s, COPY of $rows rows, $rounds rounds, $(nproc) cores, $(date -u +%F)"
cols=(rows_per_s p50_ms p99_ms copy_ms copy_cpu_ms)
printf "%-8s %10s %10s %10s %10s %10s\n" system "${cols[@]}"
for sys in pinax stock; do psql_on $sys -c "CREATE TABLE ins (id bigint PRIMARY KEY, a int, b text)"; done
# One round of both parts on system $1 (round $2): sets m[$1,COLUMN,$2].
declare -A m
run_round() {
  local sys=$1 r=$2 n p50 p99 c0 c1 t0 t1 res backend got
  rm -f "$dir"/log_"$sys"*
  (cd "$dir" && "$pgbin/pgbench" -n -M prepared -h 127.0.0.1 -p "$(port_of $sys)" -U "$user" \
      -c 1 -j 1 -T "$secs" --log --log-prefix="$dir/log_$sys" -f "$dir/insert.sql" postgres > "$dir/pgbench_$sys.out" 2>&1) \
    || { tail -5 "$dir/pgbench_$sys.out"; exit 1; }
  # Per-transaction log: client, txn, latency (us), script, time, time_us.
  read -r n p50 p99 < <(cat "$dir"/log_"$sys"* | awk '{ print $3 }' | sort -n | awk '{ v[NR] = $1 } END { printf "%d %.2f %.2f\n", NR, v[int(NR * 0.5) + 1] / 1000, v[int(NR * 0.99) + 1] / 1000 }')
  psql_on $sys -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS ins_copy" -c "CREATE TABLE ins_copy (id bigint PRIMARY KEY, a int, b text)"
  wait_idle $sys
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
  m[$sys,rows_per_s,$r]=$(( n / secs )); m[$sys,p50_ms,$r]=$p50; m[$sys,p99_ms,$r]=$p99
  m[$sys,copy_ms,$r]=$(( (t1 - t0) / 1000000 )); m[$sys,copy_cpu_ms,$r]=$(( (c1 - c0) * 1000 / tck ))
  printf "  round %d %-8s %10s %10s %10s %10s %10s\n" "$r" "$sys" "${m[$sys,rows_per_s,$r]}" "$p50" "$p99" "${m[$sys,copy_ms,$r]}" "${m[$sys,copy_cpu_ms,$r]}"
}
for r in $(seq 1 "$rounds"); do
  order="pinax stock"; (( r % 2 == 0 )) && order="stock pinax"
  for sys in $order; do run_round "$sys" "$r"; done
done
# Medians per system and column: round_median wants ARRAY[VARIANT,STEP,round].
for sys in pinax stock; do
  printf "%-8s" "$sys"
  for c in "${cols[@]}"; do printf " %10s" "$(round_median m "$sys" "$c")"; done
  echo
done
# The rounds' ratios, their median and spread: rows/s, COPY wall, COPY CPU.
declare -A rx
for c in rows_per_s copy_ms copy_cpu_ms; do
  rx[$c]=$(for r in $(seq 1 "$rounds"); do echo -n "$(ratio "${m[pinax,$c,$r]}" "${m[stock,$c,$r]}") "; done)
done
echo "pinax/postgresql: single-client rows/s $(median <<<"${rx[rows_per_s]}") ($(spread <<<"${rx[rows_per_s]}")), COPY wall $(median <<<"${rx[copy_ms]}")x ($(spread <<<"${rx[copy_ms]}")), COPY cpu $(median <<<"${rx[copy_cpu_ms]}")x ($(spread <<<"${rx[copy_cpu_ms]}"))"
# For bench/all.sh: median and spread of each ratio.
echo "ratios $(median <<<"${rx[rows_per_s]}") $(spread <<<"${rx[rows_per_s]}") $(median <<<"${rx[copy_ms]}") $(spread <<<"${rx[copy_ms]}") $(median <<<"${rx[copy_cpu_ms]}") $(spread <<<"${rx[copy_cpu_ms]}")"
