#!/usr/bin/env bash
# What a tablet costs: DDL latency, descriptors and disk, Pinax next to stock
# PostgreSQL 15 (for the DDL), one node.
#
#   create table tN (id int primary key, v text); create index on tN (v);   -- TABLES times
#   insert into tN values (1, 'x');                                          -- each table
#   drop table tN;                                                           -- each table
#
# Each statement group is one psql call per table, the systems taking turns per
# table. Printed: milliseconds per CREATE (table + index) and per DROP on each
# system (wall, psql included), the Pinax daemon's open descriptors, and its data
# directory's bytes (allocated, `du`) before, after the creates (with the bytes per
# tablet), after the inserts and after the drops; the daemon's CPU while idle with
# every tablet created (ms of CPU per second over 10 s). A hash-sharded Pinax table and
# its index have 8 tablets each (one node: `--tablets-per-node 8`).
#
# Usage: bench/tablets.sh [TABLES]   (default 100)
set -euo pipefail
tables="${1:-100}"
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

pid=$(cat "$pinax_home/pinax.pid")
fds() { find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 | wc -l; }
bytes() { du -sb --apparent-size "$pinax_home/data" | cut -f1; }
alloc() { du -sB1 "$pinax_home/data" | cut -f1; }
tablets() { "$bin" status --data-dir "$pinax_home" | grep -c '^    tablet ' || true; }
ms() { echo $(( ($2 - $1) / 1000000 )); }

declare -A spent=([pinax_create]=0 [stock_create]=0 [pinax_drop]=0 [stock_drop]=0 [pinax_insert]=0 [stock_insert]=0)
run() { # run STEP SYS SQL: time one psql call
  local t0 t1
  t0=$(date +%s%N)
  psql_on "$2" -qc "$3" >/dev/null
  t1=$(date +%s%N)
  spent[$2_$1]=$(( ${spent[$2_$1]} + t1 - t0 ))
}
each() { # each STEP SQL-with-@: every table on both systems, in turns
  local i sys order
  for i in $(seq 1 "$tables"); do
    order="pinax stock"; (( i % 2 == 0 )) && order="stock pinax"
    for sys in $order; do run "$1" "$sys" "${2//@/$i}"; done
  done
}

t_before=$(tablets); fd_before=$(fds); b_before=$(alloc); ab_before=$(bytes)
each create "create table t@ (id int primary key, v text); create index t@_v on t@ (v)"
t_after=$(tablets); fd_created=$(fds); b_created=$(alloc); ab_created=$(bytes)
# The daemon idle with every tablet: its CPU over 10 s (Raft timers, ticks).
sleep 2; c0=$(daemon_cpu); sleep 10; idle_ms=$(( ($(daemon_cpu) - c0) * 1000 / tck / 10 ))
each insert "insert into t@ values (1, 'x')"
fd_inserted=$(fds); b_inserted=$(alloc)
each drop "drop table t@"
sleep 2
fd_dropped=$(fds); b_dropped=$(alloc); t_dropped=$(tablets)

n=$(( t_after - t_before ))
per() { echo "scale=1; ${spent[$1]} / 1000000 / $tables" | bc; }
echo "tablets: $tables tables + $tables indexes, $n tablets created (node had $t_before; $t_dropped after the drops), $(date +%F)"
printf "%-28s %10s %10s %7s\n" "ms per statement group" pinax stock ratio
for step in create insert drop; do
  p=$(per "pinax_$step"); s=$(per "stock_$step")
  printf "%-28s %10s %10s %7s\n" "$step" "$p" "$s" "$(echo "scale=1; $p / $s" | bc)"
done
printf "%-28s %10s %10s %10s %10s\n" "pinax daemon" before created inserted dropped
printf "%-28s %10s %10s %10s %10s\n" "open descriptors" "$fd_before" "$fd_created" "$fd_inserted" "$fd_dropped"
printf "%-28s %10s %10s %10s %10s\n" "data dir bytes allocated" "$b_before" "$b_created" "$b_inserted" "$b_dropped"
echo "daemon CPU while idle with $((t_after)) tablets: $idle_ms ms per second"
echo "per created tablet: $(( (fd_created - fd_before) * 1000 / (n > 0 ? n : 1) )) millidescriptors, $(( (b_created - b_before) / (n > 0 ? n : 1) )) bytes allocated, $(( (ab_created - ab_before) / (n > 0 ? n : 1) )) bytes apparent"
