#!/usr/bin/env bash
# YCSB core workloads A, B, C, E, F on Pinax and on stock PostgreSQL 15, side by
# side in one run, over the PostgreSQL wire with the extended protocol (pgbench -M
# prepared; the scripts are in bench/ycsb/). Not YCSB's Java client: a
# reimplementation of its operations on pgbench, with these differences, so read
# the ratios, not the absolute figures, against published YCSB numbers:
# - keys `user` + the record number zero-padded to 10 digits (YCSB hashes them);
# - request distribution zipfian with pgbench's smallest exponent, 1.001 (YCSB's
#   constant is 0.99, which pgbench does not accept); E's scan lengths uniform 1-100;
# - updates rewrite field0 (YCSB picks a random field); inserts in E use random new
#   keys above the loaded ones (YCSB counts up).
# usertable: ycsb_key varchar primary key and ten 100-byte fields; range-sharded on
# Pinax (E scans key ranges), 4 tablets. Workloads alternate between the systems;
# failed transactions (40001) are retried (--max-tries), and only successes count.
# Order as YCSB recommends for its core workloads (its wiki, "Core Workloads"):
# load, A, B, C, F (one table, each inheriting the others' updates), then the table
# is dropped and loaded again, and E runs on it. (Before 2026-11-26 E ran after A, B
# and C on the same table, and F after E: E then scanned the versions the updates
# of A and B left, on both systems; figures of E before and after are not comparable.)
#
# Rounds: each workload runs ROUNDS times on each system, the systems taking turns
# to go first (round 1 Pinax, round 2 PostgreSQL, ...). A line per round (`round`),
# then the workload's line: the median throughput and CPU of each system, the median
# of the rounds' ratios, and their spread (lowest-highest ratio of a round).
#
# Usage: bench/ycsb.sh [RECORDS] [SECONDS] [CLIENTS] [ROUNDS]   (default 100000 10 4 3)
# YCSB_WORKLOADS="A F": run only these, in this order (default: A B C F E); E runs on
# a freshly loaded table unless it comes first.
set -euo pipefail
records="${1:-100000}"
secs="${2:-10}"
clients="${3:-4}"
rounds="${4:-3}"
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
here="$root/bench/ycsb"

splits=$(for q in 1 2 3; do printf "user%010d," $((records * q / 4)); done)
splits=${splits%,}
fields=$(for f in $(seq 0 9); do printf ", field%d text" "$f"; done)
values=$(for f in $(seq 0 9); do printf ", substr(repeat(md5(g::text || '%d'), 4), 1, 100)" "$f"; done)
# (Re)create and load usertable on both systems; prints one line per system.
load() {
  local sys with t0
  for sys in pinax stock; do
    with=""
    [[ $sys == pinax ]] && with="WITH (pinax.sharding = 'range', pinax.split_at = '$splits')"
    t0=$(date +%s%N)
    psql_on $sys -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS usertable" -c "CREATE TABLE usertable (ycsb_key varchar PRIMARY KEY $fields) $with" \
      -c "INSERT INTO usertable SELECT 'user' || lpad(g::text, 10, '0') $values FROM generate_series(1, $records) g" \
      -c "ANALYZE usertable"
    echo "$1 $sys: $records records in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  done
}
load load

declare -A mix=(
  [A]="read.sql@50 update.sql@50"
  [B]="read.sql@95 update.sql@5"
  [C]="read.sql@100"
  [E]="scan.sql@95 insert.sql@5"
  [F]="read.sql@50 rmw.sql@50"
)
echo "ycsb: $records records, $clients clients, ${secs}s per workload, system and round, $rounds rounds, $(nproc) cores, $(date -u +%F)"
printf "%-9s %10s %10s %8s %14s %14s %7s %9s %11s\n" workload pinax_tps pg_tps tps_x pinax_cpu_us pg_cpu_us cpu_x retried tps_x_range
# One pgbench run of workload $1 on system $2 in round $3: sets tps, cpu_us and retried [$2,$1,$3].
run_workload() {
  local w=$1 sys=$2 r=$3 files=() f c0 c1 out n
  for f in ${mix[$w]}; do files+=(-f "$here/$f"); done
  c0=$(cpu_of $sys)
  out=$("$pgbin/pgbench" -n -M prepared -h 127.0.0.1 -p "$(port_of $sys)" -U "$user" \
          -c "$clients" -j "$clients" -T "$secs" --max-tries=100 -D records="$records" "${files[@]}" postgres 2>&1) \
    || { echo "$out" | tail -5; }
  c1=$(cpu_of $sys)
  n=$(awk -F'[:/ ]+' '/^number of transactions actually processed/ { print $6; exit }' <<<"$out")
  tps[$sys,$w,$r]=$(awk '/^tps = / { printf "%.0f", $3; exit }' <<<"$out")
  retried[$sys,$w,$r]=$(awk -F'[: ]+' '/^number of transactions retried/ { print $5; exit }' <<<"$out")
  cpu_us[$sys,$w,$r]=$(awk -v c=$((c1 - c0)) -v t="$tck" -v n="${n:-0}" 'BEGIN { if (n > 0) printf "%.0f", c / t * 1e6 / n; else print 0 }')
}
declare -A tps cpu_us retried
ran=0
for w in ${YCSB_WORKLOADS:-A B C F E}; do
  if [[ $w == E && $ran == 1 ]]; then
    load "# reload for E,"
    # The servers settle (Pinax applies the load's intents; PostgreSQL's autovacuum).
    for sys in pinax stock; do wait_idle $sys; done
  fi
  ran=1
  tx=(); cx=(); rp=0; rs=0
  for r in $(seq 1 "$rounds"); do
    order="pinax stock"; (( r % 2 == 0 )) && order="stock pinax"
    for sys in $order; do run_workload "$w" "$sys" "$r"; done
    tx+=("$(ratio "${tps[pinax,$w,$r]}" "${tps[stock,$w,$r]}")"); cx+=("$(ratio "${cpu_us[pinax,$w,$r]}" "${cpu_us[stock,$w,$r]}" %.1f)")
    rp=$((rp + ${retried[pinax,$w,$r]:-0})); rs=$((rs + ${retried[stock,$w,$r]:-0}))
    printf "  round %d %-1s %10s %10s %8s %14s %14s %7s\n" "$r" "$w" "${tps[pinax,$w,$r]}" "${tps[stock,$w,$r]}" "${tx[-1]}" "${cpu_us[pinax,$w,$r]}" "${cpu_us[stock,$w,$r]}" "${cx[-1]}"
  done
  printf "%-9s %10s %10s %8s %14s %14s %7s %9s %11s\n" "$w" "$(round_median tps pinax "$w")" "$(round_median tps stock "$w")" \
    "$(echo "${tx[*]}" | median)" "$(round_median cpu_us pinax "$w")" "$(round_median cpu_us stock "$w")" \
    "$(echo "${cx[*]}" | median)" "$rp/$rs" "$(echo "${tx[*]}" | spread)"
done
