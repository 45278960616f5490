#!/usr/bin/env bash
# Column-level conflicts on Pinax (pinax.column_conflicts on and off) and stock
# PostgreSQL 15, side by side in one run.
#
# 1. Cost, no concurrency: `update t set v = v + 1` over every one of ROWS rows
#    (on: patches, applied as whole rows at commit), then `select sum(v) from t`
#    (reads what it wrote). Median wall ms and server CPU ms of ROUNDS rounds
#    (the order of on, off and stock turns every round).
# 2. Benefit, contention: CLIENTS pgbench clients for SECONDS, each transaction
#    updating two of 8 hot rows, half of them column a, half column b
#    (`begin; update hot set a = a + 1 where id = :i; ... where id = :i + 4;
#    commit`): committed transactions per second, and failed ones (pgbench
#    --max-tries 10 retries 40001 and 40P01).
#
# Usage: bench/column_conflicts.sh [ROWS] [ROUNDS] [SECONDS] [CLIENTS]
#        (default 200000 rows, 3 rounds, 15 s, 4 clients)
set -euo pipefail
rows="${1:-200000}"
rounds="${2:-3}"
seconds="${3:-15}"
clients="${4:-4}"
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

setup="create table t (id int primary key, v float8, w text);
insert into t select g, g, 'x' from generate_series(1, $rows) g;
create table hot (id int primary key, a bigint, b bigint);
insert into hot select g, 0, 0 from generate_series(1, 8) g"
psql_on pinax -c "$setup" >/dev/null
psql_on stock -c "$setup" >/dev/null
wait_idle pinax; wait_idle stock

variants=(on off stock)
declare -A wall cpu
run() { # VARIANT STEP SQL
  local var=$1 step=$2 sql=$3 sys=pinax set_cmd
  [[ $var == stock ]] && sys=stock
  set_cmd="set pinax.column_conflicts = $var"; [[ $var == stock ]] && set_cmd="select 1"
  local c0 t0 t1 c1
  c0=$(cpu_of $sys); t0=$(date +%s%N)
  psql -X -q -tA -h 127.0.0.1 -p "$(port_of $sys)" -U "$user" -d postgres -v ON_ERROR_STOP=1 -c "$set_cmd" -c "$sql" >/dev/null
  t1=$(date +%s%N)
  wait_idle "$sys"
  c1=$(cpu_of $sys)
  wall[$var,$step,$r]=$(( (t1 - t0) / 1000000 ))
  cpu[$var,$step,$r]=$(( (c1 - c0) * 1000 / tck ))
}
steps=("update t set v = v + 1" "select sum(v) from t")
names=(update_all sum_after)
# The order of the variants turns every round: the first of a round pays more of
# the compaction the previous round left (measured: about 20% more CPU).
for r in $(seq 1 "$rounds"); do
  order=("${variants[@]:$(( (r - 1) % 3 ))}" "${variants[@]:0:$(( (r - 1) % 3 ))}")
  for var in "${order[@]}"; do
    for i in "${!steps[@]}"; do run "$var" "$i" "${steps[$i]}"; done
  done
done
echo "column-level conflicts, $rows rows, $rounds rounds (medians), $(nproc) cores, $(date -u +%F)"
printf "%-11s %7s %7s %7s %8s %8s %8s %7s %7s\n" step on_ms off_ms pg_ms on_cpu off_cpu pg_cpu on/off on/pg
for i in "${!steps[@]}"; do
  declare -A m=()
  for var in "${variants[@]}"; do
    m[w$var]=$(round_median wall "$var" "$i")
    m[c$var]=$(round_median cpu "$var" "$i")
  done
  printf "%-11s %7s %7s %7s %8s %8s %8s %7s %7s\n" "${names[$i]}" "${m[won]}" "${m[woff]}" "${m[wstock]}" "${m[con]}" "${m[coff]}" "${m[cstock]}" \
    "$(awk -v a="${m[con]}" -v b="${m[coff]}" 'BEGIN { printf "%.2f", a / (b ? b : 1) }')" "$(awk -v a="${m[con]}" -v b="${m[cstock]}" 'BEGIN { printf "%.2f", a / (b ? b : 1) }')"
done

# 2. contention
for c in a b; do
  printf '\\set i random(1, 4)\nbegin;\nupdate hot set %s = %s + 1 where id = :i;\nupdate hot set %s = %s + 1 where id = :i + 4;\ncommit;\n' "$c" "$c" "$c" "$c" > "$dir/upd_$c.sql"
done
echo
echo "contention: $clients clients, ${seconds} s each, transactions updating two of 8 rows, column a or b"
printf "%-7s %9s %8s\n" variant tps failed
for var in "${variants[@]}"; do
  sys=pinax; [[ $var == stock ]] && sys=stock
  opts=""; [[ $var != stock ]] && opts="-c pinax.column_conflicts=$var"
  out=$(PGOPTIONS="$opts" "$pgbin/pgbench" -n -M prepared -h 127.0.0.1 -p "$(port_of $sys)" -U "$user" \
    -c "$clients" -j "$clients" -T "$seconds" --max-tries 10 -f "$dir/upd_a.sql" -f "$dir/upd_b.sql" postgres 2>&1)
  tps=$(awk '/^tps/ { print $3; exit }' <<<"$out")
  failed=$(awk '/number of failed transactions/ { print $5; exit }' <<<"$out")
  printf "%-7s %9s %8s\n" "$var" "${tps:-?}" "${failed:-0}"
  wait_idle "$sys"
done
