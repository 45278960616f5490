#!/usr/bin/env bash
# Selective sequential scans and aggregates on Pinax (pushdown on and off) and on stock
# PostgreSQL 15, side by side in one run.
#
#   create table f (id int primary key, v float8, k int, s text);  -- ROWS rows
#   select count(*) from f where v > 0.99                -- 1% of the rows
#   select * from f where k = 7                          -- 0.1%, rows returned
#   select count(*) from f where s = 'x' || (id % 50)    -- not pushed (an expression): the same on and off
#   select sum(k), avg(v), max(v) from f                 -- aggregates computed in the tablets
#
# Each query runs ROUNDS times per system, interleaved (pinax pushdown on, pinax
# off, stock); per query the median wall ms and server CPU ms (the backend and, on
# Pinax, the node daemon), and the ratios to stock.
#
# Usage: bench/filters.sh [ROWS] [ROUNDS]     (default 1000000 rows, 5 rounds)
set -euo pipefail
rows="${1:-1000000}"
rounds="${2:-5}"
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

setup="create table f (id int primary key, v float8, k int, s text);
insert into f select g, random(), g % 1000, 'x' || (g % 50) from generate_series(1, $rows) g;
analyze f"
psql_on pinax -c "$setup" >/dev/null
psql_on stock -c "$setup" >/dev/null
wait_idle pinax; wait_idle stock

queries=(
  "select count(*) from f where v > 0.99"
  "select * from f where k = 7"
  "select count(*) from f where s = 'x' || (id % 50)"
  "select sum(k), avg(v), max(v) from f"
)
names=(count_1pct rows_0.1pct not_pushed sum_avg_max)
variants=(on off stock)
declare -A wall cpu
for r in $(seq 1 "$rounds"); do
  for i in "${!queries[@]}"; do
    for var in "${variants[@]}"; do
      sys=pinax; [[ $var == stock ]] && sys=stock
      set_cmd="set pinax.enable_filter_pushdown = $var"; [[ $var == stock ]] && set_cmd="select 1"
      c0=$(cpu_of $sys); t0=$(date +%s%N)
      res=$(psql -X -q -tA -h 127.0.0.1 -p "$(port_of $sys)" -U "$user" -d postgres -v ON_ERROR_STOP=1 -c "select pg_backend_pid()" -c "$set_cmd" -c "${queries[$i]}")
      t1=$(date +%s%N)
      backend=$(head -1 <<<"$res")
      while [[ -e /proc/$backend ]]; do sleep 0.01; done
      c1=$(cpu_of $sys)
      wall[$var,$i,$r]=$(( (t1 - t0) / 1000000 ))
      cpu[$var,$i,$r]=$(( (c1 - c0) * 1000 / tck ))
    done
  done
done
echo "selective scans, $rows rows, $rounds rounds (medians), $(nproc) cores, $(date -u +%F)"
printf "%-12s %8s %8s %8s %7s %7s %9s %9s %9s %7s %7s\n" query on_ms off_ms pg_ms on_x off_x on_cpu off_cpu pg_cpu on_cx off_cx
for i in "${!queries[@]}"; do
  declare -A m=()
  for var in "${variants[@]}"; do
    m[w$var]=$(round_median wall "$var" "$i")
    m[c$var]=$(round_median cpu "$var" "$i")
  done
  printf "%-12s %8d %8d %8d %7s %7s %9d %9d %9d %7s %7s\n" "${names[$i]}" "${m[won]}" "${m[woff]}" "${m[wstock]}" \
    "$(ratio "${m[won]}" "${m[wstock]}" %.1f)" "$(ratio "${m[woff]}" "${m[wstock]}" %.1f)" "${m[con]}" "${m[coff]}" "${m[cstock]}" \
    "$(ratio "${m[con]}" "${m[cstock]}" %.1f)" "$(ratio "${m[coff]}" "${m[cstock]}" %.1f)"
done
