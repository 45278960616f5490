#!/usr/bin/env bash
# The seed workload on Pinax and on stock PostgreSQL 15, side by side in one run.
#
#   create table demo (id uuid default gen_random_uuid() primary key, value float);
#   insert into demo(value) select random() from generate_series(1,N)   -- twice
#   update demo set value = value + 1;  select count(*) from demo;  delete from demo;
#
# Both servers run on this machine with the same settings (fsync on, synchronous
# commit on, shared_buffers 128MB). Steps alternate between the systems; each is a
# separate psql call. Per step it prints wall time and server CPU time (PostgreSQL:
# postmaster + all its processes, including exited backends; Pinax: the same plus the
# node daemon) until the servers are idle again (work left behind counts towards
# the step: Pinax's intents applied after a commit, PostgreSQL's autovacuum), and
# the Pinax/PostgreSQL ratios.
#
# PostgreSQL's table has autovacuum off: its autovacuum of the updated table
# started at a random moment within a minute of the update and landed in the
# count step on some runs (PostgreSQL's count CPU 150 ms one run, 430 the next,
# 2150 ms on 2026-11-27's make bench), and Pinax's counterpart, compactions that
# drop versions older than the history cutoff, lands in no step. Both systems'
# counts then walk every version: 2M live and 2M dead tuples, 4M versions.
#
# Rounds: the whole workload runs ROUNDS times, the systems taking turns to go first
# at each step (round 1 Pinax, round 2 PostgreSQL, ...). A table of every round's
# steps, then per step the median server CPU of each system, the median of the
# rounds' ratios and their spread (lowest-highest ratio of a round).
#
# PINAX_THREADS=1: also print (stderr) each Pinax step's daemon CPU by thread kind.
#
# Usage: bench/seed.sh [ROWS] [ROUNDS]     (default 1000000 rows, 1 round)
set -euo pipefail
rows="${1:-1000000}"
rounds="${2:-1}"
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

steps=(
  "create table demo (id uuid default gen_random_uuid() primary key, value float)"
  "insert into demo(value) select random() from generate_series(1,$rows)"
  "insert into demo(value) select random() from generate_series(1,$rows)"
  "update demo set value = value + 1"
  "select count(*) from demo"
  "delete from demo"
  "drop table demo"
)
names=(create insert1 insert2 update count delete drop)
declare -A wall cpu
for r in $(seq 1 "$rounds"); do
  for i in "${!steps[@]}"; do
    order="pinax stock"; (( r % 2 == 0 )) && order="stock pinax"
    for sys in $order; do
      [[ $sys == pinax && ${PINAX_THREADS:-} == 1 ]] && th0=$(daemon_threads)
      c0=$(cpu_of $sys); t0=$(date +%s%N)
      res=$(psql -X -q -tA -h 127.0.0.1 -p "$(port_of $sys)" -U "$user" -d postgres -v ON_ERROR_STOP=1 -c "select pg_backend_pid()" -c "${steps[$i]}")
      t1=$(date +%s%N)
      # The backend's CPU reaches the postmaster's cutime only once it is reaped.
      backend=$(head -1 <<<"$res"); out=$(tail -n +2 <<<"$res")
      while [[ -e /proc/$backend ]]; do sleep 0.01; done
      # Work the statement left behind (Pinax applies a transaction's intents
      # after its commit returns) counts towards it: without this, a step's CPU
      # showed part of its predecessor's and the last step's went unmeasured.
      wait_idle $sys
      c1=$(cpu_of $sys)
      [[ $sys == pinax && ${PINAX_THREADS:-} == 1 ]] && echo "round $r ${names[$i]} daemon threads (ms): $(threads_diff "$th0" "$(daemon_threads)")" >&2
      if [[ $sys == stock && ${names[$i]} == create ]]; then
        psql_on stock -c "ALTER TABLE demo SET (autovacuum_enabled = off)"
      fi
      [[ ${names[$i]} == count && "$out" != "$((2 * rows))" ]] && { echo "wrong count on $sys: $out" >&2; exit 1; }
      wall[$sys,$i,$r]=$(( (t1 - t0) / 1000000 ))
      cpu[$sys,$i,$r]=$(( (c1 - c0) * 1000 / tck ))
    done
  done
done
echo "seed workload, $rows rows per insert, $rounds round(s), $(nproc) cores, $(date -u +%F)"
printf "%-8s %12s %12s %7s %12s %12s %7s\n" step pinax_ms pg_ms wall_x pinax_cpu_ms pg_cpu_ms cpu_x
for i in "${!steps[@]}"; do
  for r in $(seq 1 "$rounds"); do
    pw=${wall[pinax,$i,$r]}; sw=${wall[stock,$i,$r]}; pc=${cpu[pinax,$i,$r]}; sc=${cpu[stock,$i,$r]}
    printf "%-8s %12d %12d %7s %12d %12d %7s\n" "${names[$i]}" "$pw" "$sw" "$(ratio "$pw" "$sw" %.1f)" "$pc" "$sc" "$(ratio "$pc" "$sc" %.1f)"
  done
done
echo "medians over $rounds round(s), server CPU"
printf "%-8s %12s %12s %7s %11s\n" step pinax_cpu_ms pg_cpu_ms cpu_x cpu_x_range
for i in "${!steps[@]}"; do
  rx=$(for r in $(seq 1 "$rounds"); do echo -n "$(ratio "${cpu[pinax,$i,$r]}" "${cpu[stock,$i,$r]}" %.1f) "; done)
  printf "%-8s %12s %12s %7s %11s\n" "${names[$i]}" "$(round_median cpu pinax "$i")" "$(round_median cpu stock "$i")" "$(median <<<"$rx")" "$(spread <<<"$rx")"
done
